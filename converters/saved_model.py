"""SavedModel to ``.tflite``: a directory, or a ``tf.function`` with an input signature.

The function is saved as a one-signature SavedModel in the caller's process (it already imports
TensorFlow), then converted by the TensorFlow child process like any SavedModel.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from tflkit.errors import UsageError
from tflkit.report.convert_report import ConvertReport

from .api import convert
from .base import ConvertOptions

__all__ = ["convert_function", "convert_saved_model"]


def convert_saved_model(
    path: str | os.PathLike[str],
    output: str | os.PathLike[str],
    options: ConvertOptions | None = None,
) -> ConvertReport:
    """Convert the SavedModel directory ``path`` (``options.signature`` picks the signature)."""
    return convert(path, output, options)


def convert_function(
    function: Any,
    output: str | os.PathLike[str],
    options: ConvertOptions | None = None,
    *,
    trackable: Any = None,
) -> ConvertReport:
    """Convert a ``tf.function`` made with ``input_signature`` (its TensorSpec names name inputs).

    ``trackable`` owns the variables the function captures (a ``tf.Module`` or Keras model);
    without it a new module holds the function.
    """
    import tensorflow as tf

    if getattr(function, "input_signature", None) is None:
        raise UsageError("convert_function needs a tf.function created with input_signature=[...]")
    module = trackable if trackable is not None else tf.Module()
    module.tflkit_serve = function
    concrete = function.get_concrete_function()
    with tempfile.TemporaryDirectory(prefix="tflkit-fn-") as tmp:
        saved = Path(tmp) / "saved_model"
        tf.saved_model.save(module, str(saved), signatures={"serving_default": concrete})
        label = f"<tf.function {getattr(function, '__name__', 'fn')}>"
        return convert(saved, output, options, label=label)
