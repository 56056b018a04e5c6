"""Parent side of a converter child process: tflkit's worker runner, plus the ``result.json``
protocol every converter worker follows."""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tflkit.proc.result_file import RESULT_FILE, read_result
from tflkit.proc.worker import run_worker as run_child

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
    cmd: Sequence[str],
    workdir: Path,
    *,
    timeout: float,
    on_wait: Callable[[float], None] | None = None,
    every: float = 15.0,
) -> WorkerOutcome:
    """Run ``cmd`` in ``workdir`` (:func:`tflkit.proc.worker.run_worker`, ``on_wait`` every
    ``every`` seconds while it runs); read its result.json."""
    done = run_child(cmd, cwd=workdir, timeout=timeout, on_wait=on_wait, every=every)
    if done.timed_out:
        raise ConversionError(f"the converter gave no answer in {timeout:g} s (--timeout)")
    try:
        state = read_result(workdir / RESULT_FILE)
    except (OSError, ValueError):
        if done.returncode == -signal.SIGKILL:  # nothing of ours sends it: the OOM killer does
            raise ConversionError(
                "the converter process was killed (SIGKILL), most likely by the system running "
                "out of memory: close other programs or convert on a machine with more memory"
            ) from None
        last = done.last_line or "no output"
        raise ConversionError(f"the converter process died ({done.how}): {last[:300]}") from None
    return WorkerOutcome(state, done.returncode, done.output[-4000:], done.seconds)
