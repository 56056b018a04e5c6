"""``tflkit convert MODEL``: Keras, SavedModel, ONNX or PyTorch to a GPU-ready ``.tflite``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tflkit.cli.options import InputShapeOption, JsonOption, options_from
from tflkit.errors import UsageError


def _range(text: str) -> tuple[float, float]:
    low, _, high = text.partition(",")
    try:
        return float(low), float(high)
    except ValueError:
        raise UsageError(f"--image-range takes LOW,HIGH (e.g. -1,1), got {text!r}") from None


def convert(
    model: Annotated[
        Path,
        typer.Argument(
            help="Keras file (.keras/.h5), SavedModel dir, ONNX (.onnx) or PyTorch program (.pt2).",
        ),
    ],
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            help="The .tflite to write (default: MODEL.tflite).",
        ),
    ] = None,
    gpu_ready: Annotated[
        bool,
        typer.Option(
            "--gpu-ready",
            help="Then check, rewrite what the GPU rejects, validate CPU vs GPU vs source.",
        ),
    ] = False,
    input_shape: InputShapeOption = None,
    input_value: Annotated[
        list[str],
        typer.Option(
            "--input-value",
            help="NAME=V[,V...]: pin an ONNX input to constants (a sample rate, a flag) so what "
            "depends on it folds (repeat).",
        ),
    ] = [],  # noqa: B006
    route: Annotated[
        str,
        typer.Option(
            "--route",
            help="ONNX converter: auto (onnx2tf, then onnx2torch + litert-torch if it fails), "
            "onnx2tf or onnx2torch.",
        ),
    ] = "auto",
    batch: Annotated[
        int, typer.Option("--batch", help="Batch for an unknown batch dimension.")
    ] = 1,
    allow_flex: Annotated[
        bool,
        typer.Option(
            "--allow-flex", help="Keep TensorFlow ops with no builtin as flex ops (CPU only)."
        ),
    ] = False,
    fp16: Annotated[bool, typer.Option("--fp16", help="Store weights as float16.")] = False,
    quantize: Annotated[
        str, typer.Option("--quantize", help="none, dynamic (int8 weights) or int8 (full integer).")
    ] = "none",
    representative: Annotated[
        Path | None,
        typer.Option(
            "--representative",
            help=".npz of input arrays or an image folder (int8).",
        ),
    ] = None,
    calibration_steps: Annotated[
        int, typer.Option("--calibration-steps", help="Samples used to calibrate int8.")
    ] = 100,
    image_range: Annotated[
        str, typer.Option("--image-range", help="LOW,HIGH pixel values of calibration images.")
    ] = "0,1",
    int8_io: Annotated[
        bool, typer.Option("--int8-io", help="int8 inputs/outputs (default: float32 I/O).")
    ] = False,
    signature: Annotated[
        str | None, typer.Option("--signature", help="SavedModel signature key.")
    ] = None,
    converter_option: Annotated[
        list[str],
        typer.Option(
            "--converter-option",
            help="NAME=VALUE: a TFLiteConverter flag (true/false) for Keras/SavedModel, an "
            "onnx2tf option (true/false, numbers, a,b lists, text) for ONNX (repeat).",
        ),
    ] = [],  # noqa: B006
    reference_sets: Annotated[
        int, typer.Option("--reference-sets", help="Seeded input sets in the reference bundle.")
    ] = 3,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the reference inputs.")] = 0,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds for the conversion and per runner.")
    ] = 900.0,
    python: Annotated[
        Path | None,
        typer.Option(
            "--python",
            help="Interpreter of your own venv holding onnx2tf or litert-torch (default: the "
            "environment tflkit builds on first use; see 'tflkit converters').",
        ),
    ] = None,
    unsafe_deserialization: Annotated[
        bool,
        typer.Option(
            "--unsafe-deserialization",
            help="Let Keras load Lambda layers (runs their Python code: trusted files only).",
        ),
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Convert a model to a GPU-ready .tflite with provenance and a reference bundle."""
    from tflkit.cli.output import console, print_json
    from tflkit.converters.base import (
        ConvertOptions,
        parse_converter_options,
        parse_input_values,
    )

    options = options_from(
        ConvertOptions,
        locals(),
        command=convert,
        elsewhere=(
            "model",
            "output",
            "gpu_ready",
            "input_value",
            "converter_option",
            "json_output",
        ),
        input_values=parse_input_values(input_value),
        image_range=_range(image_range),
        converter_options=parse_converter_options(converter_option),
    )
    if unsafe_deserialization:
        typer.echo(
            f"tflkit: warning: --unsafe-deserialization runs the Python code stored in {model}; "
            "use it only on files you trust",
            err=True,
        )
    target = output or model.with_suffix(".tflite")
    if gpu_ready:
        from tflkit.converters.pipeline import convert_gpu_ready

        report = convert_gpu_ready(model, target, options, timeout=min(timeout, 600.0))
    else:
        from tflkit.converters.api import convert as run_convert

        report = run_convert(model, target, options)
    if json_output:
        print_json(report.to_json())
    else:
        from tflkit.report.convert_report import render_convert

        render_convert(report, console())
    if gpu_ready and not report.gpu_ready:
        raise typer.Exit(1)
