"""``convert``: any supported source to a GPU-ready ``.tflite``, with provenance and a reference.

The source kind comes from the path: a Keras file (``.keras``, ``.h5``, ``.hdf5``), a SavedModel
directory, an ONNX file (``.onnx``) or an exported PyTorch program (``.pt2``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from tflkit.errors import UsageError
from tflkit.report.convert_report import ConvertReport

from .base import ConvertOptions, hash_source
from .provenance import finalize, tool_version

__all__ = ["KINDS", "convert", "detect_kind"]

KINDS = ("keras", "saved_model", "onnx", "torch")
_SUFFIXES = {".keras": "keras", ".h5": "keras", ".hdf5": "keras", ".onnx": "onnx", ".pt2": "torch"}


def detect_kind(source: Path) -> str:
    """The converter for ``source``; UsageError when none fits."""
    if source.is_dir():
        if (source / "saved_model.pb").is_file() or (source / "saved_model.pbtxt").is_file():
            return "saved_model"
        raise UsageError(f"{source} is a directory without saved_model.pb: not a SavedModel")
    if not source.exists():
        raise UsageError(f"{source} does not exist")
    kind = _SUFFIXES.get(source.suffix.lower())
    if kind is None:
        raise UsageError(
            f"{source}: unknown model format {source.suffix!r}; expected a Keras file (.keras, "
            ".h5), a SavedModel directory, an ONNX file (.onnx) or a PyTorch program (.pt2)"
        )
    return kind


def _check_output(source: Path, output: Path) -> None:
    if output.suffix != ".tflite":
        raise UsageError(f"the output must end in .tflite, got {output}")
    if output.exists() and os.path.samefile(source, output):
        raise UsageError(f"refusing to overwrite the input {source}")
    if source.is_dir() and output.resolve().is_relative_to(source.resolve()):
        raise UsageError(f"refusing to write into the SavedModel directory {source}")


def convert(
    source: str | os.PathLike[str],
    output: str | os.PathLike[str],
    options: ConvertOptions | None = None,
    *,
    label: str | None = None,
) -> ConvertReport:
    """Convert ``source`` into ``output`` (plus ``.provenance.json`` and ``.reference.npz``)."""
    options = (options or ConvertOptions()).resolved()
    options.validate()
    given_src, given_out = Path(source), Path(output)
    kind = detect_kind(given_src)
    _check_output(given_src, given_out)
    # Workers run in scratch directories: from here on every path is absolute.
    src, out = given_src.resolve(), Path(os.path.abspath(given_out))
    start = time.perf_counter()
    report = ConvertReport(
        source=label or str(given_src),
        kind=kind,
        source_sha256=hash_source(src),
        output=str(given_out),
        options=options.to_json(),
    )
    report.versions = {"tflkit": tool_version("tflkit") or "unknown"}
    if options.unsafe_deserialization and kind == "keras":
        report.notes.append(
            "loaded with --unsafe-deserialization: Keras ran the Python code of Lambda layers"
        )
    if kind in ("keras", "saved_model"):
        from ._runner import scratch_dir
        from .base import check_tf_converter_options
        from .tf_common import convert_with_tensorflow

        check_tf_converter_options(options.converter_options)

        with scratch_dir(out) as tmp:
            work = Path(tmp).resolve()
            state = convert_with_tensorflow(kind, src, options, work)
            _fill_from_state(report, state, converter="tf.lite.TFLiteConverter (MLIR)")
            reference = work / "reference.npz"
            finalize(
                (work / "model.tflite").read_bytes(),
                report,
                out,
                reference_tmp=reference if reference.is_file() else None,
                extra_notes=state.get("notes", []),
            )
    else:
        from .foreign import ONNX, TORCH, convert_foreign

        convert_foreign(ONNX if kind == "onnx" else TORCH, src, out, options, report)
    report.wall_seconds = time.perf_counter() - start
    return report


def _fill_from_state(report: ConvertReport, state: dict[str, Any], *, converter: str) -> None:
    report.converter = converter
    for key in ("tensorflow", "keras", "framework"):
        if state.get(key):
            report.versions[key] = str(state[key])
    litert = tool_version("ai-edge-litert")
    if litert:
        report.versions["ai-edge-litert"] = litert
    report.inputs = state.get("inputs", [])
    report.reference_inputs = state.get("reference_inputs")
    report.outputs = state.get("output_names", [])
    report.cpu_vs_reference_max_abs = state.get("cpu_vs_reference_max_abs", {})
    report.convert_seconds = state.get("convert_seconds")
