"""``regress update``: accept a model's current behaviour as its new baseline, saying what moved.

The new baseline is recorded exactly as the old one was (same inputs, runners, tolerances, probe,
target); before it replaces the old one, a check against the old one lists every output,
residency or version that changed.
"""

from __future__ import annotations

import os
from pathlib import Path

from tflkit.regress.baseline import read_baseline, write_baseline
from tflkit.report.regress_report import ModelResult

__all__ = ["update"]


def update(
    model_path: str | os.PathLike[str],
    baseline_dir: str | os.PathLike[str],
    *,
    delegate: Path | None = None,
    timeout: float = 300.0,
) -> ModelResult:
    """Re-record ``model_path`` into ``baseline_dir``; ``changes`` lists what moved."""
    from tflkit.regress.check import CheckOptions, check
    from tflkit.regress.record import RecordOptions, record

    old = read_baseline(baseline_dir)
    manifest = old.manifest
    compared = check(model_path, old, CheckOptions(delegate=delegate, timeout=timeout))
    options = RecordOptions(
        runners=list(manifest["runners"]),
        input_shapes={k: tuple(v) for k, v in manifest["inputs"].get("input_shapes", {}).items()},
        signature=manifest["signature"],
        tolerances=manifest["options"]["tolerances"],
        probe=manifest["options"]["probe"],
        target=manifest["options"]["target"],
        latency=old.latency is not None,
        delegate=delegate,
        timeout=timeout,
    )
    new = record(model_path, options, feeds=old.inputs, input_source=manifest["inputs"]["source"])
    path = write_baseline(new, baseline_dir)
    moved = [f"{c.name}: {c.message}" for c in compared.failures]
    result = ModelResult(str(model_path), str(path), "pass", wall_seconds=compared.wall_seconds)
    result.changes = compared.changes + moved
    if not result.changes:
        result.changes.append("nothing moved beyond tolerance; baseline re-recorded")
    else:
        result.changes.append(f"accepted as the new baseline in {path}")
    return result
