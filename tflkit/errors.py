"""Exceptions tflkit raises for problems a user can fix; the CLI turns each into one line.

Also the one table of the optional extras (:data:`EXTRAS`): what each brings, so a command whose
extra is missing names the ``pip install`` in one line (:func:`require_extra`, exit 2) and
``tflkit doctor`` lists them.
"""

from __future__ import annotations

import importlib.util


class TflkitError(Exception):
    """Base class of every error tflkit reports to the user without a traceback."""

    exit_code: int = 2


class UsageError(TflkitError):
    """Bad arguments or options."""


class ModelLoadError(TflkitError):
    """The file is missing, unreadable, not a TFLite model, truncated or corrupt."""


class InvalidModelError(TflkitError):
    """The model parsed but breaks an invariant (dangling index, cycle, double producer...)."""


class MissingExtraError(TflkitError):
    """A package a feature needs is not installed; the message names the pip install."""


#: extra -> (the modules it brings, in import order of need; what they are for). pyproject's
#: ``[project.optional-dependencies]`` installs them (tests/test_package_extras.py keeps the two
#: in step).
EXTRAS: dict[str, tuple[tuple[str, ...], str]] = {
    "convert": (("tensorflow",), "Keras and SavedModel conversion, TensorFlow references"),
    "images": (("PIL", "skimage"), "image folders as inputs; sample photographs for validate"),
    "llm": (("litert_lm",), "the LiteRT-LM engine: .litertlm bundles on CPU and GPU"),
    "browser": (("playwright", "segno"), "the browser harness (LiteRT.js in Chromium)"),
    "ray": (("ray",), "regress --suite --cluster: the suite's models as Ray tasks"),
}


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` that are not importable here (found without importing them)."""
    return [m for m in EXTRAS[extra][0] if importlib.util.find_spec(m) is None]


def require_extra(extra: str, what: str, module: str | None = None) -> None:
    """Raise :class:`MissingExtraError` (one line, exit 2) unless ``module`` (default: every
    module of ``extra``) is importable."""
    modules = [module] if module else list(EXTRAS[extra][0])
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingExtraError(f"{what} needs {missing[0]}: pip install 'tflkit[{extra}]'")


def one_line(exc: BaseException) -> str:
    """An exception as one line: its message's lines, stripped, joined by a space (its type's
    name when it has no message)."""
    text = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    return text or type(exc).__name__
