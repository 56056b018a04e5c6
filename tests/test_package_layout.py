"""Every module imports by its dotted path and is that module; the facade shadows none of them."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

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
        "tflkit.validation.run",
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


def test_import_tflkit_is_light():
    code = "import sys, tflkit; print(sorted(m for m in sys.modules if m.startswith('tflkit')))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    ).stdout.strip()
    assert out == "['tflkit']"


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
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"


# --- the layering --------------------------------------------------------------------------------

_ROOT = Path(__file__).resolve().parents[1]
_RUNTIMES = ("ai_edge_litert", "tensorflow", "tflkit.gpu", "tflkit.delegates")


def _source_modules() -> dict[str, Path]:
    """Dotted name -> file, for tflkit/ and the mapped converters/ and delegates/ folders."""
    found = {}
    for top, prefix in (("tflkit", "tflkit"), ("converters", "tflkit.converters"),
                        ("delegates", "tflkit.delegates")):  # fmt: skip
        for path in sorted((_ROOT / top).rglob("*.py")):
            parts = path.relative_to(_ROOT / top).with_suffix("").parts
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


def _edges() -> dict[str, set[str]]:
    modules = _source_modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


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


def test_no_two_packages_import_each_other():
    uses: dict[str, set[str]] = {}
    for name, targets in _edges().items():
        if name == "tflkit" or name.count(".") < 2:  # the facade and package docstrings
            continue
        for target in targets:
            if target.startswith("tflkit.") and _package(target) != _package(name):
                uses.setdefault(_package(name), set()).add(_package(target))
    pairs = {tuple(sorted((a, b))) for a, bs in uses.items() for b in bs if a in uses.get(b, ())}
    assert not pairs


def test_no_import_cycle_between_modules():
    edges = _edges()
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> list[str] | None:
        state[name] = 1
        for target in sorted(edges.get(name, ())):
            if target not in edges or target == name:
                continue
            if name.startswith(target + ".") or target.startswith(name + "."):
                continue  # a package's own __init__ and its submodules
            if state.get(target) == 1:
                return [*path, name, target]
            if target not in state:
                cycle = visit(target, [*path, name])
                if cycle:
                    return cycle
        state[name] = 2
        return None

    for name in sorted(edges):
        if name not in state and name != "tflkit":
            cycle = visit(name, [])
            assert cycle is None, " -> ".join(cycle)


def test_few_loose_modules():
    loose = sorted(p.name for p in (_ROOT / "tflkit").glob("*.py"))
    assert len(loose) <= 6, loose
