"""tflkit: take a model to the TFLite / LiteRT GPU delegate and prove it works there.

The public facade: ``load``/``save`` (the editable IR), ``inspect``, ``check``, ``rewrite`` and
``validate``. Each returns a report dataclass with ``to_json()``; the CLI is a thin layer over
these. The names ``inspect``, ``rewrite`` and ``validate`` are these functions: import the
modules of the same name with ``from tflkit.rewrite import ...``, not as ``tflkit.rewrite.x``.
"""

from __future__ import annotations

import os
from pathlib import Path

from tflkit.compat.check import check_path
from tflkit.compat.targets import DEFAULT_TARGET
from tflkit.errors import InvalidModelError, ModelLoadError, TflkitError, UsageError
from tflkit.inspect import inspect_path as inspect
from tflkit.ir import load, save
from tflkit.report.check_report import CheckReport
from tflkit.rewrite.run import rewrite_file as rewrite
from tflkit.validate import validate

__all__ = [
    "InvalidModelError",
    "ModelLoadError",
    "TflkitError",
    "UsageError",
    "check",
    "inspect",
    "load",
    "rewrite",
    "save",
    "validate",
]


def check(
    model: str | os.PathLike[str],
    *,
    target: str = DEFAULT_TARGET,
    probe: bool = False,
    max_partitions: int | None = -1,
) -> CheckReport:
    """What the GPU delegate of ``target`` will run of ``model``, and why; ``probe`` asks the
    real accelerator too. ``max_partitions`` -1 keeps the target's default, None takes all."""
    report, _ = check_path(
        Path(model), target=target, with_probe=probe, max_partitions=max_partitions
    )
    return report
