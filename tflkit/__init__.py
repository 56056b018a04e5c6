"""tflkit: take a model to the TFLite / LiteRT GPU delegate and prove it works there.

The public facade: ``load``/``save`` (the editable IR), ``inspect``, ``check``, ``rewrite`` and
``validate``. Each returns a report dataclass with ``to_json()``; the CLI is a thin layer over
these. No function has the name of a module: the modules behind them are ``tflkit.inspection``,
``tflkit.rewriter.advice`` (check), ``tflkit.rewriter`` and ``tflkit.validation.pipeline``, so
``import tflkit.x.y`` always gives the module ``x/y``.

The names are re-exported lazily (PEP 562): ``import tflkit`` loads nothing but this file, and
each name imports its module on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tflkit.errors import InvalidModelError, ModelLoadError, TflkitError, UsageError
    from tflkit.inspection import inspect_path as inspect
    from tflkit.ir import load, save
    from tflkit.rewriter.advice import check
    from tflkit.rewriter.run import rewrite_file as rewrite
    from tflkit.validation.pipeline import validate

# public name -> (module, attribute)
_EXPORTS: dict[str, tuple[str, str]] = {
    "InvalidModelError": ("tflkit.errors", "InvalidModelError"),
    "ModelLoadError": ("tflkit.errors", "ModelLoadError"),
    "TflkitError": ("tflkit.errors", "TflkitError"),
    "UsageError": ("tflkit.errors", "UsageError"),
    "check": ("tflkit.rewriter.advice", "check"),
    "inspect": ("tflkit.inspection", "inspect_path"),
    "load": ("tflkit.ir.serde", "load"),
    "rewrite": ("tflkit.rewriter.run", "rewrite_file"),
    "save": ("tflkit.ir.serde", "save"),
    "validate": ("tflkit.validation.pipeline", "validate"),
}

__all__ = [
    "InvalidModelError",
    "ModelLoadError",
    "TflkitError",
    "UsageError",
    "check",
    "inspect",
    "load",
    "rewrite",
    "save",
    "validate",
]


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'tflkit' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
