"""Run a tflkit worker (GPU compile, delegate, TensorFlow) in a child process, safely.

The child gets its own session so a timeout kills it and everything it started; its stdout and
stderr (where the native runtime logs) come back as one text. Nothing outlives the call: on a
timeout and on an exception in the parent (Ctrl-C, the CLI's SIGTERM exit) the child's whole
process group is killed before it is reaped. (No ``preexec_fn``: it would make every spawn run
Python's fork hooks, where an interrupt is silently dropped.)
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


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


def run_worker(cmd: Sequence[str], *, cwd: str | Path, timeout: float) -> WorkerExit:
    """Run ``cmd`` with the GPU child environment; kill its whole session after ``timeout``."""
    from tflkit.proc.child_env import child_env

    start = time.perf_counter()
    proc = subprocess.Popen(
        list(cmd),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=child_env(),
        cwd=cwd,
        start_new_session=True,
    )
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(proc.pid)
        out, _ = proc.communicate()
    except BaseException:  # interrupted: take the worker and its children down with us
        kill_group(proc.pid)
        proc.wait()
        raise
    return WorkerExit(
        out.decode("utf-8", "replace"), proc.returncode, timed_out, time.perf_counter() - start
    )


def kill_group(pgid: int) -> None:
    """SIGKILL the process group ``pgid`` (a worker's own session); gone already is fine.

    Call it before the leader is reaped: until then its id cannot name another process.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
