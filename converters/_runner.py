"""Parent side of a converter child process: spawn, time out, read what it left behind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .base import ConversionError

__all__ = ["WorkerOutcome", "run_worker"]


@dataclass
class WorkerOutcome:
    """The child's ``result.json`` plus its exit code, output tail and wall time."""

    state: dict[str, Any]
    returncode: int | None
    output_tail: str
    wall_seconds: float


def run_worker(
    cmd: Sequence[str], workdir: Path, *, timeout: float, env: dict[str, str] | None = None
) -> WorkerOutcome:
    """Run ``cmd`` in its own session; kill the whole group on timeout. Reads ``result.json``."""
    from tflkit.gpu_env import child_env

    start = time.perf_counter()
    proc = subprocess.Popen(
        list(cmd),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env or child_env(),
        cwd=workdir,
        start_new_session=True,
    )
    try:
        raw, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise ConversionError(
            f"the converter gave no answer in {timeout:g} s (--timeout)"
        ) from None
    text = raw.decode("utf-8", "replace")
    wall = time.perf_counter() - start
    try:
        state = json.loads((workdir / "result.json").read_text())
    except (OSError, ValueError):
        tail = [ln for ln in text.strip().splitlines() if ln.strip()][-1:] or ["no output"]
        raise ConversionError(
            f"the converter process died (exit {proc.returncode}): {tail[0][:300]}"
        ) from None
    return WorkerOutcome(state, proc.returncode, text[-4000:], wall)


def python_module_cmd(module: str, *args: str, python: str | None = None) -> list[str]:
    return [python or sys.executable, "-m", module, *args]
