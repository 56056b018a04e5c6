"""Exceptions tflkit raises for problems a user can fix; the CLI turns each into one line."""

from __future__ import annotations


class TflkitError(Exception):
    """Base class of every error tflkit reports to the user without a traceback."""

    exit_code: int = 2


class UsageError(TflkitError):
    """Bad arguments or options."""


class ModelLoadError(TflkitError):
    """The file is missing, unreadable, not a TFLite model, truncated or corrupt."""


class InvalidModelError(TflkitError):
    """The model parsed but breaks an invariant (dangling index, cycle, double producer...)."""


def one_line(exc: BaseException) -> str:
    """An exception as one line: its message's lines, stripped, joined by a space (its type's
    name when it has no message)."""
    text = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    return text or type(exc).__name__
