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
        "tflkit.validation",
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
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        cwd=Path(__file__).resolve().parents[1],
    ).stdout.strip()
    assert out == "['tflkit']"
