"""The TensorFlow route shared by Keras and SavedModel: run the worker, turn failures into words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tflkit.errors import require_extra
from tflkit.proc.worker import python_command

from . import _route_clock, _tf_worker
from ._route_clock import progress_line
from ._runner import raise_for, run_worker
from .base import ConvertOptions

__all__ = ["convert_with_tensorflow"]


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
    cmd = python_command(_tf_worker.main, workdir / "job.json")
    outcome = run_worker(
        cmd,
        workdir,
        timeout=options.timeout,
        on_wait=progress_line("TensorFlow converting"),
        every=_route_clock.PROGRESS_S,
    )
    raise_for(outcome)
    return outcome.state
