"""``validate``'s terminal report, for every kind of subject: a ``.tflite``'s
(:func:`tflkit.report.validate_report.render_terminal`), a ``--steps`` run's
(:func:`tflkit.report.steps_report.steps_lines`) and a ``.litertlm`` bundle's
(:func:`tflkit.report.bundle_report.bundle_lines`), chosen by the report's ``kind``. The JSON is
each report's ``to_json``, the HTML page :func:`tflkit.report.html.write_html`, the JUnit XML
:func:`tflkit.report.validate_junit.write_validate_junit`: one report layer for all three."""

from __future__ import annotations

from typing import Any

from rich.console import Console

__all__ = ["render_validation"]


def render_validation(report: Any, out: Console) -> None:
    """The report of ``validate`` on any subject, on the terminal."""
    if report.kind == "tflite":
        from tflkit.report.validate_report import render_terminal

        render_terminal(report, out)
        return
    if report.kind == "steps":
        from tflkit.report.steps_report import steps_lines

        lines = steps_lines(report)
    else:
        from tflkit.report.bundle_report import bundle_lines

        lines = bundle_lines(report)
    for line in lines:
        out.print(line, highlight=False, markup=False)
