"""Run a tflkit worker (GPU compile, delegate, TensorFlow) in a child process, safely.

The child gets its own session so a timeout kills it and everything it started; its stdout and
stderr (where the native runtime logs) come back as one text.
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
    from tflkit.gpu_env import child_env

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
        with contextlib.suppress(ProcessLookupError):  # the worker's own session only
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    return WorkerExit(
        out.decode("utf-8", "replace"), proc.returncode, timed_out, time.perf_counter() - start
    )
