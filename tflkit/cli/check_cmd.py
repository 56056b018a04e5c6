"""``tflkit check MODEL``: which ops the GPU delegate will not take, why, and what it costs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tflkit.cli.options import JsonOption, ModelArgument
from tflkit.cli.output import console, print_json
from tflkit.compat.check import TARGET_DEFAULT, check_path
from tflkit.compat.targets import DEFAULT_TARGET
from tflkit.report.model_explorer import NodeValue, node_data, write_node_data
from tflkit.report.terminal import render_check

EXIT_NOT_GPU_READY = 1


def check(
    model: ModelArgument,
    json_output: JsonOption = False,
    target: Annotated[
        str, typer.Option(help="GPU target: litert-gpu or tflite-gpu.")
    ] = DEFAULT_TARGET,
    probe: Annotated[
        bool, typer.Option("--probe", help="Also compile on the real GPU accelerator.")
    ] = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 unless every op runs on the GPU.")
    ] = False,
    max_partitions: Annotated[
        int | None,
        typer.Option(
            help="Partitions the delegate takes per subgraph (0: all). Default: the target's "
            "own (1, the largest, for both litert-gpu and tflite-gpu).",
        ),
    ] = None,
    model_explorer: Annotated[
        Path | None,
        typer.Option(help="Write per-op verdicts as Model Explorer node data (JSON) here."),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Probe timeout in seconds.")] = 120.0,
) -> None:
    """Per-op GPU verdicts with reasons and fixes, partitions, CPU<->GPU copies, FLOP share."""
    limit = TARGET_DEFAULT if max_partitions is None else (max_partitions or None)
    report, loaded = check_path(
        model, target=target, max_partitions=limit, with_probe=probe, probe_timeout=timeout
    )
    if model_explorer is not None:
        ops = {(op.subgraph, op.index): op for op in report.ops}
        values = {}
        for sg_index, subgraph in enumerate(loaded.subgraphs):
            for op in subgraph.ops:
                verdict = ops.get((sg_index, op.index))
                if verdict is None:
                    continue
                if verdict.on_gpu:
                    values[op] = NodeValue("GPU", bg_color="#c8e6c9")
                else:
                    codes = ",".join(r.code for r in verdict.reasons) or "partition"
                    values[op] = NodeValue(f"CPU: {codes}", bg_color="#ffcdd2")
        write_node_data(model_explorer, node_data(loaded, values))
    if json_output:
        print_json(report.to_json())
    else:
        render_check(report, console())
    if strict and not report.gpu_ready:
        raise typer.Exit(EXIT_NOT_GPU_READY)
