"""Keras to ``.tflite``: a ``.keras`` / ``.h5`` file, or an in-memory model (Python API).

A file is converted by the TensorFlow child process. An in-memory model lives in the caller's
process (which already imports TensorFlow); it is saved to a temporary ``.keras`` file first, so
the conversion and the reference run in the child like any file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from tflkit.report.convert_report import ConvertReport

from .api import convert
from .base import ConvertOptions

__all__ = ["convert_keras"]


def convert_keras(
    model: str | os.PathLike[str] | Any,
    output: str | os.PathLike[str],
    options: ConvertOptions | None = None,
) -> ConvertReport:
    """Convert a Keras file or a ``keras.Model`` object to ``output``."""
    if isinstance(model, str | os.PathLike):
        return convert(model, output, options)
    with tempfile.TemporaryDirectory(prefix="tflkit-keras-") as tmp:
        name = getattr(model, "name", None) or "model"
        path = Path(tmp) / f"{name}.keras"
        model.save(path)
        return convert(path, output, options, label=f"<in-memory Keras model {name}>")
