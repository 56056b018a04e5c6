"""What a subject of ``validate`` is: its stages (:class:`Subject`), what its report has
(:class:`Report`), and :func:`run_stages`, the one order they run in (the stages are described in
:mod:`tflkit.validation.pipeline`). A leaf: each kind of subject and the pipeline read it."""

from __future__ import annotations

import time
from typing import Any, Protocol

__all__ = ["Report", "Subject", "run_stages"]


class Report(Protocol):
    """What ``validate`` found on one subject."""

    @property
    def exit_code(self) -> int:
        """0 when nothing was found, 1 on a finding."""
        ...

    def to_json(self) -> dict[str, Any]: ...


class Subject(Protocol):
    """One kind of subject's stages (the module docstring says what each does)."""

    kind: str

    def prepare(self) -> None: ...

    def measure(self) -> None: ...

    def judge(self) -> Report: ...

    def localize(self, report: Any) -> None: ...

    def wants_localization(self, report: Any) -> bool: ...


def run_stages(subject: Subject) -> Any:
    """prepare, measure, judge, then localize when the subject wants it; the report, timed."""
    start = time.perf_counter()
    subject.prepare()
    subject.measure()
    report = subject.judge()
    if subject.wants_localization(report):
        subject.localize(report)
    report.wall_seconds = time.perf_counter() - start
    return report
