"""Progress of a converter environment build on stderr (it takes minutes on first use)."""

from __future__ import annotations

import sys
import time
from typing import Any

__all__ = ["BuildProgress"]

#: pip and build lines worth a plain line of their own when stderr is not a terminal.
_MILESTONES = ("creating", "waiting", "Installing collected packages", "Successfully installed")


class BuildProgress:
    """A spinner with pip's latest line on a terminal; the main steps as plain lines otherwise."""

    def __init__(self, title: str) -> None:
        self.title = title
        self._status: Any = None
        self._start = 0.0

    def __enter__(self) -> BuildProgress:
        self._start = time.perf_counter()
        if sys.stderr.isatty():
            from rich.console import Console

            self._status = Console(stderr=True).status(self.title)
            self._status.start()
        else:
            print(f"tflkit: {self.title}", file=sys.stderr, flush=True)
        return self

    def __call__(self, line: str) -> None:
        if self._status is not None:
            elapsed = time.perf_counter() - self._start
            self._status.update(f"{self.title} [{elapsed:.0f} s] {line[:100]}")
        elif line.startswith(_MILESTONES):
            print(f"tflkit: {line[:160]}", file=sys.stderr, flush=True)

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if self._status is not None:
            self._status.stop()
        if kind is None:
            elapsed = time.perf_counter() - self._start
            print(f"tflkit: done in {elapsed:.0f} s", file=sys.stderr, flush=True)
