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
