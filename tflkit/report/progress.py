"""What a long step calls with a line of progress: the CLI prints it, an API caller may pass its
own, the default says nothing."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

__all__ = ["Progress", "Spinner", "quiet"]

#: Called with one line saying what is being done now.
Progress = Callable[[str], None]
#: Wraps a step that takes seconds (``with spinner("probing"): ...``), e.g. a terminal spinner.
Spinner = Callable[[str], AbstractContextManager[object]]


def quiet(_line: str) -> None:
    """The progress callback that says nothing."""
