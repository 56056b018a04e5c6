"""GPU targets: one constraint table per runtime, listed explicitly in ``TARGETS``."""

from __future__ import annotations

from tflkit.compat.targets import litert_gpu, tflite_gpu
from tflkit.compat.targets.common import OpRule, Target
from tflkit.errors import UsageError

TARGETS: dict[str, Target] = {
    "litert-gpu": litert_gpu.TARGET,
    "tflite-gpu": tflite_gpu.TARGET,
}
DEFAULT_TARGET = "litert-gpu"


def get_target(target: str | Target = DEFAULT_TARGET) -> Target:
    """The target called ``target`` (or ``target`` itself); UsageError for unknown names."""
    if isinstance(target, Target):
        return target
    try:
        return TARGETS[target]
    except KeyError:
        known = ", ".join(sorted(TARGETS))
        raise UsageError(f"unknown GPU target {target!r}; choose one of: {known}") from None


__all__ = ["DEFAULT_TARGET", "TARGETS", "OpRule", "Target", "get_target"]
