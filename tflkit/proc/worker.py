"""Run a tflkit worker (GPU compile, delegate, TensorFlow) in a child process, safely.

The child gets its own session so a timeout kills it and everything it started; its stdout and
stderr (where the native runtime logs) come back as one text. Nothing outlives the call: on a
timeout and on an exception in the parent (Ctrl-C, the CLI's SIGTERM exit) the child's whole
process group is killed before it is reaped. (No ``preexec_fn``: it would make every spawn run
Python's fork hooks, where an interrupt is silently dropped.)

:func:`own_session` is the one place that does this: a ``Popen`` in a session of its own, whose
whole group is killed (and the leader reaped) when the ``with`` block ends with the child still
running, whether by a timeout, an error or an interrupt. :func:`run_worker` is its one-shot use;
streaming callers (the device transports, the converter environment builds) use it directly.
:func:`kill_sessions` kills every such session still open, for an interrupt that reaches the main
thread while other threads wait on their children.

A tflkit worker is named by its entry function, never by a module-name string:
:func:`python_command` (``python -m tflkit.proc.entry MODULE:FUNCTION ARG...``, the reference
derived from the function itself) and :func:`spawn_python` (that command through
:func:`run_worker`). A worker's entry takes the argument list and returns the exit code.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "WorkerExit",
    "WorkerMain",
    "kill_group",
    "kill_sessions",
    "own_session",
    "python_command",
    "run_worker",
    "spawn_python",
    "target_of",
]

#: A worker's entry: the child's arguments in, its exit code out.
WorkerMain = Callable[[list[str]], int]

_LIVE: set[subprocess.Popen] = set()
_LIVE_LOCK = threading.Lock()


@dataclass(frozen=True)
class WorkerExit:
    output: str
    returncode: int | None
    timed_out: bool
    seconds: float

    @property
    def how(self) -> str:
        """'exit 1', 'killed by signal 6', or 'timed out'."""
        if self.timed_out:
            return "timed out"
        code = self.returncode
        return f"killed by signal {-code}" if code is not None and code < 0 else f"exit {code}"

    @property
    def last_line(self) -> str:
        lines = self.output.strip().splitlines()
        return lines[-1] if lines else ""


@contextlib.contextmanager
def own_session(cmd: Sequence[str], **popen_kwargs: Any) -> Iterator[subprocess.Popen]:
    """``Popen(cmd, **popen_kwargs)`` in a session of its own; its group dies with the block.

    When the block ends (normally, by an exception, or by an interrupt) with the child still
    running, its whole process group is killed; the child is always reaped. Spawn errors
    (``FileNotFoundError`` for a missing program) are raised on entering the block.
    """
    proc = subprocess.Popen(list(cmd), start_new_session=True, **popen_kwargs)
    with _LIVE_LOCK:
        _LIVE.add(proc)
    try:
        yield proc
    finally:
        with _LIVE_LOCK:
            _LIVE.discard(proc)
            running = proc.poll() is None
        if running:
            kill_group(proc.pid)
        proc.wait()


def kill_sessions() -> None:
    """SIGKILL every :func:`own_session` still open, from any thread (on Ctrl-C or SIGTERM)."""
    with _LIVE_LOCK:
        for proc in list(_LIVE):
            if proc.returncode is None:
                kill_group(proc.pid)


def run_worker(
    cmd: Sequence[str],
    *,
    cwd: str | Path,
    timeout: float,
    on_wait: Callable[[float], None] | None = None,
    every: float = 15.0,
) -> WorkerExit:
    """Run ``cmd`` with the GPU child environment; kill its whole session after ``timeout``.

    ``on_wait(elapsed seconds)`` is called every ``every`` seconds while the child runs (a
    progress line); an exception it raises kills the child's session and propagates."""
    from tflkit.proc.child_env import child_env

    start = time.perf_counter()
    timed_out = False
    with own_session(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=child_env(),
        cwd=cwd,
    ) as proc:
        while True:
            left = timeout - (time.perf_counter() - start)
            wait = left if on_wait is None else min(left, every)
            try:
                out, _ = proc.communicate(timeout=max(wait, 0.0))
                break
            except subprocess.TimeoutExpired:
                if wait < left:
                    on_wait(time.perf_counter() - start)  # type: ignore[misc]
                    continue
                timed_out = True
                kill_group(proc.pid)
                out, _ = proc.communicate()
                break
    return WorkerExit(
        out.decode("utf-8", "replace"), proc.returncode, timed_out, time.perf_counter() - start
    )


def kill_group(pgid: int) -> None:
    """SIGKILL the process group ``pgid`` (a worker's own session); gone already is fine.

    Call it before the leader is reaped: until then its id cannot name another process.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def target_of(function: WorkerMain) -> str:
    """``MODULE:FUNCTION`` of a worker's entry: a module-level function of an importable module
    (what :mod:`tflkit.proc.entry` imports and calls in the child)."""
    module, name = function.__module__, function.__qualname__
    if module == "__main__" or "." in name or "<" in name:
        raise ValueError(f"a worker entry must be a module-level function, not {module}:{name}")
    return f"{module}:{name}"


def python_command(function: WorkerMain, *args: object, python: str | None = None) -> list[str]:
    """The command that runs ``function([str(a) for a in args])`` in a fresh Python (this
    interpreter unless ``python``), through :mod:`tflkit.proc.entry`."""
    from tflkit.proc import entry

    return [python or sys.executable, "-m", entry.__name__, target_of(function), *map(str, args)]


def spawn_python(
    function: WorkerMain,
    *args: object,
    cwd: str | Path,
    timeout: float,
    on_wait: Callable[[float], None] | None = None,
    every: float = 15.0,
) -> WorkerExit:
    """:func:`run_worker` on :func:`python_command`: the worker ``function`` in a child of its
    own session, with the GPU child environment, killed after ``timeout``."""
    return run_worker(
        python_command(function, *args), cwd=cwd, timeout=timeout, on_wait=on_wait, every=every
    )
