"""The ``check`` report on a terminal: a short grouped summary (at most 40 lines) or every op.

The default view groups the ops left on the CPU by (subgraph, op type, reason) with counts and
op index ranges, shows what fixes each group, and fills the line budget by priority: summary,
graph-level issues, the probe, then as many groups as fit (the largest first within each
subgraph). ``all_ops=True`` lists every op instead; ``--json`` always has everything.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich import box
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from tflkit.report.check_report import CheckReport, OpGroup, group_cpu_ops, index_ranges
from tflkit.report.probe_report import Disagreement
from tflkit.report.terminal import human_bytes

#: The default report never prints more lines than this.
MAX_LINES = 40
_MAX_ISSUE_KINDS = 4
_MAX_DISAGREEMENT_LINES = 6


def _height(renderable: RenderableType, width: int) -> int:
    """Lines ``renderable`` takes at ``width`` columns."""
    buffer = io.StringIO()
    Console(file=buffer, width=width, highlight=False, color_system=None).print(renderable)
    return buffer.getvalue().count("\n")


def _bytes(count: int | None) -> str:
    return "unknown until --input-shape" if count is None else human_bytes(count)


def _header(report: CheckReport) -> list[RenderableType]:
    style = "green" if report.gpu_ready else ("red" if not report.compiles else "yellow")
    lines: list[RenderableType] = [
        f"[bold]{report.path}[/bold]  target {report.target}",
        f"[bold {style}]{report.summary}[/bold {style}]",
    ]
    if report.input_shapes:
        given = " ".join(
            f"{name}={','.join(map(str, dims))}" for name, dims in report.input_shapes.items()
        )
        lines.append(f"checked at --input-shape {given}")
    if report.total_ops and report.compiles:
        share = report.flops_gpu / report.flops_total if report.flops_total else 0.0
        limit = (
            "all supported partitions"
            if report.max_partitions is None
            else f"the largest {report.max_partitions} partition(s) per graph"
        )
        lines.append(
            f"GPU: {report.gpu_ops}/{report.total_ops} ops in {report.gpu_partitions} "
            f"partition(s), {share:.1%} of FLOPs; the delegate takes {limit}"
        )
        lines.append(
            f"CPU<->GPU copies per inference: {_bytes(report.internal_transfer_bytes)} between "
            f"partitions, {_bytes(report.io_transfer_bytes)} graph inputs/outputs"
        )
    return lines


def _issues(report: CheckReport) -> list[RenderableType]:
    """One line per kind of issue (fatal first); repeated kinds say how many more."""
    kinds: dict[tuple[str, bool], list[int]] = {}
    for i, issue in enumerate(report.issues):
        kinds.setdefault((issue.code, issue.fatal), []).append(i)
    ordered = sorted(kinds.items(), key=lambda item: not item[0][1])
    lines: list[RenderableType] = []
    for (code, fatal), members in ordered[:_MAX_ISSUE_KINDS]:
        issue = report.issues[members[0]]
        tag = "[red]fatal[/red]" if fatal else "[yellow]note[/yellow]"
        where = ""
        if issue.op_index is not None:
            where = f" (subgraph {issue.subgraph}, op {issue.op_index})"
        more = f" [dim](+{len(members) - 1} more like it)[/dim]" if len(members) > 1 else ""
        text = Text.from_markup(f"{tag} {code}{where}: ")
        text.append(issue.message)
        text.append_text(Text.from_markup(more))
        lines.append(text)
        if issue.fix is not None:
            lines.append(Text(f"  fix: {issue.fix.text}"))
    if len(ordered) > _MAX_ISSUE_KINDS:
        lines.append(f"[dim]{len(ordered) - _MAX_ISSUE_KINDS} more kinds of issue: --json[/dim]")
    return lines


def _subgraph_label(report: CheckReport, index: int) -> str:
    info = next((s for s in report.subgraphs if s.index == index), None)
    if info is None:
        return str(index)
    name = info.name if len(info.name) <= 24 else info.name[:21] + "..."
    role = "" if info.role == "main" else f" ({info.role})"
    return f"{index} {name}{role}".strip()


def _fix_text(group: OpGroup) -> str:
    if group.fix is None:
        return "no fix known" if group.status == "rejected" else "-"
    return group.fix.text


def _groups_table(report: CheckReport, groups: Sequence[OpGroup], width: int) -> Table:
    """One row per group; column widths fixed here so that every cell wraps (never crops)."""
    rows = []
    last = None
    for group in groups:
        label = _subgraph_label(report, group.subgraph) if group.subgraph != last else ""
        last = group.subgraph
        why = f"e.g. op {group.indices[0]}: {group.why}" if group.varies else group.why
        rows.append(
            (label, f"{group.count}: {index_ranges(group.indices)}", group.type_label, why,
             _fix_text(group))
        )  # fmt: skip
    headers = ("subgraph", "ops", "type", "why", "fix")
    caps = (20, 18, 22, None, 32)
    widths = [
        min(cap, 1 + max(len(h), *(len(r[i]) for r in rows))) if cap else 0
        for i, (h, cap) in enumerate(zip(headers, caps, strict=True))
    ]
    widths[3] = max(20, width - sum(widths) - 2 * len(headers))  # cells pad 1 each side
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for header, size in zip(headers, widths, strict=True):
        table.add_column(header, width=size, overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def _probe_lines(report: CheckReport) -> list[RenderableType]:
    probe = report.probe
    if probe is None:
        return []
    kind = "software GPU" if probe.software_gpu else "GPU"
    adapter = f"{kind} {probe.adapter}" if probe.adapter else "no adapter"
    line = f"probe ({adapter}): {probe.status}"
    if probe.ops_on_gpu is not None and probe.ops_on_cpu is not None:
        line += f", {probe.ops_on_gpu} ops on GPU, {probe.ops_on_cpu} on CPU (main graph)"
    elif probe.ops_on_gpu is not None:
        line += f", {probe.ops_on_gpu} ops on GPU (main graph)"
    if probe.compared:
        line += f"; agrees with the static verdict on {probe.agree}/{probe.compared} ops"
    lines: list[RenderableType] = [Text(line + (" (cached)" if probe.from_cache else ""))]
    if probe.model_agrees is False:
        claim = "compiles" if report.compiles else "fails to compile as a whole"
        real = "compiled it" if probe.compiled else "failed to compile it"
        lines.append(
            Text.from_markup(
                f"[yellow]disagreement[/yellow] the checker says the model {claim}; "
                f"the accelerator {real}"
            )
        )
    for note in probe.notes[:3]:
        lines.append(Text.from_markup("[dim]note[/dim] ").append(note))
    for warning in probe.warnings[:3]:
        lines.append(Text.from_markup("[yellow]wrong-result signal[/yellow] ").append(warning))
    if probe.crash is not None:
        site = probe.crash
        where = f" at {site.op_type} (op {site.op_index})" if site.op_type else ""
        message = site.message or "the accelerator printed no message"
        lines.append(Text.from_markup(f"[red]crash[/red]{where}: ").append(message))
    elif probe.error:
        lines.append(Text.from_markup("[red]error[/red] ").append(probe.error))
    for one in probe.signatures:
        lines.append(Text("signature ").append(one.line()))
    groups: dict[tuple[int, str, bool, bool | None], list[Disagreement]] = {}
    for d in probe.disagreements:
        groups.setdefault((d.subgraph, d.op_type, d.static_ok, d.probe_on_gpu), []).append(d)
    shown = list(groups.items())[:_MAX_DISAGREEMENT_LINES]
    for (subgraph, op_type, static_ok, on_gpu), members in shown:
        says = {True: "GPU", False: "CPU", None: "?"}
        ops = index_ranges([d.op_index for d in members])
        reason = "; ".join(members[0].probe_reasons[:1])
        text = Text.from_markup(
            f"[yellow]disagreement[/yellow] {op_type} x{len(members)} (subgraph {subgraph}, "
            f"ops {ops}): static {says[static_ok]}, accelerator {says[on_gpu]}"
        )
        if reason:
            text.append(f": {reason}")
        lines.append(text)
    if len(groups) > len(shown):
        lines.append(f"[dim]{len(groups) - len(shown)} more disagreement groups: --json[/dim]")
    return lines


def _browser_lines(report: CheckReport) -> list[RenderableType]:
    browser = report.browser
    if browser is None:
        return []
    adapter = browser.webgpu_adapter or browser.adapter
    line = f"LiteRT.js in the browser ({adapter}): {browser.status}"
    if browser.status != "ok":
        return [Text(line + (f": {browser.error}" if browser.error else ""))]
    if browser.fully_accelerated:
        line += ", every op on WebGPU"
    elif browser.ops_delegated is not None and browser.ops_total is not None:
        line += f", {browser.ops_delegated} of {browser.ops_total} ops on WebGPU"
    lines: list[RenderableType] = [Text(line)]
    for f in browser.cpu_fallback[:_MAX_DISAGREEMENT_LINES]:
        lines.append(Text(f"  on its CPU path: {f['op']}: {f['reason']}"))
    for difference in browser.differences:
        lines.append(Text.from_markup("[yellow]differs[/yellow] ").append(difference))
    return lines


def render_check(report: CheckReport, console: Console, *, all_ops: bool = False) -> None:
    """Print ``report``: the grouped summary within ``MAX_LINES`` lines, or every op."""
    width = console.width
    head = _header(report) + _issues(report)
    tail = _probe_lines(report) + _browser_lines(report)
    if all_ops:
        for line in head:
            console.print(line)
        console.print(_all_ops_table(report))
        for line in tail:
            console.print(line)
        return
    used = sum(_height(line, width) for line in [*head, *tail])
    if used > MAX_LINES - 8:  # keep room for the groups: one line per issue and probe finding
        head = [_one_line(x, width) for x in head]
        tail = [_one_line(x, width) for x in tail]
        used = sum(_height(line, width) for line in [*head, *tail])
    groups = group_cpu_ops(report)
    footer = "[dim]--all lists every op; --json has every op and field[/dim]"
    budget = MAX_LINES - used - (_height(footer, width) if groups else 0)
    table, shown = None, 0
    # The most groups whose table (header: 2 lines, a row: 1 line or more) fits, plus a line
    # naming what was left out.
    for count in range(min(len(groups), max(budget - 2, 0)), 0, -1):
        note = 1 if count < len(groups) else 0
        candidate = _groups_table(report, groups[:count], width)
        if _height(candidate, width) + note <= budget:
            table, shown = candidate, count
            break
    for line in head:
        console.print(line)
    if table is not None:
        console.print(table)
    hidden = groups[shown:]
    if hidden:
        ops = sum(g.count for g in hidden)
        console.print(f"[dim]{len(hidden)} more group(s), {ops} op(s) on the CPU not shown[/dim]")
    for line in tail:
        console.print(line)
    if groups:
        console.print(footer)


def _one_line(line: RenderableType, width: int) -> RenderableType:
    """``line`` cut to ``width`` columns with an ellipsis (--json keeps the whole text)."""
    text = Text.from_markup(line) if isinstance(line, str) else line
    if isinstance(text, Text):
        text.truncate(width, overflow="ellipsis")
    return text


def _all_ops_table(report: CheckReport) -> Table:
    table = Table(title="Every op", title_justify="left", box=box.SIMPLE_HEAD)
    probed = report.probe is not None
    for column in ("op", "type", "where", "why", "fix", *(("accelerator",) if probed else ())):
        table.add_column(column, overflow="fold")
    for op in report.ops:
        where = "GPU" if op.on_gpu else "CPU"
        fix = op.fix.text if op.fix is not None else ("" if op.on_gpu else "-")
        row = [f"{op.subgraph}:{op.index}", f"{op.type} v{op.version}", where, op.why, fix]
        if probed:
            row.append({True: "GPU", False: "CPU", None: "?"}[op.probe_on_gpu])
        table.add_row(*row)
    return table
