"""The report of ``tflkit convert`` (and of the ``--gpu-ready`` pipeline built on it)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from tflkit.fsio import write_atomic
from tflkit.jsonable import dumps, plain_fields
from tflkit.report.rewrite_report import still_groups

#: Reasons for ops left on the CPU shown in the ``--gpu-ready`` summary (all in ``--json``).
_STILL_LINES = 8

__all__ = [
    "SCHEMA",
    "ConvertReport",
    "CpuOnlyOp",
    "PipelineStage",
    "converter_env_line",
    "converter_env_lines",
    "render_convert",
    "write_json",
]

SCHEMA = "tflkit.convert/1"

FLEX_WHY = (
    "a flex op is a TensorFlow kernel run by the Select TF ops (flex) delegate on the CPU; the GPU "
    "delegate only takes TFLite builtin ops, so it splits the graph and copies tensors between "
    "CPU and GPU, and the app must link the Select TF ops library"
)


@dataclass
class CpuOnlyOp:
    """An op of the converted model that will not run on the GPU, and why."""

    op: str
    count: int
    why: str


@dataclass
class PipelineStage:
    """One step of ``--gpu-ready``: its status, one line, and its full report as JSON."""

    name: str
    status: str
    summary: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class ConvertReport:
    """What was converted, how, with which tools, and what came out."""

    source: str
    kind: str
    source_sha256: str
    output: str
    output_sha256: str = ""
    sidecar: str | None = None
    reference_file: str | None = None
    #: the reference file written (.npz; the JSON key keeps its first name)
    #: what the reference file's inputs are (``InputSets.summary()``: source, seed, data)
    reference_inputs: dict[str, Any] | None = None
    converter: str = ""
    #: ONNX: the preparation pass's steps, one line each (shapes, pins, onnxsim, If, names)
    preparation: list[str] = field(default_factory=list)
    #: ONNX: each route tried in turn (``route``, ``error`` or None, ``seconds``)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    converter_env: dict[str, Any] | None = None
    versions: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    inputs: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    cpu_only_ops: list[CpuOnlyOp] = field(default_factory=list)
    cpu_vs_reference_max_abs: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    convert_seconds: float | None = None
    wall_seconds: float | None = None
    stages: list[PipelineStage] = field(default_factory=list)
    verdict: str = "converted"
    still_on_cpu: list[str] = field(default_factory=list)
    report_path: str | None = None

    @property
    def gpu_ready(self) -> bool:
        return self.verdict == "gpu-ready"

    def stage(self, name: str) -> PipelineStage:
        return next(s for s in self.stages if s.name == name)

    def to_json(self) -> dict[str, Any]:
        fields = plain_fields(self)
        # the reference file's key before 0.2 (the .npz), kept for scripts that read it
        return {"schema": SCHEMA, **fields, "reference_bundle": fields["reference_file"]}


def write_json(report: ConvertReport, path: str | os.PathLike[str]) -> Path:
    """Write the report as JSON atomically."""
    return write_atomic(path, dumps(report) + "\n")


def _shape(entry: dict[str, Any]) -> str:
    shape = "x".join(str(d) for d in entry.get("shape", []))
    src = entry.get("source_shape")
    shown = "x".join("?" if d is None else str(d) for d in src or [])
    # a dynamic dimension made static, or channels moved last (onnx2tf's NCHW -> NHWC)
    return f"{shape} (was {shown})" if src and shown != shape else shape


def _dtype(entry: dict[str, Any]) -> str:
    """The input's dtype as the .tflite takes it, with its quantization and the source's."""
    text = str(entry.get("dtype"))
    extra = []
    if entry.get("scale") is not None:
        extra.append(f"scale {entry['scale']:.3g}, zero point {entry.get('zero_point')}")
    if entry.get("source_dtype") and entry["source_dtype"] != entry.get("dtype"):
        extra.append(f"source {entry['source_dtype']}")
    return text + (f" ({'; '.join(extra)})" if extra else "")


def render_convert(report: ConvertReport, console: Console) -> None:
    """A few lines: what came out, where, what will not run on the GPU, then the pipeline."""
    console.print(f"[bold]{report.output}[/bold]  from {report.kind} {report.source}")
    console.print(
        f"  converter: {report.converter}; "
        + ", ".join(f"{k} {v}" for k, v in sorted(report.versions.items()))
    )
    for step in report.preparation:
        console.print(f"  prepared: {step}")
    for attempt in report.attempts:
        if attempt.get("error"):
            console.print(f"  [yellow]{attempt['route']} failed[/yellow]: {attempt['error']}")
    env = report.converter_env
    if env and env.get("name"):
        console.print(f"  converter environment: {env['name']} ({' '.join(env['packages'])})")
    opts = report.options
    weights = (
        "float16 weights"
        if opts.get("fp16")
        else {"dynamic": "int8 weights (dynamic range)", "int8": "full int8"}.get(
            str(opts.get("quantize")), "float32"
        )
    )
    console.print(f"  {weights}; builtin ops{' + flex' if opts.get('allow_flex') else ' only'}")
    for entry in report.inputs:
        console.print(f"  input {entry['name']}: {_dtype(entry)} {_shape(entry)}")
    for name, value in report.cpu_vs_reference_max_abs.items():
        console.print(f"  CPU vs source framework, output {name}: max abs {value:.3g}")
    for op in report.cpu_only_ops:
        console.print(f"  [yellow]CPU only: {op.op} x{op.count}[/yellow]: {op.why}")
    for note in report.notes:
        console.print(f"  note: {note}")
    if report.reference_file:
        kind = (report.reference_inputs or {}).get("source")
        console.print(
            f"  reference file: {report.reference_file}" + (f" (inputs: {kind})" if kind else "")
        )
    if report.sidecar:
        console.print(f"  provenance: {report.sidecar}")
    for stage in report.stages:
        color = {"ok": "green", "pass": "green", "skipped": "yellow"}.get(stage.status, "red")
        console.print(f"  [{color}]{stage.name}: {stage.status}[/{color}]  {stage.summary}")
    if report.stages:
        groups = still_groups(report.still_on_cpu)
        for line in groups[:_STILL_LINES]:
            console.print(f"  still on the CPU: {line}")
        if len(groups) > _STILL_LINES:
            console.print(f"  [dim]... {len(groups) - _STILL_LINES} more reasons: --json[/dim]")
        color = "green" if report.gpu_ready else "red"
        console.print(
            f"[bold {color}]{report.verdict}[/bold {color}]  report: {report.report_path}"
        )


# --- tflkit converters ---------------------------------------------------------------------------


def converter_env_line(env: Any) -> str:
    """One converter environment (:class:`tflkit.converters.envs.ConverterEnv`): route, path,
    packages, Python, size, build time."""
    record = env.record
    size = record.get("size_bytes", 0) / 1e6
    return (
        f"{env.route}: {env.path}  ({' '.join(record.get('packages', []))}; Python "
        f"{record.get('python')}; {size:.0f} MB; built in {record.get('install_seconds')} s)"
    )


def converter_env_lines(
    directory: Any, routes: Mapping[str, Sequence[Any]], current: Mapping[str, Any], envs: Any
) -> list[str]:
    """``tflkit converters list``: per route its environment (``current``) or what it needs
    (``routes``: the specs), then the environments built (``envs``) no route uses any more."""
    in_use = {env.path for env in current.values() if env is not None}
    lines = [f"converter environments in {directory}"]
    for route, specs in routes.items():
        env = current[route]
        if env is not None:
            lines.append("  " + converter_env_line(env))
        else:
            wanted = "; ".join(f"{' '.join(s.packages)} on Python {s.pythons}" for s in specs)
            lines.append(f"  {route}: not built yet ({wanted}); built on first use or by install")
    for env in (e for e in envs if e.path not in in_use):
        lines.append(f"  not used by this tflkit (older pins; safe to delete): {env.path}")
    return lines
