"""Look at this machine: every :class:`~tflkit.doctor.items.Item`, in the order shown."""

from __future__ import annotations

from .gpu_side import gpu_items
from .items import DoctorReport
from .python_side import extras_items, runtime_items, tflkit_items
from .tools import browser_items, converter_items, device_items

__all__ = ["survey"]


def survey(*, gpu_timeout: float = 120.0) -> DoctorReport:
    """What this machine has; looks only (the GPU probe runs in a child process)."""
    report = DoctorReport()
    report.items += tflkit_items()
    report.items += runtime_items()
    report.items += gpu_items(gpu_timeout)
    report.items += browser_items()
    report.items += converter_items()
    report.items += device_items()
    report.items += extras_items()
    return report
