"""Writing reports to stdout (JSON or rich text) and progress to stderr."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console


def console() -> Console:
    """A console for reports; 120 columns when stdout is not a terminal (pipes, CI logs)."""
    return Console(highlight=False, width=None if sys.stdout.isatty() else 120)


def print_json(payload: dict[str, Any]) -> None:
    """One write of the whole document (``json.dump`` writes each token: 100k+ calls)."""
    sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")


#: A step shows a spinner only when it takes longer than this.
SPINNER_DELAY_S = 1.0


@contextmanager
def spinner(message: str, delay: float = SPINNER_DELAY_S) -> Iterator[None]:
    """A spinner on stderr saying what runs, once it has run for ``delay`` seconds; nothing
    when stderr is not a terminal (pipes, CI logs)."""
    if not sys.stderr.isatty():
        yield
        return
    status = Console(stderr=True, highlight=False).status(message)
    lock = threading.Lock()
    started = False

    def start() -> None:
        nonlocal started
        with lock:
            if not done.is_set():
                status.start()
                started = True

    done = threading.Event()
    timer = threading.Timer(delay, start)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            done.set()
            timer.cancel()
            if started:
                status.stop()
