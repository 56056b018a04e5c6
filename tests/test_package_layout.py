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
