"""Provenance: where a ``.tflite`` came from, recorded in its metadata and in a JSON sidecar.

The metadata entry ``tflkit_provenance`` and the sidecar ``NAME.provenance.json`` hold the same
JSON (format ``tflkit.provenance/1``): the source and its SHA-256, the tool versions, the options,
the static input shapes and the ops that will stay on the CPU.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from tflkit import ir
from tflkit.fsio import write_atomic
from tflkit.report.convert_report import FLEX_WHY, ConvertReport, CpuOnlyOp

__all__ = ["METADATA_NAME", "finalize", "output_paths", "read_provenance", "tool_version"]

METADATA_NAME = "tflkit_provenance"
FORMAT = "tflkit.provenance/1"


def tool_version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def output_paths(output: Path) -> tuple[Path, Path, Path]:
    """(model, sidecar, reference file) for ``output``."""
    stem = output.with_suffix("")
    return output, Path(f"{stem}.provenance.json"), Path(f"{stem}.reference.npz")


def read_provenance(model: ir.Model) -> dict[str, Any] | None:
    """The provenance JSON stored in a model's metadata, or None."""
    entry = model.metadata_entry(METADATA_NAME)
    if entry is None or entry.buffer.data is None:
        return None
    return json.loads(bytes(entry.buffer.data).decode())


def cpu_only_ops(model: ir.Model) -> list[CpuOnlyOp]:
    """Flex and custom ops: never on the GPU delegate."""
    counts = Counter(op.type for sg in model.subgraphs for op in sg.ops if op.is_custom)
    out = []
    for name, count in sorted(counts.items()):
        if name.startswith("Flex"):
            why = f"TensorFlow op {name[4:]} kept as a flex op: {FLEX_WHY}"
        else:
            why = "custom op: the GPU delegate only runs builtin ops (and the ones it registers)"
        out.append(CpuOnlyOp(name, count, why))
    return out


def finalize(
    data: bytes,
    report: ConvertReport,
    output: Path,
    *,
    reference_tmp: Path | None,
    extra_notes: list[str] | None = None,
) -> ConvertReport:
    """Stamp provenance into the model, write model, sidecar and reference file atomically; fill
    report."""
    model = ir.load(data)
    report.cpu_only_ops = cpu_only_ops(model)
    _, sidecar, reference = output_paths(output)
    record = {
        "format": FORMAT,
        "source": {"path": report.source, "kind": report.kind, "sha256": report.source_sha256},
        "converter": report.converter,
        "converter_env": report.converter_env,
        "versions": report.versions,
        "options": report.options,
        "inputs": report.inputs,
        "outputs": report.outputs,
        "cpu_only_ops": [op.op for op in report.cpu_only_ops],
        "reference_file": reference.name if reference_tmp is not None else None,
        # the key's name before 0.2, kept for readers of the first records
        "reference_bundle": reference.name if reference_tmp is not None else None,
        "reference_inputs": report.reference_inputs,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    model.set_metadata(METADATA_NAME, json.dumps(record, sort_keys=True).encode())
    final = ir.dumps(model)
    write_atomic(output, final)
    record["output_sha256"] = hashlib.sha256(final).hexdigest()
    write_atomic(sidecar, json.dumps(record, indent=2, sort_keys=True) + "\n")
    report.output_sha256 = record["output_sha256"]
    report.sidecar = str(sidecar)
    if reference_tmp is not None:
        os.replace(reference_tmp, reference)
        report.reference_file = str(reference)
    report.notes += extra_notes or []
    return report
