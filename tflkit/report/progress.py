"""What a long step calls with a line of progress: the CLI prints it, an API caller may pass its
own, the default says nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

__all__ = ["TICK_S", "Progress", "Spinner", "quiet", "ticking"]

#: How often :func:`ticking` says a long step still runs (under the 15 s a user waits unsure).
TICK_S = 10.0

#: Called with one line saying what is being done now.
Progress = Callable[[str], None]
#: Wraps a step that takes seconds (``with spinner("probing"): ...``), e.g. a terminal spinner.
Spinner = Callable[[str], AbstractContextManager[object]]


def quiet(_line: str) -> None:
    """The progress callback that says nothing."""


@contextmanager
def ticking(label: str, progress: Progress, every: float = TICK_S) -> Iterator[None]:
    """``progress(label)`` as the block starts, then ``progress("label: N s")`` every ``every``
    seconds until it ends: a step of many seconds is never silent."""
    progress(label)
    done = threading.Event()
    start = time.perf_counter()

    def tick() -> None:
        while not done.wait(every):
            progress(f"{label}: {time.perf_counter() - start:.0f} s")

    worker = threading.Thread(target=tick, name="tflkit-ticking", daemon=True)
    worker.start()
    try:
        yield
    finally:
        done.set()
        worker.join()
