"""Progress for a long command whose stderr is not a terminal (CI logs, pipes).

A spinner means nothing in a log, and silence for minutes reads as a hang: :class:`Heartbeat`
prints the current step as a plain ``tflkit: COMMAND: STEP (N s)`` line on stderr once it has
lasted :data:`FIRST_S` seconds, then every :data:`EVERY_S` seconds while it lasts. A command
that finishes quickly prints nothing.
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType

__all__ = ["EVERY_S", "FIRST_S", "Heartbeat"]

#: seconds a step runs before its first line, and between the lines that follow
FIRST_S = 5.0
EVERY_S = 30.0


class Heartbeat:
    """A background thread that says which step is running when it runs long."""

    def __init__(self, command: str, first: float = FIRST_S, every: float = EVERY_S) -> None:
        self.command = command
        self.first, self.every = first, every
        self._line = "starting"
        self._since = self._said = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tflkit-heartbeat", daemon=True)

    def update(self, line: str) -> None:
        """The step that starts now."""
        with self._lock:
            self._line, self._since = line, time.monotonic()
            self._said = self._since

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            with self._lock:
                now = time.monotonic()
                quiet = self.first if self._said == self._since else self.every
                if now - self._said < quiet:
                    continue
                self._said = now
                line = f"tflkit: {self.command}: {self._line} ({now - self._since:.0f} s)"
            print(line, file=sys.stderr, flush=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
