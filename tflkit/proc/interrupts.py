"""SIGTERM and SIGHUP end a command the way Ctrl-C does: unwinding, so nothing is left behind.

Python turns SIGINT into ``KeyboardInterrupt``; a plain SIGTERM would kill the process on the
spot, leaving temporary files and worker processes. :func:`exit_on_signals` makes SIGTERM and
SIGHUP raise :class:`Interrupted` (a ``KeyboardInterrupt``) instead, so every ``finally`` and
``except BaseException`` runs: :mod:`tflkit.fsio` removes its temporary file, and
:func:`tflkit.proc.worker.run_worker` kills the worker's process group.

The contract of a tflkit process (:func:`run_process`, the ``tflkit`` command): a signal ends
it with ``128 + signal`` (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP) and one
"interrupted" line, whenever it arrives after the handlers are installed; never as a death by
the signal (exit -15). A signal that arrives once the command's result is written (an output
renamed into place) does not undo that result: the output stays whole, and the exit code still
says the process was interrupted.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, NoReturn, TypeVar

__all__ = [
    "Interrupted",
    "exit_code",
    "exit_on_signals",
    "interrupted_by",
    "reinstall_handlers",
    "run_process",
    "signal_interrupt",
    "signal_received",
]

F = TypeVar("F", bound=Callable[..., Any])
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_EXIT_CODES = frozenset(128 + sig for sig in _SIGNALS)
#: Every signal the handlers below saw, in order (read by :func:`run_process` on the way out).
_RECEIVED: list[int] = []
#: The handler tflkit last installed (empty outside :func:`run_process` / :func:`exit_on_signals`).
_INSTALLED: list[Callable[[int, FrameType | None], None]] = []


class Interrupted(KeyboardInterrupt):
    """A signal asked tflkit to stop; ``signum`` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise(signum: int, _frame: FrameType | None) -> None:
    # Every signal raises: ignoring repeats would also ignore the user's second Ctrl-C when
    # the first was swallowed (Python drops exceptions raised in fork hooks or __del__).
    _RECEIVED.append(signum)
    raise Interrupted(signum)


def _note(signum: int, _frame: FrameType | None) -> None:
    # On the way out (the command has returned): raising would only cut the exit short.
    _RECEIVED.append(signum)


def signal_received() -> bool:
    """Whether Ctrl-C, SIGTERM or SIGHUP reached this process: for threads other than the main
    one (which gets :class:`Interrupted`), so a cleanup can be cut short while the user waits."""
    return bool(_RECEIVED)


def signal_interrupt(exc: KeyboardInterrupt) -> KeyboardInterrupt:
    """``exc`` as the :class:`Interrupted` of the signal this process received, when a library
    turned it into a plain ``KeyboardInterrupt`` on the way (Ray's waits do); else ``exc``."""
    if isinstance(exc, Interrupted) or not _RECEIVED:
        return exc
    return Interrupted(_RECEIVED[-1])


def reinstall_handlers() -> None:
    """Put tflkit's handlers back after a library replaced them (``ray.init`` installs its own
    SIGTERM handler, which would end the process without unwinding); only in the main thread,
    and only where tflkit had installed them."""
    if _INSTALLED and threading.current_thread() is threading.main_thread():
        _install(_INSTALLED[-1])


def _install(handler: Callable[[int, FrameType | None], None]) -> None:
    _INSTALLED[:] = [handler]
    for sig in _SIGNALS:
        if signal.getsignal(sig) != signal.SIG_IGN:  # nohup'd: keep ignoring SIGHUP
            signal.signal(sig, handler)


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
    """Run ``function`` with SIGINT, SIGTERM and SIGHUP raising :class:`Interrupted`.

    The previous handlers come back when it returns: this is for a call inside a process that
    goes on (a test calling the CLI's ``main``); a whole process uses :func:`run_process`.
    """

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            return function(*args, **kwargs)
        previous = {sig: signal.getsignal(sig) for sig in _SIGNALS}
        _install(_raise)
        try:
            return function(*args, **kwargs)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            _INSTALLED.clear()

    return wrapper  # type: ignore[return-value]


def run_process(
    command: Callable[[], int], interrupted: Callable[[KeyboardInterrupt], int]
) -> NoReturn:
    """Run ``command`` as the whole process and end the process with its exit code.

    From here until the process is gone, SIGINT, SIGTERM and SIGHUP never kill it: while
    ``command`` runs they raise :class:`Interrupted`; an interrupt that escapes it goes to
    ``interrupted`` (which says so and returns the exit code). Once it has returned, a signal is
    only noted, and when no interrupt was reported yet, ``interrupted`` reports it: exit 128 +
    signal, with the result ``command`` wrote left whole.

    The process leaves through ``os._exit`` after doing Python's exit work itself (threads
    joined, ``atexit`` callbacks, stdout and stderr flushed, in the interpreter's order):
    Python's own shutdown puts the default handlers back part-way through, where a SIGTERM
    would kill the process (exit -15) after the result was written and the exit code chosen.
    A signal noted while the flush waits on a slow reader counts; one that arrives after the
    last look, while the process is already ending, cannot change its exit code.
    """
    _RECEIVED.clear()
    _install(_raise)
    try:
        try:
            code = command()
        finally:
            _install(_note)
    except KeyboardInterrupt as exc:
        _install(_note)
        code = interrupted(exc)
    _python_exit_work()
    _flush(sys.stdout)
    if _RECEIVED and code not in _EXIT_CODES:  # a late signal, or one a __del__ swallowed
        code = interrupted(Interrupted(_RECEIVED[0]))
    _flush(sys.stderr)
    os._exit(code)


def _python_exit_work() -> None:
    """What the interpreter does on exit before it finalizes: join the non-daemon threads (and
    run ``threading``'s exit hooks), then the ``atexit`` callbacks (temporary directories still
    open, logging). Both are private hooks of CPython, also used by ``multiprocessing``."""
    for name, module in (("_shutdown", threading), ("_run_exitfuncs", atexit)):
        hook = getattr(module, name, None)
        if hook is not None:
            hook()


def _flush(stream: Any) -> None:
    with contextlib.suppress(AttributeError, OSError, ValueError):  # closed, or a gone reader
        stream.flush()
