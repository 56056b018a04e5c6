"""SIGTERM and SIGHUP end a command the way Ctrl-C does: unwinding, so nothing is left behind.

Python turns SIGINT into ``KeyboardInterrupt``; a plain SIGTERM would kill the process on the
spot, leaving temporary files and worker processes. :func:`exit_on_signals` makes SIGTERM and
SIGHUP raise :class:`Interrupted` (a ``KeyboardInterrupt``) instead, so every ``finally`` and
``except BaseException`` runs: :mod:`tflkit.fsio` removes its temporary file, and
:func:`tflkit.proc.worker.run_worker` kills the worker's process group.
"""

from __future__ import annotations

import functools
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

__all__ = ["Interrupted", "exit_code", "exit_on_signals", "interrupted_by"]

F = TypeVar("F", bound=Callable[..., Any])
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """A signal asked tflkit to stop; ``signum`` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise(signum: int, _frame: FrameType | None) -> None:
    # Every signal raises: ignoring repeats would also ignore the user's second Ctrl-C when
    # the first was swallowed (Python drops exceptions raised in fork hooks or __del__).
    raise Interrupted(signum)


def interrupted_by(exc: BaseException) -> KeyboardInterrupt | None:
    """The ``KeyboardInterrupt`` behind ``exc`` (e.g. Typer's ``Exit(130)``), if any."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def exit_code(exc: KeyboardInterrupt) -> int:
    """128 + the signal number, the shell's convention (130 for Ctrl-C)."""
    return 128 + getattr(exc, "signum", signal.SIGINT)


def exit_on_signals(function: F) -> F:
    """Run ``function`` with SIGINT, SIGTERM and SIGHUP raising :class:`Interrupted`."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            return function(*args, **kwargs)
        previous = {sig: signal.getsignal(sig) for sig in _SIGNALS}
        for sig in _SIGNALS:
            if previous[sig] != signal.SIG_IGN:  # nohup'd: keep ignoring SIGHUP
                signal.signal(sig, _raise)
        try:
            return function(*args, **kwargs)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    return wrapper  # type: ignore[return-value]
