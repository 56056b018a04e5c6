"""``tflkit validate MODEL``: run on CPU and GPU (and a reference), compare, localize."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

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
    options_from,
)
from tflkit.cli.runner_options import EXAMPLE_PAIR, ToleranceOption, listed
from tflkit.cli.subjects import refuse_inapplicable
from tflkit.delegates.base import (
    TFLITE_RUNNERS,
    VALIDATE_DEFAULT,
    find_spec,
    parse_pair,
    spec_names,
)
from tflkit.errors import UsageError

#: the registry's runners as the help texts name them
_STEPS = spec_names(steps=True)
_LOCALIZE = (*spec_names(localize=True), find_spec(device="framework").name)
_STEPS_LOCALIZE = tuple(reversed([n for n in _STEPS if n in spec_names(device="gpu")]))
_BROWSER = spec_names(device="browser")


def _pairs(items: list[str]) -> list[tuple[str, str]]:
    """Each ``--pair ACTUAL:EXPECTED``, read once into its two runners."""
    return [(p.actual.name, p.expected.name) for p in map(parse_pair, items)]


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


# --- the options only validate takes ------------------------------------------------------------

_Runner = Annotated[
    list[str],
    typer.Option(
        "--runner",
        "-r",
        help=f"{listed(TFLITE_RUNNERS, '')} (repeat; {listed(spec_names(emulated=True), '')}: "
        f"fp16 emulation; {listed(_BROWSER, 'and')}: LiteRT.js in headless Chromium). "
        f"Default: {listed(VALIDATE_DEFAULT, '')} (+ reference / delegate when given).",
    ),
]
_Pair = Annotated[
    list[str],
    typer.Option("--pair", help=f"ACTUAL:EXPECTED to compare (repeat; e.g. {EXAMPLE_PAIR})."),
]
_SaveReference = Annotated[
    Path | None,
    typer.Option(
        "--save-reference",
        help="Write the inputs and reference outputs to this .npz.",
    ),
]
_DelegateOption = Annotated[
    list[str], typer.Option("--delegate-option", help="KEY=VALUE for the delegate.")
]
_Localize = Annotated[
    bool,
    typer.Option(
        "--localize",
        help="Find the op where the failing runner diverges (GPU, fp16 emulation, .tflite "
        "reference); with --steps, on the decode call of the step where a GPU runner parts.",
    ),
]
_LocalizeOn = Annotated[
    str | None,
    typer.Option(
        "--localize-on",
        help=f"Runner to localize: {listed(_LOCALIZE)} (with --steps: {listed(_STEPS_LOCALIZE)}).",
    ),
]
_OutputGroups = Annotated[
    list[str],
    typer.Option(
        "--output-groups",
        help="Judge parts of an output's channel axis apart, each at its own scale: "
        "OUTPUT[@AXIS]=[LABEL:]START:STOP,... (e.g. output0=boxes:0:4,scores:4:22), or "
        "OUTPUT=none; default: groups detected from the values (repeatable).",
        metavar="OUTPUT=0:4,4:22",
    ),
]
_FixedTolerances = Annotated[
    bool,
    typer.Option(
        "--fixed-tolerances",
        help="Judge with the fixed per-precision bounds instead of the model's measured noise.",
    ),
]
_ModelExplorer = Annotated[
    Path | None,
    typer.Option(
        "--model-explorer",
        help="Write Model Explorer node data (per-op error).",
    ),
]
_Repro = Annotated[
    Path | None,
    typer.Option(
        "--repro",
        help="With the divergence localized (implies --localize): write the smallest model "
        "that still shows it on the GPU to this directory, with inputs.npz, repro.py (only "
        "ai-edge-litert and numpy; exit 1 and REPRODUCED when the bug shows) and README.md. "
        "A .litertlm bundle: repro.py of LiteRT-LM alone showing the engine's finding.",
    ),
]
_BrowserAdapter = Annotated[
    str,
    typer.Option(
        "--browser-adapter",
        help="WebGPU adapter of the browser runners: swiftshader (core WebGPU) or lavapipe "
        "(Mesa >= 25, WebGPU compatibility mode).",
    ),
]
_Steps = Annotated[
    int | None,
    typer.Option(
        "--steps",
        help="KV-cache LLM graph (prefill + decode signatures): prefill on a seeded prompt, "
        f"then N decode steps feeding the cache back, on {listed(_STEPS, 'and')} (or "
        "--runner); logits and greedy tokens compared per step.",
        min=1,
    ),
]
_Prompt = Annotated[
    list[str],
    typer.Option("--prompt", help="A .litertlm bundle: a prompt to generate from (repeat)."),
]
_Prompts = Annotated[
    Path | None,
    typer.Option("--prompts", help="A .litertlm bundle: a file of prompts, one a line."),
]
_MemoryBudget = Annotated[
    str | None,
    typer.Option(
        "--memory-budget",
        help="Memory validate may use (e.g. 4G, 512M); default: 75% of the available memory. "
        "A model that cannot run within it is refused before it starts (exit 2).",
    ),
]


_Junit = Annotated[
    Path | None,
    typer.Option("--junit", help="Write JUnit XML here (every subject).", show_default=False),
]


def _given(ctx: typer.Context) -> list[str]:
    """The options given on the command line (as spelled there: ``--html``), in order (a
    default's source is ``DEFAULT``; the command line's ``COMMANDLINE``)."""
    given = []
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name or "")
        if param.param_type_name == "option" and source is not None and source.name != "DEFAULT":
            given.append(param.opts[0])
    return given


def _read_prompts(prompt: list[str], prompts_file: Path | None) -> list[str] | None:
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


def _options(ctx: typer.Context, params: dict[str, Any]) -> Any:
    """``validate``'s arguments as :class:`~tflkit.validation.options.ValidateOptions`, for
    any subject (the options a subject does not take are refused before: ``cli/subjects``)."""
    from tflkit.compare.groups import parse_output_groups
    from tflkit.validation.budget import parse_size
    from tflkit.validation.options import ValidateOptions

    _not_the_model(params["model"], params["html"], params["model_explorer"], params["junit"])
    budget = params["memory_budget"]
    return options_from(
        ValidateOptions,
        params,
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
            "prompt",
            "junit",
        ),
        runners=params["runner"],
        pairs=_pairs(params["pair"]),
        delegate_options=_kv(params["delegate_option"]),
        localize=params["localize"]
        or any(params[k] is not None for k in ("model_explorer", "localize_on", "repro")),
        localize_runner=params["localize_on"],
        calibrate=not params["fixed_tolerances"],
        output_groups=parse_output_groups(params["output_groups"]),
        repro_command=_command_line(ctx),
        memory_budget=None if budget is None else parse_size(budget),
        prompts=_read_prompts(params["prompt"], params["prompts"]),
    )


def _not_the_model(model: Path, *reports: Path | None) -> None:
    if model.resolve() in {p.resolve() for p in reports if p is not None}:
        raise UsageError("refusing to overwrite the input model with a report")


def validate(
    ctx: typer.Context,
    model: ModelArgument,
    runner: _Runner = [],  # noqa: B006
    pair: _Pair = [],  # noqa: B006
    reference: ReferenceOption = None,
    save_reference: _SaveReference = None,
    delegate: DelegateOption = None,
    delegate_option: _DelegateOption = [],  # noqa: B006
    inputs: InputsOption = None,
    num_inputs: NumInputsOption = 4,
    seed: SeedOption = 0,
    input_shape: InputShapeOption = None,
    signature: SignatureOption = None,
    tolerance: ToleranceOption = [],  # noqa: B006
    localize: _Localize = False,
    localize_on: _LocalizeOn = None,
    input_kind: InputKindOption = "realistic",
    output_groups: _OutputGroups = [],  # noqa: B006
    fixed_tolerances: _FixedTolerances = False,
    html: HtmlOption = None,
    model_explorer: _ModelExplorer = None,
    repro: _Repro = None,
    browser_adapter: _BrowserAdapter = "swiftshader",
    steps: _Steps = None,
    prompt: _Prompt = [],  # noqa: B006
    prompts: _Prompts = None,
    timeout: RunnerTimeoutOption = 300.0,
    junit: _Junit = None,
    memory_budget: _MemoryBudget = None,
    json_output: JsonOption = False,
) -> None:
    """Run the model with and without the GPU delegate, compare, and find where they part (a
    .litertlm bundle: the LiteRT-LM engine on CPU and GPU, token by token)."""
    from tflkit.cli.output import show_validation, write_junit
    from tflkit.validation.pipeline import subject_kind
    from tflkit.validation.pipeline import validate as run_pipeline

    refuse_inapplicable(subject_kind(model, steps), _given(ctx))
    options = _options(ctx, locals())
    with _progress() as progress:
        options.progress = progress
        report = run_pipeline(model, options)
    if model_explorer is not None and report.localization is not None:
        from tflkit.report.validate_report import write_model_explorer

        write_model_explorer(report, model_explorer)
    write_junit(report, junit)
    show_validation(report, html=html, json_output=json_output)
