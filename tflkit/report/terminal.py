"""Rich terminal renderers for report dataclasses."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from tflkit.report.inspect_report import InspectReport, TensorInfo


def human_bytes(count: int) -> str:
    """1536 -> '1.5 KiB'."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def _shape(info: TensorInfo) -> str:
    return "[" + ", ".join(str(d) for d in info.shape) + "]"


def _quant(info: TensorInfo) -> str:
    q = info.quantization
    if q is None:
        return ""
    if q.channels:
        return f"per-channel x{q.channels} (axis {q.axis})"
    return f"scale={q.scale:.6g} zp={q.zero_point}"


def render_inspect(report: InspectReport, console: Console) -> None:
    """Print ``report`` as a few compact tables."""
    size = f", {human_bytes(report.size_bytes)}" if report.size_bytes is not None else ""
    console.print(f"[bold]{report.path or 'model'}[/bold]{size}")
    console.print(
        f"schema v{report.schema_version}, {len(report.subgraphs)} subgraph(s), "
        f"{report.op_count} ops, min runtime {report.min_runtime_version or 'unknown'}"
    )
    if report.metadata:
        console.print(f"metadata: {', '.join(report.metadata)}")

    io = Table(title="Signatures", title_justify="left")
    for column in ("signature", "kind", "name", "shape", "dtype", "quantization"):
        io.add_column(column)
    for signature in report.signatures:
        key = signature.key if signature.key is not None else "(no signature)"
        for kind, tensors in (("input", signature.inputs), ("output", signature.outputs)):
            for info in tensors:
                io.add_row(key, kind, info.name, _shape(info), info.dtype, _quant(info))
    console.print(io)

    ops = Table(title="Ops", title_justify="left")
    ops.add_column("op")
    ops.add_column("count", justify="right")
    ops.add_column("versions")
    for name, count in report.op_histogram.items():
        versions = ", ".join(str(v) for v in report.op_versions.get(name, []))
        ops.add_row(name, str(count), versions)
    console.print(ops)

    if report.weights_bytes_by_dtype:
        weights = ", ".join(
            f"{dtype} {human_bytes(n)}" for dtype, n in report.weights_bytes_by_dtype.items()
        )
        console.print(f"weights: {weights}")
    if report.subgraphs and len(report.subgraphs) > 1:
        names = ", ".join(f"{s.index}:{s.name or '-'} ({s.ops} ops)" for s in report.subgraphs)
        console.print(f"subgraphs: {names}")
    for where, names_ in report.composites.items():
        from tflkit.ir.composites import describe

        listed = "; ".join(f"{describe(n)} x{c}" for n, c in names_.items())
        console.print(f"composites in {where}: {listed}", highlight=False)
    if not report.warnings:
        console.print("[green]no GPU warnings[/green]")
    for warning in report.warnings:
        items = ", ".join(warning.items[:6]) + (" ..." if len(warning.items) > 6 else "")
        detail = f": {items}" if items else ""
        console.print(f"[yellow]warning[/yellow] {warning.code}: {warning.message}{detail}")
