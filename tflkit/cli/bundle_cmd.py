"""The ``.litertlm`` side of ``inspect``, ``check`` and ``rewrite`` (``validate`` takes a bundle as
one of its subjects: :mod:`tflkit.validation.pipeline`): each command hands a bundle (the file
starts with ``LITERTLM``) to the function here; no logic of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

__all__ = ["check_bundle_cmd", "inspect_bundle_cmd", "rewrite_bundle_cmd"]


def _print(lines: list[str]) -> None:
    from tflkit.cli.output import console

    out = console()
    for line in lines:
        out.print(line, highlight=False, markup=False)


def inspect_bundle_cmd(model: Path, json_output: bool) -> None:
    from tflkit.bundle.describe import inspect_bundle
    from tflkit.cli.output import console, print_json
    from tflkit.report.bundle_report import inspect_lines
    from tflkit.report.terminal import render_inspect

    report = inspect_bundle(model)
    if json_output:
        print_json(report)
        return
    _print(inspect_lines(report))
    for index, section in report.models.items():
        _print(["", f"section {index} (TFLiteModel):"])
        render_inspect(section, console())


def check_bundle_cmd(model: Path, json_output: bool, strict: bool, **options: Any) -> None:
    from tflkit.bundle.describe import check_bundle
    from tflkit.cli.output import console, print_json, spinner
    from tflkit.report.check_terminal import render_check

    report = check_bundle(model, progress=spinner, **options)
    if json_output:
        print_json(report)
    else:
        for section, checked, skipped in report.sections:
            _print(
                [
                    f"{report.path} {section.label}:"
                    + (f" not checked: {skipped}" if skipped else "")
                ]
            )
            if checked is not None:
                render_check(checked, console())
            _print([f"warning: {w}" for w in report.warnings.get(section.index, [])])
    if strict and not report.gpu_ready:
        raise typer.Exit(1)


def rewrite_bundle_cmd(
    model: Path, output: Path, rules: list[str], force: bool, json_output: bool
) -> None:
    from tflkit.bundle.rewrite import rewrite_bundle
    from tflkit.cli.output import print_json
    from tflkit.report.bundle_report import rewrite_lines
    from tflkit.rewriter.run import RewriteRefused

    report = rewrite_bundle(model, output, rule_names=rules, force=force)
    if json_output:
        print_json(report)
    else:
        _print(rewrite_lines(report))
    if not report.written and report.problem != "no rule fired":
        raise RewriteRefused(f"not written: {report.problem} (use --force to write anyway)")
