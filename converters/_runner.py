"""Parent side of a converter child process: tflkit's worker runner, the ``result.json`` protocol
every converter worker follows, its failures as errors (:func:`raise_for`), and the scratch folder
next to the output (:func:`scratch_dir`)."""

from __future__ import annotations

import signal
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tflkit.errors import UsageError
from tflkit.proc.result_file import RESULT_FILE, read_result
from tflkit.proc.worker import run_worker as run_child

from ._progress import plain
from .base import ConversionError

__all__ = ["WorkerOutcome", "raise_for", "run_worker", "scratch_dir"]


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
    every: float = 10.0,
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
        last = plain(done.last_line or "no output")
        error = ConversionError(f"the converter process died ({done.how}): {last[:300]}")
        error.output_tail = done.output[-4000:]  # type: ignore[attr-defined]
        raise error from None
    return WorkerOutcome(state, done.returncode, done.output[-4000:], done.seconds)


def _flex_message(failure: dict[str, Any]) -> str:
    ops = failure.get("select_ops") or []
    where = failure.get("where") or {}
    parts = []
    for op in ops:
        layers = where.get(op, [])
        parts.append(f"{op}" + (f" (in {', '.join(layers[:3])})" if layers else ""))
    custom = failure.get("custom_ops") or []
    text = ""
    if parts:
        text = (
            f"the model needs TensorFlow ops with no TFLite builtin: {'; '.join(parts)}. They "
            "could only run as flex ops on the CPU (the GPU delegate takes builtin ops only): "
            "replace them in the model (e.g. tf.nn.gelu instead of tf.math.erf), or pass "
            "--allow-flex to accept them as CPU-only ops"
        )
    if custom:
        text += ("; " if text else "") + f"unknown custom ops: {', '.join(custom)}"
    return text or f"conversion failed: {failure.get('message')}"


def raise_for(outcome: WorkerOutcome) -> None:
    """Nothing when the worker finished; else its failure as the error it is (usage, the
    ops a converter lacks, an import or load failure, flex ops the model needs)."""
    state = outcome.state
    if state.get("stage") == "done":
        return
    if state.get("error") is not None:  # a converter's own text: no colour codes, one line
        state = {**state, "error": plain(str(state["error"]))}
    kind = state.get("error_kind")
    if kind == "usage":
        raise UsageError(state.get("error", "bad options"))
    if kind == "unsupported":  # the ONNX worker's one line naming what the model holds
        error = ConversionError(state.get("error", "the model holds ops the converter lacks"))
        # [(domain, op type, opset, nodes)] when the worker listed them, for a line over routes
        error.unsupported = state.get("unsupported")  # type: ignore[attr-defined]
        error.converter = state.get("converter")  # type: ignore[attr-defined]
        error.advice = state.get("advice")  # type: ignore[attr-defined]
        raise error
    if kind == "import":
        raise ConversionError(f"TensorFlow failed to import: {state.get('error')}")
    if kind == "load":
        raise ConversionError(f"cannot load the model: {state.get('error')}")
    failure = state.get("failure")
    if failure:
        error = ConversionError(_flex_message(failure))
        error.failure = failure  # type: ignore[attr-defined]
        raise error
    raise ConversionError(f"{kind or 'conversion'} failed: {state.get('error')}")


def scratch_dir(near: Path) -> tempfile.TemporaryDirectory[str]:
    """A temporary directory next to ``near`` (same filesystem, so os.replace works)."""
    near.parent.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(dir=near.parent, prefix=".tflkit-convert-")
