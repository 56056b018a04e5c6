"""``tflkit inspect MODEL``: what the model holds and what a GPU user should know."""

from __future__ import annotations

from tflkit.cli.options import JsonOption, ModelArgument


def inspect(model: ModelArgument, json_output: JsonOption = False) -> None:
    """Signatures, inputs/outputs, op histogram and versions, weights, GPU warnings (a
    .litertlm bundle: its sections, metadata and tokenizer, then each TFLite section)."""
    from tflkit.bundle.magic import is_bundle

    if is_bundle(model):
        from tflkit.cli.bundle_cmd import inspect_bundle_cmd

        return inspect_bundle_cmd(model, json_output)
    from tflkit.cli.output import console, print_json
    from tflkit.inspection import inspect_path
    from tflkit.report.terminal import render_inspect

    report = inspect_path(model)
    if json_output:
        print_json(report)
    else:
        render_inspect(report, console())
