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


_Model = Annotated[
    Path,
    typer.Argument(
        help="Keras file (.keras/.h5), SavedModel dir, ONNX (.onnx) or PyTorch program (.pt2).",
    ),
]

_Output = Annotated[
    Path | None,
    typer.Option(
        "-o",
        "--output",
        help="The .tflite to write (default: MODEL.tflite).",
    ),
]

_GpuReady = Annotated[
    bool,
    typer.Option(
        "--gpu-ready",
        help="Then check, rewrite what the GPU rejects, validate CPU vs GPU vs source.",
    ),
]

_InputValue = Annotated[
    list[str],
    typer.Option(
        "--input-value",
        help="NAME=V[,V...]: pin an ONNX input to constants (a sample rate, a flag) so what "
        "depends on it folds (repeat).",
    ),
]

_Route = Annotated[
    str,
    typer.Option(
        "--route",
        help="ONNX converter: auto (onnx2tf, then onnx2torch + litert-torch if it fails), "
        "onnx2tf or onnx2torch.",
    ),
]

_Batch = Annotated[int, typer.Option("--batch", help="Batch for an unknown batch dimension.")]

_AllowFlex = Annotated[
    bool,
    typer.Option(
        "--allow-flex", help="Keep TensorFlow ops with no builtin as flex ops (CPU only)."
    ),
]

_Quantize = Annotated[
    str, typer.Option("--quantize", help="none, dynamic (int8 weights) or int8 (full integer).")
]

_Representative = Annotated[
    Path | None,
    typer.Option(
        "--representative",
        help=".npz of input arrays or an image folder (int8).",
    ),
]

_CalibrationSteps = Annotated[
    int, typer.Option("--calibration-steps", help="Samples used to calibrate int8.")
]

_ImageRange = Annotated[
    str, typer.Option("--image-range", help="LOW,HIGH pixel values of calibration images.")
]

_Signature = Annotated[str | None, typer.Option("--signature", help="SavedModel signature key.")]

_ConverterOption = Annotated[
    list[str],
    typer.Option(
        "--converter-option",
        help="NAME=VALUE: a TFLiteConverter flag (true/false) for Keras/SavedModel, an "
        "onnx2tf option (true/false, numbers, a,b lists, text) for ONNX (repeat).",
    ),
]

_ReferenceSets = Annotated[
    int, typer.Option("--reference-sets", help="Seeded input sets in the reference file (.npz).")
]

_Seed = Annotated[int, typer.Option("--seed", help="Seed of the reference inputs.")]

_Timeout = Annotated[
    float, typer.Option("--timeout", help="Seconds for the conversion and per runner.")
]

_Python = Annotated[
    Path | None,
    typer.Option(
        "--python",
        help="Interpreter of your own venv holding onnx2tf or litert-torch (default: the "
        "environment tflkit builds on first use; see 'tflkit converters').",
    ),
]

_UnsafeDeserialization = Annotated[
    bool,
    typer.Option(
        "--unsafe-deserialization",
        help="Let Keras load Lambda layers (runs their Python code: trusted files only).",
    ),
]


def convert(
    model: _Model,
    output: _Output = None,
    gpu_ready: _GpuReady = False,
    input_shape: InputShapeOption = None,
    input_value: _InputValue = [],  # noqa: B006
    route: _Route = "auto",
    batch: _Batch = 1,
    allow_flex: _AllowFlex = False,
    fp16: Annotated[bool, typer.Option("--fp16", help="Store weights as float16.")] = False,
    quantize: _Quantize = "none",
    representative: _Representative = None,
    calibration_steps: _CalibrationSteps = 100,
    image_range: _ImageRange = "0,1",
    int8_io: Annotated[
        bool, typer.Option("--int8-io", help="int8 inputs/outputs (default: float32 I/O).")
    ] = False,
    signature: _Signature = None,
    converter_option: _ConverterOption = [],  # noqa: B006
    reference_sets: _ReferenceSets = 3,
    seed: _Seed = 0,
    timeout: _Timeout = 900.0,
    python: _Python = None,
    unsafe_deserialization: _UnsafeDeserialization = False,
    json_output: JsonOption = False,
) -> None:
    """Convert a model to a GPU-ready .tflite with provenance and a reference file (.npz)."""
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

        def say(line: str) -> None:
            typer.echo(f"tflkit: {line}", err=True)

        report = convert_gpu_ready(
            model, target, options, timeout=min(timeout, 600.0), progress=say
        )
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
