"""``tflkit doctor``: what this machine has for tflkit, and the command for each missing piece."""

from __future__ import annotations

from typing import Annotated

import typer

from tflkit.cli.options import JsonOption


def doctor(
    json_output: JsonOption = False,
    gpu_timeout: Annotated[
        float,
        typer.Option("--gpu-timeout", help="Seconds the GPU probe may take (a 1-op model)."),
    ] = 120.0,
) -> None:
    """tflkit and its runtimes, the GPU accelerator and its adapter, the browser harness, the
    converter environments, devices and extras; exit 1 when the GPU accelerator does not work."""
    from tflkit.cli.output import console, print_json
    from tflkit.doctor.survey import survey
    from tflkit.report.doctor_report import render_terminal

    report = survey(gpu_timeout=gpu_timeout)
    if json_output:
        print_json(report.to_json())
    else:
        render_terminal(report, console())
    if not report.gpu_ok:
        raise typer.Exit(1)
