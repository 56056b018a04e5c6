"""``tflkit check MODEL``: which ops the GPU delegate will not take, why, and what it costs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from tflkit.cli.options import HtmlOption, InputShapeOption, JsonOption, ModelArgument

#: tflkit.compat.targets.DEFAULT_TARGET, spelled out so ``--help`` does not import the tables
DEFAULT_TARGET = "litert-gpu"

EXIT_NOT_GPU_READY = 1


TargetOption = Annotated[str, typer.Option(help="GPU target: litert-gpu or tflite-gpu.")]
ProbeOption = Annotated[
    bool,
    typer.Option(
        "--probe",
        help="Also compile on the real GPU accelerator (a model with several signatures: "
        "each alone too, decode first).",
    ),
]
StrictOption = Annotated[
    bool, typer.Option("--strict", help="Exit 1 unless every op runs on the GPU.")
]
MaxPartitionsOption = Annotated[
    int | None,
    typer.Option(
        help="Partitions the delegate takes per subgraph (0: all). Default: the target's "
        "own (1, the largest, for both litert-gpu and tflite-gpu).",
    ),
]
ModelExplorerOption = Annotated[
    Path | None,
    typer.Option(help="Write per-op verdicts as Model Explorer node data (JSON) here."),
]
TimeoutOption = Annotated[float, typer.Option(help="Probe timeout in seconds.")]
AllOpsOption = Annotated[
    bool, typer.Option("--all", help="List every op (default: groups, at most 40 lines).")
]
ProbeBrowserOption = Annotated[
    str | None,
    typer.Option(
        "--probe-browser",
        help="Also run it in LiteRT.js (WebGPU) in headless Chromium on this adapter "
        "(swiftshader or lavapipe) and say which ops it leaves to the CPU, and where that "
        "differs from the native accelerator (with --probe).",
    ),
]
ReproOption = Annotated[
    Path | None,
    typer.Option(
        "--repro",
        help="When the probe pins a crash on an op (implies --probe): write that op alone "
        "(else the ops up to it) and repro.py, which compiles it on the GPU and dies the "
        "same way, with README.md, to this directory.",
    ),
]


def check(
    model: ModelArgument,
    json_output: JsonOption = False,
    target: TargetOption = DEFAULT_TARGET,
    probe: ProbeOption = False,
    strict: StrictOption = False,
    max_partitions: MaxPartitionsOption = None,
    model_explorer: ModelExplorerOption = None,
    timeout: TimeoutOption = 120.0,
    input_shape: InputShapeOption = None,
    all_ops: AllOpsOption = False,
    html: HtmlOption = None,
    probe_browser: ProbeBrowserOption = None,
    repro: ReproOption = None,
) -> None:
    """Per-op GPU verdicts with reasons and fixes, partitions, CPU<->GPU copies, FLOP share."""
    from tflkit.bundle.magic import is_bundle

    if is_bundle(model):  # a .litertlm: each TFLite section the GPU may get, decode first
        from tflkit.cli.bundle_cmd import check_bundle_cmd

        return check_bundle_cmd(
            model, json_output, strict, target=target, with_probe=probe, probe_timeout=timeout
        )
    from tflkit.fsio import Sha256Job

    sha256 = Sha256Job.of_file(model)  # started before Typer loaded (tflkit.cli.main)
    if html is not None and html.resolve() == model.resolve():
        from tflkit.errors import UsageError

        raise UsageError("refusing to overwrite the input model with the HTML report")
    from tflkit.cli.output import console, echo_native_log, print_json, spinner
    from tflkit.compat.check import TARGET_DEFAULT
    from tflkit.ir.shapes import parse_input_shapes
    from tflkit.rewriter.advice import check_path

    limit = TARGET_DEFAULT if max_partitions is None else (max_partitions or None)
    report, loaded = check_path(
        model,
        target=target,
        max_partitions=limit,
        with_probe=probe or repro is not None,
        probe_timeout=timeout,
        input_shapes=parse_input_shapes(input_shape),
        progress=spinner,
        native_log=echo_native_log,
        browser=probe_browser,
        sha256=sha256,
    )
    if repro is not None:
        _write_crash_repro(report, loaded, repro, model, timeout)
    if model_explorer is not None:
        from tflkit.report.model_explorer import check_node_data, write_node_data

        write_node_data(model_explorer, check_node_data(report, loaded))
    if html is not None:
        from tflkit.report.html import write_html

        write_html(report, html, model=loaded)
    if json_output:
        print_json(report)
    else:
        from tflkit.report.check_terminal import render_check

        render_check(report, console(), all_ops=all_ops)
    if strict and not report.gpu_ready:
        raise typer.Exit(EXIT_NOT_GPU_READY)


def _write_crash_repro(
    report: Any, loaded: Any, directory: Path, model: Path, timeout: float
) -> None:
    """``--repro``: the crashing op's repro, or one line on stderr saying why there is none."""
    import shlex
    import sys

    from tflkit import ir
    from tflkit.validation.repro import write_crash_repro

    crash = report.probe.crash if report.probe is not None else None
    if crash is None or crash.op_index is None:
        why = (
            "the accelerator did not crash"
            if crash is None
            else "the crash was not pinned on an op"
        )
        print(f"repro: nothing written: {why}", file=sys.stderr)
        return
    written = write_crash_repro(
        ir.dumps(loaded),
        crash.op_index,
        crash.message,
        directory,
        command=shlex.join(["tflkit", "check", "--probe", str(model), "--repro", str(directory)]),
        label=model.name,
        timeout=timeout,
    )
    print(written.message, file=sys.stderr)
