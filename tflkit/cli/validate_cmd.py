"""``tflkit validate MODEL``: run on CPU and GPU (and a reference), compare, localize."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from tflkit.cli.options import (
    DelegateOption,
    HtmlOption,
    InputKindOption,
    InputShapeOption,
    InputsOption,
    JsonOption,
    ModelArgument,
    NumInputsOption,
    ReferenceOption,
    RunnerTimeoutOption,
    SeedOption,
    SignatureOption,
    ToleranceOption,
    options_from,
)
from tflkit.errors import UsageError


def _pairs(items: list[str]) -> list[tuple[str, str]]:
    pairs = []
    for item in items:
        actual, sep, expected = item.partition(":")
        if not sep or not actual or not expected:
            raise UsageError(f"--pair takes ACTUAL:EXPECTED (e.g. gpu-fp16:cpu), got {item!r}")
        pairs.append((actual, expected))
    return pairs


@contextmanager
def _progress() -> Iterator[Callable[[str], None]]:
    """A status line on stderr that each slow step of validate updates: on a terminal a
    spinner, elsewhere (CI, a pipe) a plain line when a step has lasted a few seconds
    (:class:`~tflkit.cli.heartbeat.Heartbeat`)."""
    if not sys.stderr.isatty():
        from tflkit.cli.heartbeat import Heartbeat

        with Heartbeat("validate") as beat:
            yield beat.update
        return
    from rich.console import Console

    status = Console(stderr=True, highlight=False).status("validating")
    status.start()
    try:
        yield status.update
    finally:
        status.stop()


def _command_line(ctx: typer.Context) -> str:
    """This command with the options given (for a repro's README), rebuilt from the parsed
    parameters: ``sys.argv`` is not the command when the CLI is called as a function."""
    import shlex

    words = ["tflkit", "validate"]
    for param in ctx.command.params:
        value = ctx.params.get(param.name or "")
        if value is None or value == param.default or value in ((), []):
            continue
        if param.param_type_name == "argument":
            words.append(str(value))
        elif getattr(param, "is_flag", False):
            words.append(param.opts[0])
        else:
            for one in value if isinstance(value, list | tuple) else [value]:
                words += [param.opts[0], str(one)]
    return shlex.join(words)


def _kv(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--delegate-option takes KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def validate(
    ctx: typer.Context,
    model: ModelArgument,
    runner: Annotated[
        list[str],
        typer.Option(
            "--runner",
            "-r",
            help="cpu, cpu-ref, cpu-fp16 (fp16 emulation), gpu-fp16, gpu-fp32, webgpu-fp16, "
            "webgpu-fp32, wasm (LiteRT.js in headless Chromium), delegate, reference (repeat). "
            "Default: cpu, cpu-fp16, gpu-fp16, gpu-fp32 (+ reference / delegate when given).",
        ),
    ] = [],  # noqa: B006
    pair: Annotated[
        list[str], typer.Option("--pair", help="ACTUAL:EXPECTED to compare (repeat).")
    ] = [],  # noqa: B006
    reference: ReferenceOption = None,
    save_reference: Annotated[
        Path | None,
        typer.Option(
            "--save-reference",
            help="Write the inputs and reference outputs to this .npz.",
        ),
    ] = None,
    delegate: DelegateOption = None,
    delegate_option: Annotated[
        list[str], typer.Option("--delegate-option", help="KEY=VALUE for the delegate.")
    ] = [],  # noqa: B006
    inputs: InputsOption = None,
    num_inputs: NumInputsOption = 4,
    seed: SeedOption = 0,
    input_shape: InputShapeOption = None,
    signature: SignatureOption = None,
    tolerance: ToleranceOption = [],  # noqa: B006
    localize: Annotated[
        bool,
        typer.Option(
            "--localize",
            help="Find the op where the failing runner diverges (GPU, fp16 emulation, .tflite "
            "reference); with --steps, on the decode call of the step where a GPU runner parts.",
        ),
    ] = False,
    localize_on: Annotated[
        str | None,
        typer.Option(
            "--localize-on",
            help="Runner to localize: gpu-fp16, gpu-fp32, cpu-fp16 or reference (with --steps: "
            "gpu-fp32 or gpu-fp16).",
        ),
    ] = None,
    input_kind: InputKindOption = "realistic",
    output_groups: Annotated[
        list[str],
        typer.Option(
            "--output-groups",
            help="Judge parts of an output's channel axis apart, each at its own scale: "
            "OUTPUT[@AXIS]=[LABEL:]START:STOP,... (e.g. output0=boxes:0:4,scores:4:22), or "
            "OUTPUT=none; default: groups detected from the values (repeatable).",
            metavar="OUTPUT=0:4,4:22",
        ),
    ] = [],  # noqa: B006
    fixed_tolerances: Annotated[
        bool,
        typer.Option(
            "--fixed-tolerances",
            help="Judge with the fixed per-precision bounds instead of the model's measured noise.",
        ),
    ] = False,
    html: HtmlOption = None,
    model_explorer: Annotated[
        Path | None,
        typer.Option(
            "--model-explorer",
            help="Write Model Explorer node data (per-op error).",
        ),
    ] = None,
    repro: Annotated[
        Path | None,
        typer.Option(
            "--repro",
            help="With the divergence localized (implies --localize): write the smallest model "
            "that still shows it on the GPU to this directory, with inputs.npz, repro.py (only "
            "ai-edge-litert and numpy; exit 1 and REPRODUCED when the bug shows) and README.md. "
            "A .litertlm bundle: repro.py of LiteRT-LM alone showing the engine's finding.",
        ),
    ] = None,
    browser_adapter: Annotated[
        str,
        typer.Option(
            "--browser-adapter",
            help="WebGPU adapter of the browser runners: swiftshader (core WebGPU) or lavapipe "
            "(Mesa >= 25, WebGPU compatibility mode).",
        ),
    ] = "swiftshader",
    steps: Annotated[
        int | None,
        typer.Option(
            "--steps",
            help="KV-cache LLM graph (prefill + decode signatures): prefill on a seeded prompt, "
            "then N decode steps feeding the cache back, on cpu, cpu-ref, cpu-fp16, gpu-fp16 "
            "and gpu-fp32 (or --runner); logits and greedy tokens compared per step.",
            min=1,
        ),
    ] = None,
    prompt: Annotated[
        list[str],
        typer.Option("--prompt", help="A .litertlm bundle: a prompt to generate from (repeat)."),
    ] = [],  # noqa: B006
    prompts: Annotated[
        Path | None,
        typer.Option("--prompts", help="A .litertlm bundle: a file of prompts, one a line."),
    ] = None,
    timeout: RunnerTimeoutOption = 300.0,
    memory_budget: Annotated[
        str | None,
        typer.Option(
            "--memory-budget",
            help="Memory validate may use (e.g. 4G, 512M); default: 75% of the available "
            "memory. A model that cannot run within it is refused before it starts (exit 2).",
        ),
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """Run the model with and without the GPU delegate, compare, and find where they part (a
    .litertlm bundle: the LiteRT-LM engine on CPU and GPU, token by token)."""
    from tflkit.bundle.magic import is_bundle

    if is_bundle(model):
        from tflkit.cli.bundle_cmd import read_prompts, validate_bundle_cmd

        with _progress() as progress:
            texts = read_prompts(prompt, prompts)
            return validate_bundle_cmd(
                model, texts, steps, json_output, timeout, progress, repro, _command_line(ctx)
            )
    from tflkit.cli.output import show_validate_report
    from tflkit.compare.groups import parse_output_groups
    from tflkit.validation.budget import parse_size
    from tflkit.validation.run import ValidateOptions
    from tflkit.validation.run import validate as run_validate

    if (html is not None or model_explorer is not None) and model.resolve() in {
        p.resolve() for p in (html, model_explorer) if p is not None
    }:
        raise UsageError("refusing to overwrite the input model with a report")
    options = options_from(
        ValidateOptions,
        locals(),
        command=validate,
        elsewhere=(
            "ctx",
            "model",
            "runner",
            "pair",
            "delegate_option",
            "localize_on",
            "fixed_tolerances",
            "html",
            "model_explorer",
            "json_output",
            "prompt",  # a .litertlm bundle's, read above
            "prompts",
        ),
        runners=runner,
        pairs=_pairs(pair),
        delegate_options=_kv(delegate_option),
        localize=localize
        or model_explorer is not None
        or localize_on is not None
        or repro is not None,
        localize_runner=localize_on,
        calibrate=not fixed_tolerances,
        output_groups=parse_output_groups(output_groups),
        repro_command=_command_line(ctx),
        memory_budget=None if memory_budget is None else parse_size(memory_budget),
    )
    if steps is not None:
        from tflkit.cli.output import show_steps_report
        from tflkit.validation.steps import validate_steps

        with _progress() as progress:
            options.progress = progress
            show_steps_report(validate_steps(model, options), json_output=json_output)
        return
    with _progress() as progress:
        options.progress = progress
        report = run_validate(model, options)
    if model_explorer is not None and report.localization is not None:
        from tflkit.report.validate_report import write_model_explorer

        write_model_explorer(report, model_explorer)
    show_validate_report(report, html=html, json_output=json_output)
