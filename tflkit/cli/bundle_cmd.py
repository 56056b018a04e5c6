"""The ``.litertlm`` side of ``inspect``, ``check``, ``validate`` and ``rewrite``: each command
hands a bundle (the file starts with ``LITERTLM``) to the function here; no logic of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from tflkit.errors import UsageError

__all__ = ["check_bundle_cmd", "inspect_bundle_cmd", "read_prompts", "rewrite_bundle_cmd",
           "validate_bundle_cmd"]  # fmt: skip


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


def read_prompts(prompt: list[str], prompts_file: Path | None) -> list[str] | None:
    """``--prompt`` (repeatable) and ``--prompts FILE`` (one prompt a line) as one list."""
    texts = list(prompt)
    if prompts_file is not None:
        try:
            lines = prompts_file.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise UsageError(f"--prompts {prompts_file}: {exc.strerror or exc}") from None
        texts += [line.strip() for line in lines if line.strip()]
        if not texts:
            raise UsageError(f"--prompts {prompts_file}: no prompt in the file")
    return texts or None


def validate_bundle_cmd(
    model: Path,
    prompts: list[str] | None,
    steps: int | None,
    json_output: bool,
    timeout: float,
    progress: Any,
    repro: Path | None = None,
    command: str = "tflkit validate",
    html: Path | None = None,
    junit: Path | None = None,
) -> None:
    from tflkit.bundle.validate import validate_bundle
    from tflkit.cli.output import print_json, write_junit

    report = validate_bundle(model, prompts, steps=steps, timeout=timeout, progress=progress)
    if repro is not None:
        from tflkit.bundle.repro import write_engine_repro
        from tflkit.delegates.litert_lm import pinned_by_default

        progress("writing the engine repro")
        report.repro = write_engine_repro(
            report.engine_finding(),
            model,
            repro,
            command=command,
            one_cpu=pinned_by_default("gpu"),
            timeout=timeout,
        )
    if html is not None:
        from tflkit.report.html import write_html

        write_html(report, html)
    write_junit(report, junit)
    if json_output:
        print_json(report)
    else:
        from tflkit.report.bundle_report import bundle_lines

        _print(bundle_lines(report))
    if report.exit_code:
        raise typer.Exit(report.exit_code)


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
