"""The TensorFlow route shared by Keras and SavedModel: run the worker, turn failures into words."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from tflkit.errors import UsageError, require_extra

from . import _route_clock
from ._route_clock import progress_line
from ._runner import WorkerOutcome, python_module_cmd, run_worker
from .base import ConversionError, ConvertOptions

__all__ = ["convert_with_tensorflow"]

_WORKER = "tflkit.converters._tf_worker"


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


def _raise_for(outcome: WorkerOutcome) -> None:
    state = outcome.state
    if state.get("stage") == "done":
        return
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


def convert_with_tensorflow(
    kind: str, source: Path, options: ConvertOptions, workdir: Path
) -> dict[str, Any]:
    """Convert in the TensorFlow child process; returns its state (files are in ``workdir``)."""
    require_extra("convert", f"converting a {kind.replace('_', ' ')}")
    job = {
        "kind": kind,
        "source": str(source.resolve()),
        "options": options.to_json(),
        "workdir": str(workdir),
    }
    (workdir / "job.json").write_text(json.dumps(job))
    cmd = python_module_cmd(_WORKER, str(workdir / "job.json"))
    outcome = run_worker(
        cmd,
        workdir,
        timeout=options.timeout,
        on_wait=progress_line("TensorFlow converting"),
        every=_route_clock.PROGRESS_S,
    )
    _raise_for(outcome)
    return outcome.state


def scratch_dir(near: Path) -> tempfile.TemporaryDirectory[str]:
    """A temporary directory next to ``near`` (same filesystem, so os.replace works)."""
    near.parent.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(dir=near.parent, prefix=".tflkit-convert-")
