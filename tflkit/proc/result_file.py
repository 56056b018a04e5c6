"""The JSON a worker child leaves for its parent (``result.json`` in its work folder, or the path
it was given): its state, rewritten atomically after each stage, so a child killed mid-way still
says how far it got, and read by the parent once the child has exited.

Standard library and :mod:`tflkit.fsio` only: the onnx and torch converter workers import it in
their own environments (other numpy, TensorFlow...), where :func:`tflkit.proc.child_env.child_env`
puts this ``tflkit`` first on ``PYTHONPATH``.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

from tflkit.fsio import write_atomic

__all__ = ["RESULT_FILE", "load_sibling", "read_result", "write_result"]

#: The result's name in a converter worker's work folder.
RESULT_FILE = "result.json"


def write_result(path: str | os.PathLike[str], state: dict[str, Any]) -> None:
    """Replace ``path`` with ``state`` as JSON (values JSON cannot hold are written as text).

    No fsync: the parent reads it back on this machine; only the atomic rename matters.
    """
    write_atomic(path, json.dumps(state, default=str), durable=False)


def read_result(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The state a worker wrote (``OSError`` when it wrote none, ``ValueError`` when damaged)."""
    return json.loads(Path(path).read_text())


def load_sibling(script: str, name: str) -> ModuleType:
    """The module ``name`` of the folder holding ``script`` (a worker's ``__file__``), loaded by
    path: a worker takes its own folder off ``sys.path`` (its ``torch.py`` / ``onnx.py`` would
    shadow the packages), yet shares helpers with the scripts beside it."""
    spec = importlib.util.spec_from_file_location(name, Path(script).with_name(f"{name}.py"))
    if spec is None or spec.loader is None:
        raise ImportError(f"no module {name} beside {script}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
