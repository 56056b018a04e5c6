"""Rich terminal renderers for report dataclasses."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from tflkit.report.check_report import CheckReport
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
    if not report.warnings:
        console.print("[green]no GPU warnings[/green]")
    for warning in report.warnings:
        items = ", ".join(warning.items[:6]) + (" ..." if len(warning.items) > 6 else "")
        detail = f": {items}" if items else ""
        console.print(f"[yellow]warning[/yellow] {warning.code}: {warning.message}{detail}")


def render_check(report: CheckReport, console: Console) -> None:
    """Summary line, GPU residency, the ops that stay on CPU with reasons and fixes, probe."""
    style = "green" if report.gpu_ready else ("red" if not report.compiles else "yellow")
    console.print(f"[bold]{report.path}[/bold]  target {report.target}: {report.target_title}")
    console.print(f"[bold {style}]{report.summary}[/bold {style}]")
    if report.total_ops and report.compiles:
        share = report.flops_gpu / report.flops_total if report.flops_total else 0.0
        limit = (
            "all supported partitions"
            if report.max_partitions is None
            else f"the largest {report.max_partitions} partition(s) only"
        )
        console.print(
            f"GPU: {report.gpu_ops}/{report.total_ops} ops in {report.gpu_partitions} "
            f"partition(s), {share:.1%} of FLOPs; the delegate takes {limit}"
        )
        console.print(
            f"CPU<->GPU copies per inference: {human_bytes(report.internal_transfer_bytes)} "
            f"between partitions, {human_bytes(report.io_transfer_bytes)} graph inputs/outputs"
        )
    for issue in report.issues:
        tag = "[red]fatal[/red]" if issue.fatal else "[yellow]note[/yellow]"
        console.print(f"{tag} {issue.code}: {issue.message}")
    offending = report.offending_ops
    if offending:
        table = Table(title="Ops on CPU", title_justify="left")
        for column in ("op", "type", "why", "fix"):
            table.add_column(column)
        for op in offending:
            where = f"{op.subgraph}:{op.index}" if op.subgraph else str(op.index)
            why = "; ".join(f"{r.code}: {r.message}" for r in op.reasons)
            if op.not_taken:
                why = "supported, but outside the partition the delegate takes"
            fix = f"rewrite rule {op.fix.rule}" if op.fix and op.fix.rule else ""
            table.add_row(where, f"{op.type} v{op.version}", why, fix)
        console.print(table)
    probe = report.probe
    if probe is None:
        return
    kind = "software GPU" if probe.software_gpu else "GPU"
    adapter = f"{kind} {probe.adapter}" if probe.adapter else "no adapter"
    line = f"probe ({adapter}): {probe.status}"
    if probe.ops_on_gpu is not None:
        line += f", {probe.ops_on_gpu} ops on GPU, {probe.ops_on_cpu} on CPU"
    if probe.compared:
        line += f"; agrees with the static verdict on {probe.agree}/{probe.compared} ops"
    console.print(line + (" (cached)" if probe.from_cache else ""))
    if probe.crash is not None:
        site = probe.crash
        where = f" at {site.op_type} (op {site.op_index})" if site.op_type else ""
        console.print(f"[red]crash[/red]{where}: {site.message}")
    elif probe.error:
        console.print(f"[red]error[/red] {probe.error}")
    for d in probe.disagreements:
        static_says = "GPU" if d.static_ok else "CPU"
        probe_says = {True: "GPU", False: "CPU", None: "?"}[d.probe_on_gpu]
        console.print(
            f"[yellow]disagreement[/yellow] op {d.subgraph}:{d.op_index} {d.op_type}: static "
            f"{static_says}, accelerator {probe_says} {'; '.join(d.probe_reasons)}"
        )
