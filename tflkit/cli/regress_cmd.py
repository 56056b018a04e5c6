"""``tflkit regress record|check|update``: baselines of outputs and GPU residency for CI."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from tflkit.cli.options import InputShapeOption, JsonOption
from tflkit.errors import UsageError

app = typer.Typer(
    name="regress",
    help="Record baselines (outputs, GPU residency, versions) and fail CI when they move.",
    no_args_is_help=True,
    add_completion=False,
)

OptionalModel = Annotated[
    Path | None, typer.Argument(help="Path to a .tflite model.", show_default=False)
]
RunnerOption = Annotated[
    list[str],
    typer.Option(
        "--runner",
        "-r",
        help="cpu, cpu-ref, gpu-fp16, gpu-fp32, delegate (repeat). "
        "Record default: cpu, gpu-fp16, gpu-fp32; check default: the baseline's.",
    ),
]
ToleranceOption = Annotated[
    list[str],
    typer.Option(
        "--tolerance",
        help="[RUNNER|fp16|fp32|all@]rtol=..,atol=..,min_cosine=.. (e.g. gpu-fp16@rtol=0.01)",
    ),
]
ProbeOption = Annotated[
    bool | None,
    typer.Option(
        "--probe/--no-probe", help="Compile on the real GPU accelerator too.", show_default=False
    ),
]
SuiteOption = Annotated[
    Path | None, typer.Option("--suite", help="A tflkit.toml suite file.", show_default=False)
]
TimeoutOption = Annotated[float, typer.Option("--timeout", help="Seconds per runner.")]


def _progress(message: str) -> None:
    if sys.stderr.isatty():
        print(message, file=sys.stderr, flush=True)


def _emit(report, json_output: bool, junit: Path | None, markdown: Path | None) -> None:
    from tflkit.cli.output import console, print_json
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
    if json_output:
        print_json(report.to_json())
    else:
        render_terminal(report, console())


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


@app.command("record")
def record(
    model: OptionalModel = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Baseline directory to write.", show_default=False),
    ] = None,
    runner: RunnerOption = [],  # noqa: B006
    inputs: Annotated[
        Path | None,
        typer.Option(
            "--inputs",
            help=".npy / .npz (N sets on a leading axis) or an image folder.",
            show_default=False,
        ),
    ] = None,
    num_inputs: Annotated[int, typer.Option("--num-inputs", "-n", help="Random input sets.")] = 4,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random inputs.")] = 0,
    input_shape: InputShapeOption = None,
    signature: Annotated[str | None, typer.Option("--signature", help="Signature key.")] = None,
    tolerance: ToleranceOption = [],  # noqa: B006
    probe: ProbeOption = None,
    latency: Annotated[
        bool, typer.Option("--latency", help="Also keep timings (latency.json) for a budget.")
    ] = False,
    delegate: Annotated[
        Path | None, typer.Option("--delegate", help="External delegate .so.", show_default=False)
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing baseline.")] = False,
    suite: SuiteOption = None,
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", help="Parallel processes.")] = None,
    timeout: TimeoutOption = 300.0,
    json_output: JsonOption = False,
) -> None:
    """Run MODEL on each runner and store inputs, outputs, residency and versions in -o DIR."""
    from tflkit.compare.tolerances import parse_overrides
    from tflkit.ir.shapes import parse_input_shapes

    _model_and_suite(model, suite, output)
    if suite is not None:
        from tflkit.regress.suite import load_suite, run_suite

        report = run_suite(load_suite(suite), mode="record-force" if force else "record", jobs=jobs)
        if json_output:
            from tflkit.cli.output import print_json

            print_json(report.to_json())
        for result in [] if json_output else report.models:
            what = f"error: {result.error}" if result.error else "; ".join(result.changes)
            print(f"{Path(result.model).name} -> {result.baseline}: {what}")
        raise typer.Exit(report.exit_code)
    assert model is not None and output is not None
    if (output / "manifest.json").is_file() and not force:
        raise UsageError(
            f"{output} already holds a baseline: use `tflkit regress update` or "
            "--force to replace it"
        )
    if output.resolve() == model.resolve():
        raise UsageError("refusing to overwrite the input model with a baseline")
    from tflkit.regress.baseline import write_baseline
    from tflkit.regress.record import RecordOptions
    from tflkit.regress.record import record as run_record

    options = RecordOptions(
        runners=runner,
        inputs=inputs,
        num_inputs=num_inputs,
        seed=seed,
        input_shapes=parse_input_shapes(input_shape),
        signature=signature,
        tolerances=parse_overrides(tolerance),
        probe=True if probe is None else probe,
        latency=latency,
        delegate=delegate,
        timeout=timeout,
    )
    _progress(f"recording {model} ...")
    baseline = run_record(model, options)
    path = write_baseline(baseline, output)
    manifest = baseline.manifest
    if json_output:
        from tflkit.cli.output import print_json

        print_json({"schema": "tflkit.regress-record/1", "baseline": str(path), **manifest})
        return
    residency = manifest["residency"]
    static = residency["static"]
    line = f"{static['gpu_ops']}/{static['total_ops']} ops on the GPU (static)"
    if residency["probe"] is not None:
        p = residency["probe"]
        line += f"; probe {p['status']}: {p['ops_on_gpu']} on GPU, {p['ops_on_cpu']} on CPU"
    print(f"recorded {model.name} -> {path}")
    for name, entry in manifest["runners"].items():
        state = "ok" if entry["status"] == "ok" else f"{entry['status']}: {entry['error']}"
        print(f"  {name}: {state}; {len(entry['outputs'])} output(s) kept")
    print(f"  {line}")


@app.command("check")
def check(
    model: OptionalModel = None,
    baseline: Annotated[
        Path | None,
        typer.Option("--baseline", "-b", help="Baseline directory.", show_default=False),
    ] = None,
    runner: RunnerOption = [],  # noqa: B006
    tolerance: ToleranceOption = [],  # noqa: B006
    probe: ProbeOption = None,
    latency_budget: Annotated[
        float | None,
        typer.Option(
            "--latency-budget",
            help="Fail when slower than this x the recorded median "
            "on the same device (1.2 = 20% slower).",
            show_default=False,
        ),
    ] = None,
    delegate: Annotated[
        Path | None, typer.Option("--delegate", help="External delegate .so.", show_default=False)
    ] = None,
    suite: SuiteOption = None,
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", help="Parallel processes.")] = None,
    junit: Annotated[
        Path | None, typer.Option("--junit", help="Write JUnit XML here.", show_default=False)
    ] = None,
    markdown: Annotated[
        Path | None,
        typer.Option(
            "--markdown", help="Write a Markdown summary (PR comment) here.", show_default=False
        ),
    ] = None,
    timeout: TimeoutOption = 300.0,
    json_output: JsonOption = False,
) -> None:
    """Rerun MODEL on the baseline's inputs; exit 1 when outputs, residency or latency regress."""
    from tflkit.report.regress_report import RegressReport

    _model_and_suite(model, suite, baseline)
    _guard_outputs(model, junit, markdown)
    if suite is not None:
        from tflkit.regress.suite import load_suite, run_suite

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

        def progress(result) -> None:
            _progress(f"{result.verdict:5} {Path(result.model).name}")

        report = run_suite(load_suite(suite), jobs=jobs, progress=progress)
    else:
        from tflkit.compare.tolerances import parse_overrides
        from tflkit.regress.check import CheckOptions
        from tflkit.regress.check import check as run_check

        assert model is not None and baseline is not None
        options = CheckOptions(
            runners=runner,
            tolerances=parse_overrides(tolerance),
            probe=probe,
            latency_budget=latency_budget,
            delegate=delegate,
            timeout=timeout,
        )
        _progress(f"checking {model} against {baseline} ...")
        report = RegressReport([run_check(model, baseline, options)])
    _emit(report, json_output, junit, markdown)
    raise typer.Exit(report.exit_code)


@app.command("update")
def update(
    model: Annotated[Path, typer.Argument(help="Path to a .tflite model.", show_default=False)],
    baseline: Annotated[
        Path,
        typer.Option("--baseline", "-b", help="Baseline directory to replace.", show_default=False),
    ],
    delegate: Annotated[
        Path | None, typer.Option("--delegate", help="External delegate .so.", show_default=False)
    ] = None,
    timeout: TimeoutOption = 300.0,
    json_output: JsonOption = False,
) -> None:
    """Accept MODEL's current outputs and residency as the new baseline; print what changed."""
    from tflkit.regress.update import update as run_update
    from tflkit.report.regress_report import RegressReport

    _progress(f"re-recording {model} into {baseline} ...")
    result = run_update(model, baseline, delegate=delegate, timeout=timeout)
    _emit(RegressReport([result]), json_output, None, None)
