"""``tflkit rewrite MODEL -o OUT``: swap ops the GPU rejects, verify, write atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tflkit.cli.options import HtmlOption, InputShapeOption, JsonOption, ModelArgument


def rewrite(
    model: ModelArgument,
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the result.")],
    rule: Annotated[
        list[str] | None,
        typer.Option("--rule", help="Force this rule on every op it matches (repeatable)."),
    ] = None,
    input_shape: InputShapeOption = None,
    force: Annotated[
        bool, typer.Option("--force", help="Write even if outputs differ beyond the contracts.")
    ] = False,
    probe: Annotated[
        bool, typer.Option("--probe", help="Ask the real GPU accelerator before and after.")
    ] = False,
    json_output: JsonOption = False,
    html: HtmlOption = None,
) -> None:
    """Rewrite the ops the GPU delegate rejects into equivalents it takes, and prove it (a
    .litertlm bundle: its TFLite sections, the rest kept byte for byte, proven by LiteRT-LM)."""
    from tflkit.bundle.magic import is_bundle

    if is_bundle(model):
        from tflkit.cli.bundle_cmd import rewrite_bundle_cmd

        return rewrite_bundle_cmd(model, output, rule or [], force, json_output)
    if html is not None and html.resolve() == model.resolve():
        from tflkit.errors import UsageError

        raise UsageError("refusing to overwrite the input model with the HTML report")
    from tflkit.cli.output import console, echo_native_log, print_json, spinner
    from tflkit.ir.shapes import parse_input_shapes
    from tflkit.report.rewrite_report import render_rewrite
    from tflkit.rewriter.reporting import build_report
    from tflkit.rewriter.run import RewriteRefused, rewrite_file

    shapes = parse_input_shapes(input_shape)
    outcome, written = rewrite_file(
        model, output, force=force, rule_names=tuple(rule or ()), input_shapes=shapes or None
    )
    before = after = None
    if probe:
        from tflkit.gpu.probe import probe as run_probe

        with spinner(f"compiling {model.name} on the GPU accelerator (probe, before)"):
            before = run_probe(outcome.original)
        with spinner(f"compiling {output.name} on the GPU accelerator (probe, after)"):
            after = run_probe(outcome.rewritten)
        echo_native_log(before.log_text + after.log_text)
    report = build_report(
        outcome, str(model), str(output), written, probe_before=before, probe_after=after
    )
    if html is not None:
        from tflkit.report.html import write_html

        write_html(report, html)
    if json_output:
        print_json(report)
    else:
        render_rewrite(report, console())
    if not written and outcome.changed:  # nothing to do is a success (exit 0), not a refusal
        raise RewriteRefused(
            f"not written: {report.verification['problem']} (use --force to write anyway)"
        )
