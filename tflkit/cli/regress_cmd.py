"""``tflkit regress record|check|update``: baselines of outputs and GPU residency for CI."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from tflkit.cli.options import (
    BaselineProbeOption,
    ClusterOption,
    DelegateOption,
    FreshOption,
    HtmlOption,
    InputShapeOption,
    InputsOption,
    JobsOption,
    JsonOption,
    ModelArgument,
    NumInputsOption,
    OptionalModelArgument,
    ResultsOption,
    RunnerTimeoutOption,
    RuntimeOption,
    SeedOption,
    ShardOption,
    SignatureOption,
    SuiteOption,
    TriesOption,
    options_from,
)
from tflkit.cli.runner_options import BaselineRunnerOption, BaselineToleranceOption
from tflkit.errors import UsageError

app = typer.Typer(
    name="regress",
    help="Record baselines (outputs, GPU residency, versions) and fail CI when they move.",
    no_args_is_help=True,
    add_completion=False,
)


OutputDirOption = Annotated[
    Path | None,
    typer.Option("--output", "-o", help="Baseline directory to write.", show_default=False),
]
LatencyOption = Annotated[
    bool, typer.Option("--latency", help="Also keep timings (latency.json) for a budget.")
]
ForceOption = Annotated[bool, typer.Option("--force", help="Replace an existing baseline.")]
RecordRuntimeOption = Annotated[
    str | None,
    typer.Option(
        "--runtime",
        help="Record with this runtime (its own venv, built on first use), e.g. "
        "ai-edge-litert==2.2.0; the baseline names it.",
        show_default=False,
    ),
]
BaselineDirOption = Annotated[
    Path | None,
    typer.Option("--baseline", "-b", help="Baseline directory.", show_default=False),
]
LatencyBudgetOption = Annotated[
    float | None,
    typer.Option(
        "--latency-budget",
        help="Fail when slower than this x the recorded median "
        "on the same device (1.2 = 20% slower).",
    ),
]
JunitOption = Annotated[
    Path | None, typer.Option("--junit", help="Write JUnit XML here.", show_default=False)
]
MarkdownOption = Annotated[
    Path | None,
    typer.Option(
        "--markdown", help="Write a Markdown summary (PR comment) here.", show_default=False
    ),
]


#: the arguments of a suite run (``--suite`` and what goes with it), not options of one model
_SUITE_ARGS = ("suite", "jobs", "shard", "results", "fresh", "cluster", "tries")


def _progress(message: str) -> None:
    if sys.stderr.isatty():
        print(message, file=sys.stderr, flush=True)


def _emit(
    report, json_output: bool, junit: Path | None, markdown: Path | None, html: Path | None = None
) -> None:
    from tflkit.cli.output import show_report
    from tflkit.report.regress_report import (
        render_markdown,
        render_terminal,
        write_junit,
        write_text_atomic,
    )

    if junit is not None:
        write_junit(report, junit)
    if markdown is not None:
        write_text_atomic(markdown, render_markdown(report))
    show_report(report, render_terminal, html=html, json_output=json_output)


def _guard_outputs(model: Path | None, *outputs: Path | None) -> None:
    if model is None:
        return
    for out in outputs:
        if out is not None and out.resolve() == model.resolve():
            raise UsageError("refusing to overwrite the input model with a report")


def _model_and_suite(model: Path | None, suite: Path | None, baseline: Path | None) -> None:
    if suite is not None and model is not None:
        raise UsageError("give either MODEL (with --baseline/-o) or --suite, not both")
    if suite is None and model is None:
        raise UsageError("give a MODEL or --suite tflkit.toml")
    if suite is None and baseline is None:
        raise UsageError("give the baseline directory (--baseline DIR, or -o DIR to record)")


def _envs(specs: list[str]) -> list:
    """The runtime venv of each ``--runtime`` (built on first use), or [None]: the pinned one."""
    if not specs:
        return [None]
    from tflkit.regress.runtimes import ensure_runtime, parse_runtime

    for spec in specs:
        parse_runtime(spec)  # every spec checked before anything is built
    if len(set(specs)) != len(specs):
        raise UsageError("the same --runtime is given twice")
    return [ensure_runtime(spec) for spec in specs]


def _run_suite(
    suite: Path,
    mode: str,
    jobs: int | None,
    shard: str | None,
    results: Path | None,
    fresh: bool,
    runtimes: list[str] = [],  # noqa: B006
    *,
    cluster: tuple[str | None, int] = (None, 3),
):
    """Run a suite's items (or one shard of them) with a progress line per finished item."""
    from tflkit.regress.items import parse_shard
    from tflkit.regress.suite import load_suite, run_suite

    count = {"done": 0}

    def progress(item, result) -> None:
        count["done"] += 1
        where = f", {item.runtime}" if item.runtime_spec else ""
        where += f", node {result.nodes[0]}" if result.nodes else ""
        _progress(f"{result.verdict:5} {item.entry} ({item.runner}{where}) [{count['done']} done]")

    return run_suite(
        load_suite(suite),
        mode=mode,
        jobs=jobs,
        shard=parse_shard(shard),
        results=results,
        fresh=fresh,
        progress=progress,
        runtimes=[env for env in _envs(runtimes) if env is not None],
        cluster=cluster[0],
        tries=cluster[1],
    )


def _show_suite_record(report, json_output: bool) -> None:
    """A suite's record: JSON or a line per model; exits with the report's code."""
    if json_output:
        from tflkit.cli.output import print_json

        print_json(report)
    else:
        from tflkit.report.regress_report import suite_record_lines

        for line in suite_record_lines(report):
            print(line)
    raise typer.Exit(report.exit_code)


@app.command("record")
def record(
    model: OptionalModelArgument = None,
    output: OutputDirOption = None,
    runner: BaselineRunnerOption = [],  # noqa: B006
    inputs: InputsOption = None,
    num_inputs: NumInputsOption = 4,
    seed: SeedOption = 0,
    input_shape: InputShapeOption = None,
    signature: SignatureOption = None,
    tolerance: BaselineToleranceOption = [],  # noqa: B006
    probe: BaselineProbeOption = None,
    latency: LatencyOption = False,
    delegate: DelegateOption = None,
    runtime: RecordRuntimeOption = None,
    force: ForceOption = False,
    suite: SuiteOption = None,
    jobs: JobsOption = None,
    shard: ShardOption = None,
    results: ResultsOption = None,
    fresh: FreshOption = False,
    cluster: ClusterOption = None,
    tries: TriesOption = 3,
    timeout: RunnerTimeoutOption = 300.0,
    json_output: JsonOption = False,
) -> None:
    """Run MODEL on each runner and store inputs, outputs, residency and versions in -o DIR."""

    _model_and_suite(model, suite, output)
    if suite is not None:
        if runtime is not None:
            raise UsageError("--runtime with --suite: record each model with `regress record`")
        mode = "record-force" if force else "record"
        report = _run_suite(suite, mode, jobs, shard, results, fresh, cluster=(cluster, tries))
        _show_suite_record(report, json_output)
    assert model is not None and output is not None
    from tflkit.regress.baseline import check_target, write_baseline

    check_target(output, model, force=force)
    from tflkit.regress.record import RecordOptions
    from tflkit.regress.record import record as run_record

    options = options_from(
        RecordOptions,
        locals(),
        command=record,
        elsewhere=("model", "output", "runner", "force", *_SUITE_ARGS, "json_output"),
        runners=runner,
        probe=True if probe is None else probe,
        runtime=_envs([runtime])[0] if runtime else None,
    )
    _progress(f"recording {model} ...")
    baseline = run_record(model, options)
    path = write_baseline(baseline, output)
    manifest = baseline.manifest
    if json_output:
        from tflkit.cli.output import print_json

        print_json({"schema": "tflkit.regress-record/1", "baseline": str(path), **manifest})
        return
    from tflkit.report.regress_report import record_lines

    for line in record_lines(model, path, manifest):
        print(line)


@app.command("check")
def check(
    model: OptionalModelArgument = None,
    baseline: BaselineDirOption = None,
    runner: BaselineRunnerOption = [],  # noqa: B006
    tolerance: BaselineToleranceOption = [],  # noqa: B006
    probe: BaselineProbeOption = None,
    latency_budget: LatencyBudgetOption = None,
    delegate: DelegateOption = None,
    runtime: RuntimeOption = [],  # noqa: B006
    suite: SuiteOption = None,
    jobs: JobsOption = None,
    shard: ShardOption = None,
    results: ResultsOption = None,
    fresh: FreshOption = False,
    cluster: ClusterOption = None,
    tries: TriesOption = 3,
    junit: JunitOption = None,
    markdown: MarkdownOption = None,
    timeout: RunnerTimeoutOption = 300.0,
    json_output: JsonOption = False,
    html: HtmlOption = None,
) -> None:
    """Rerun MODEL on the baseline's inputs; exit 1 when outputs, residency or latency regress."""
    from tflkit.report.regress_report import RegressReport

    _model_and_suite(model, suite, baseline)
    _guard_outputs(model, junit, markdown, html)
    if suite is not None:
        given = [
            flag
            for flag, value in (
                ("--runner", runner),
                ("--tolerance", tolerance),
                ("--probe/--no-probe", probe is not None),
                ("--latency-budget", latency_budget is not None),
                ("--delegate", delegate is not None),
            )
            if value
        ]
        if given:
            raise UsageError(f"{', '.join(given)}: set these per model in the suite file")
        report = _run_suite(
            suite, "check", jobs, shard, results, fresh, runtime, cluster=(cluster, tries)
        )
    else:
        from tflkit.regress.check import CheckOptions
        from tflkit.regress.check import check as run_check

        assert model is not None and baseline is not None
        options = options_from(
            CheckOptions,
            locals(),
            command=check,
            elsewhere=(
                "model",
                "baseline",
                "runner",
                *_SUITE_ARGS,
                "junit",
                "markdown",
                "json_output",
                "html",
            ),
            runners=runner,
            runtime=None,
        )
        _progress(f"checking {model} against {baseline} ...")
        report = RegressReport(
            [run_check(model, baseline, replace(options, runtime=env)) for env in _envs(runtime)]
        )
    _emit(report, json_output, junit, markdown, html)
    raise typer.Exit(report.exit_code)


@app.command("update")
def update(
    model: ModelArgument,
    baseline: Annotated[
        Path,
        typer.Option("--baseline", "-b", help="Baseline directory to replace.", show_default=False),
    ],
    delegate: DelegateOption = None,
    timeout: RunnerTimeoutOption = 300.0,
    json_output: JsonOption = False,
) -> None:
    """Accept MODEL's current outputs and residency as the new baseline; print what changed."""
    from tflkit.regress.update import update as run_update
    from tflkit.report.regress_report import RegressReport

    _progress(f"re-recording {model} into {baseline} ...")
    result = run_update(model, baseline, delegate=delegate, timeout=timeout)
    _emit(RegressReport([result]), json_output, None, None)


@app.command("merge")
def merge(
    results: Annotated[
        list[Path], typer.Argument(help="The results file (--results) of every shard.")
    ],
    junit: Annotated[
        Path | None, typer.Option("--junit", help="Write JUnit XML here.", show_default=False)
    ] = None,
    markdown: Annotated[
        Path | None,
        typer.Option("--markdown", help="Write a Markdown summary here.", show_default=False),
    ] = None,
    json_output: JsonOption = False,
    html: HtmlOption = None,
) -> None:
    """Join the results files of a suite's N shards into the report of the whole suite."""
    from tflkit.regress.journal import merge_results

    for out in (junit, markdown, html):
        if out is not None and any(out.resolve() == r.resolve() for r in results):
            raise UsageError("refusing to overwrite a results file with a report")
    report = merge_results(results)
    _emit(report, json_output, junit, markdown, html)
    raise typer.Exit(report.exit_code)
