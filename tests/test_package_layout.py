"""Every module imports by its dotted path and is that module; the facade shadows none of them."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import tflkit


def _module_names() -> list[str]:
    names = {"tflkit"}
    # converters/ and delegates/ are mapped into the package by pyproject's package-dir
    for package in ("tflkit", "tflkit.converters", "tflkit.delegates"):
        names.add(package)
        path = importlib.import_module(package).__path__
        names.update(info.name for info in pkgutil.walk_packages(path, prefix=f"{package}."))
    # __main__ runs the CLI when imported; it is an entry point, not a module to import
    return sorted(n for n in names if not n.endswith(".__main__"))


def test_walks_the_whole_package():
    names = _module_names()
    for expected in (
        "tflkit.rewriter.rules",
        "tflkit.validation.pipeline",
        "tflkit.inspection",
        "tflkit.converters",
        "tflkit.delegates",
        "tflkit.ir.serde",
    ):
        assert expected in names


def test_every_module_is_itself_under_its_dotted_path():
    for name in _module_names():
        module = importlib.import_module(name)
        assert module.__name__ == name
        parent, _, leaf = name.rpartition(".")
        if parent:
            # the attribute of the parent package is the module, not a function shadowing it
            assert getattr(sys.modules[parent], leaf) is module, name


def test_facade_names_are_functions_and_no_module_has_their_name():
    modules = set(_module_names())
    for name in tflkit.__all__:
        value = getattr(tflkit, name)
        assert f"tflkit.{name}" not in modules, name
        assert callable(value), name


def _last_line_of(code: str) -> str:
    """The last line ``code`` prints, run in a fresh interpreter from the repo root."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    return done.stdout.strip().splitlines()[-1]


def test_import_tflkit_is_light():
    code = "import sys, tflkit; print(sorted(m for m in sys.modules if m.startswith('tflkit')))"
    assert _last_line_of(code) == "['tflkit']"


def test_cli_default_target_is_the_tables_default():
    from tflkit.cli import check_cmd
    from tflkit.compat.targets import DEFAULT_TARGET

    assert check_cmd.DEFAULT_TARGET == DEFAULT_TARGET


def test_help_imports_only_the_cli():
    """``tflkit --help`` (and each command's ``--help``) loads no numpy, LiteRT or IR."""
    code = (
        "import sys\n"
        "from tflkit.cli.main import main\n"
        "for args in (['--help'], ['check', '--help'], ['validate', '--help']):\n"
        "    assert main(args) == 0\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('numpy', 'ai_edge_litert', 'tensorflow') or m.startswith('tflkit.ir'))\n"
        "print(heavy)\n"
    )
    assert _last_line_of(code) == "[]"


def test_the_rule_catalogue_imports_without_numpy():
    """Every rule module imports numpy, the op builder, the generated schema and the CPU
    interpreter only where it builds or runs: naming a fix in ``check`` needs none of them."""
    code = (
        "import sys\n"
        "import tflkit.rewriter.rules.catalogue\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('numpy', 'ai_edge_litert', 'flatbuffers') or m.startswith('tflkit.delegates')))\n"
    )
    assert _last_line_of(code) == "[]"


@pytest.mark.parametrize(
    ("last_op", "rule_modules"),
    [
        ("TANH", []),  # the GPU takes the model whole: no rule is asked
        ("LOG_SOFTMAX", ["activation", "constant", "index"]),  # its rule, and folding's
    ],
)
def test_check_imports_no_runner_nor_other_command(
    tmp_path: Path, last_op: str, rule_modules: list[str]
):
    """``tflkit check --json MODEL`` (no probe) loads neither the runner registry, the probe's
    modules, numpy nor another command's module (``bench/cli_startup.py``: 1.68x the Typer
    anchor with them, 1.41x without); of the rewrite rules, only the modules of those that may
    fix a rejected op's type, found in the catalogue's index (what that costs on the 211 MB model:
    ``bench/ir_large.py --layers 800 --tasks check --log-softmax --against REV``)."""
    import numpy as np

    from tflkit import ir
    from tflkit.ir.builder import OpBuilder

    made = ir.Model()
    graph = made.add_subgraph("main")
    x = graph.new_tensor("x", (1, 8), np.float32)
    graph.inputs = [x]
    b = OpBuilder(graph)
    options = ir.schema.fb.LogSoftmaxOptionsT() if last_op == "LOG_SOFTMAX" else None
    graph.outputs = [b.op(last_op, [b.RELU(x)], options=options)]
    model = tmp_path / "relu_then.tflite"
    ir.save(made, model)
    code = (
        "import contextlib, io, json, sys\n"
        "from tflkit.cli.main import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        f"    assert main(['check', '--json', {str(model)!r}]) == 0\n"
        "fixes = [op['fix']['rule'] for op in json.loads(out.getvalue())['ops'] if op['fix']]\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'numpy' or m.startswith("
        "('tflkit.delegates', 'tflkit.gpu', 'tflkit.compat.probe_verdicts', "
        "'tflkit.report.probe_report', 'ai_edge_litert')) or (m.startswith('tflkit.cli.') and "
        "m.endswith('_cmd') and m != 'tflkit.cli.check_cmd'))\n"
        "rules = sorted(m.rpartition('.')[2] for m in sys.modules "
        "if m.startswith('tflkit.rewriter.rules.'))\n"
        "print(json.dumps([fixes, loaded, rules]))\n"
    )
    fixes, loaded, rules = json.loads(_last_line_of(code))
    assert fixes == (["log_softmax"] if last_op == "LOG_SOFTMAX" else [])
    assert loaded == []
    assert rules == rule_modules


# --- the layering --------------------------------------------------------------------------------

_ROOT = Path(__file__).resolve().parents[1]
_RUNTIMES = ("ai_edge_litert", "tensorflow", "tflkit.gpu", "tflkit.delegates")


def _source_modules(root: Path = _ROOT) -> dict[str, Path]:
    """Dotted name -> file, for tflkit/ and the mapped converters/ and delegates/ folders."""
    found = {}
    for top, prefix in (("tflkit", "tflkit"), ("converters", "tflkit.converters"),
                        ("delegates", "tflkit.delegates")):  # fmt: skip
        for path in sorted((root / top).rglob("*.py")):
            parts = path.relative_to(root / top).with_suffix("").parts
            name = ".".join((prefix, *parts))
            found[name.removesuffix(".__init__")] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Modules (and external top-level names) ``name`` imports, in functions too."""
    import ast

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
            targets.update(subs or [base])
    return targets


def _package(name: str) -> str:
    return ".".join(name.split(".")[:2])


def _edges(root: Path = _ROOT) -> dict[str, set[str]]:
    modules = _source_modules(root)
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _package_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """Package -> the other tflkit packages its modules import (the facade and the package
    docstrings aside: ``tflkit/__init__.py`` re-exports lazily by design)."""
    uses: dict[str, set[str]] = {}
    for name, targets in edges.items():
        if name == "tflkit" or name.count(".") < 2:
            continue
        for target in targets:
            if target.startswith("tflkit.") and _package(target) != _package(name):
                uses.setdefault(_package(name), set()).add(_package(target))
    return uses


def _module_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """Module -> the tflkit modules it imports, without a package's own ``__init__`` and its
    submodules importing each other (a package re-exporting its parts is not a cycle)."""
    return {
        name: {
            t
            for t in targets
            if t in edges
            and t != name
            and not (name.startswith(t + ".") or t.startswith(name + "."))
        }
        for name, targets in edges.items()
        if name != "tflkit"
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm, iterative):
    every import cycle, of any length, as the sorted set of nodes on it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    nodes = sorted(set(graph) | {t for ts in graph.values() for t in ts})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_compare_runs_nothing():
    """compare/ sees arrays only: it imports no runtime, no runner and not the GPU engine."""
    bad = {
        (name, target)
        for name, targets in _edges().items()
        if name.startswith("tflkit.compare")
        for target in targets
        if target.startswith(_RUNTIMES) and target != "tflkit.delegates.base"
    }
    assert not bad


def test_no_cycle_between_packages():
    """No package reaches itself through the others' imports, at any length (a -> b -> c -> a
    as well as a <-> b)."""
    cycles = _cycles(_package_graph(_edges()))
    assert not cycles, "; ".join(" -> ".join(c) for c in cycles)


def test_no_import_cycle_between_modules():
    cycles = _cycles(_module_graph(_edges()))
    assert not cycles, "; ".join(" -> ".join(c) for c in cycles)


def _plant(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_planted_three_package_cycle_is_caught(tmp_path: Path):
    """Three packages importing in a ring (no two of them import each other), written as
    files and read by the same parser as the real tree: the package check names all three,
    the module check the three modules on the ring; a ring of packages needs no ring of
    modules (gamma/leaf.py closes it alone)."""
    _plant(
        tmp_path,
        {
            "tflkit/__init__.py": "",
            "tflkit/alpha/__init__.py": "",
            "tflkit/alpha/one.py": "from tflkit.beta import two\n",
            "tflkit/beta/__init__.py": "",
            "tflkit/beta/two.py": "def f():\n    from tflkit.gamma.three import g\n",
            "tflkit/gamma/__init__.py": "",
            "tflkit/gamma/three.py": "from ..alpha import one\n\ng = 1\n",
            "tflkit/gamma/leaf.py": "import tflkit.alpha.one\n",
            "converters/__init__.py": "",
            "delegates/__init__.py": "",
        },
    )
    edges = _edges(tmp_path)
    packages = _package_graph(edges)
    assert not {(a, b) for a, bs in packages.items() for b in bs if a in packages.get(b, ())}
    assert _cycles(packages) == [["tflkit.alpha", "tflkit.beta", "tflkit.gamma"]]
    assert _cycles(_module_graph(edges)) == [
        ["tflkit.alpha.one", "tflkit.beta.two", "tflkit.gamma.three"]
    ]
    # the module ring broken: gamma/leaf.py still closes the ring of packages
    _plant(tmp_path, {"tflkit/gamma/three.py": "g = 1\n"})
    edges = _edges(tmp_path)
    assert _cycles(_module_graph(edges)) == []
    assert _cycles(_package_graph(edges)) == [["tflkit.alpha", "tflkit.beta", "tflkit.gamma"]]
    _plant(tmp_path, {"tflkit/gamma/leaf.py": "g = 2\n"})
    assert _cycles(_package_graph(_edges(tmp_path))) == []


def test_cycles_finds_every_component():
    """Two rings and a tail, in one graph: each ring once, the tail in none."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert sorted(_cycles(graph)) == [["a", "b", "c"], ["d", "e"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_few_loose_modules():
    loose = sorted(p.name for p in (_ROOT / "tflkit").glob("*.py"))
    assert len(loose) <= 6, loose
