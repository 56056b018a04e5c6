"""The ``validate`` report: dataclasses, the JSON document (schema ``tflkit.validate/1``), and the
terminal summary."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tflkit.compare.comparator import PairComparison
from tflkit.compare.divergence import Localization
from tflkit.delegates.base import RunnerPair, RunResult, parse_pair, runner_spec
from tflkit.jsonable import plain
from tflkit.report.speed_report import render_speed, speed_json

__all__ = ["SCHEMA", "ValidateReport", "render_terminal"]

SCHEMA = "tflkit.validate/1"


@dataclass
class ValidateReport:
    """Everything ``validate`` found.

    ``verdict``: "pass" (every pair compared, every compared output within tolerance), "fail"
    (a runner failed or an output is out of tolerance), "incomplete" (a pair compared nothing,
    e.g. every output unreadable on one side) or "inconclusive" (every output is constant or ~0
    on these inputs: nothing told right from wrong). Anything but "pass" exits with code 1.
    ``sensitivity``: per precision class, per output, the model's own noise the verdicts are
    scaled by (:class:`tflkit.compare.sensitivity.OutputNoise` as JSON).
    """

    model: str
    model_sha256: str
    signature: str | None
    inputs: dict[str, Any]
    outputs: list[dict[str, Any]]
    runners: list[RunResult]
    pairs: list[PairComparison]
    verdict: str = "pass"
    findings: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)
    localization: Localization | None = None
    reference_file: str | None = None
    wall_seconds: float = 0.0
    sensitivity: dict[str, dict[str, Any]] = field(default_factory=dict)
    not_meaningful: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the kind of subject (:mod:`tflkit.validation.pipeline`)
    kind: ClassVar[str] = "tflite"

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    @property
    def exit_code(self) -> int:
        """0 on "pass", 1 on anything else."""
        return 0 if self.passed else 1

    def runner(self, name: str) -> RunResult:
        return next(r for r in self.runners if r.runner == name)

    def pair(self, key: str | RunnerPair) -> PairComparison:
        """The comparison of the pair ``key`` (``"actual:expected"`` is read once, here)."""
        want = parse_pair(key)
        return next(p for p in self.pairs if p.pair == want)

    def to_json(self) -> dict[str, Any]:
        return plain(
            {
                "schema": SCHEMA,
                "model": self.model,
                "model_sha256": self.model_sha256,
                "signature": self.signature,
                "verdict": self.verdict,
                "findings": self.findings,
                "unverified": self.unverified,
                "not_meaningful": self.not_meaningful,
                "notes": self.notes,
                "sensitivity": self.sensitivity,
                "inputs": self.inputs,
                "outputs": self.outputs,
                "runners": self.runners,
                "speed": speed_json(self.runners),
                "comparisons": self.pairs,
                "localization": self.localization,
                "reference_file": self.reference_file,
                # the name before 0.2 (the .npz reference file), kept for scripts that read it
                "reference_bundle": self.reference_file,
                "wall_seconds": self.wall_seconds,
            }
        )


def fmt(value: float | None, digits: int = 3) -> str:
    """A compact number for tables: 3 significant digits, inf/nan spelled out, '-' for None."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.{digits}g}"


def _runner_line(r: RunResult) -> str:
    ex = r.executed
    where = ex.get("device", "")
    if ex.get("kernels"):
        where += f" {ex['kernels']}"
    if ex.get("precision"):
        where += f" {ex['precision']}"
    adapter = ex.get("adapter")
    if adapter:
        where += f", {adapter['name']}" + (" (software GPU)" if adapter.get("software") else "")
    repeats = ex.get("repeats")
    if repeats and repeats.get("runs"):  # the browser's runners run each input set repeatedly
        runs = min(repeats["runs"])
        stable = "stable" if repeats.get("stable") else "[red]DRIFT[/red]"
        where += f", {runs}+ runs per input set: {stable}"
    if ex.get("io_path") == "bindings":
        where += ", I/O through the Wasm bindings"
    if ex.get("runtime") and not where.strip():
        where = str(ex["runtime"])
    return where.strip()


def render_terminal(report: ValidateReport, console: Console) -> None:
    """Runners, then one table per comparison, then the localization, then the verdict."""
    console.print(
        f"[bold]{report.model}[/bold]  inputs: {report.inputs.get('count')} sets "
        f"({report.inputs.get('source')})"
    )
    for note in report.inputs.get("notes", []):
        console.print(f"  {escape(note)}")
    runners = Table(title="runners", show_edge=False)
    for col in ("runner", "status", "executed"):
        runners.add_column(col)
    for r in report.runners:
        status = r.status if r.ok else f"[red]{r.status}[/red]"
        runners.add_row(r.runner, status, _runner_line(r))
    console.print(runners)
    render_speed(report.runners, console)
    for r in report.runners:
        for note in r.notes:
            console.print(f"  {r.runner}: {escape(note)}")
        if r.error and not r.ok and not any(r.error in note for note in r.notes):
            console.print(f"  {r.runner}: [red]{escape(r.error)}[/red]")
    for pair in report.pairs:
        if pair.verdict == "skipped":
            console.print(f"[yellow]{pair.key}: skipped[/yellow] ({escape(pair.reason or '')})")
            continue
        table = Table(title=f"{pair.actual} vs {pair.expected}: {pair.verdict}", show_edge=False)
        for col in ("output", "kind", "verdict", "max abs", "bound", "rmse", "cosine", "argmax"):
            table.add_column(col)
        for o in pair.outputs:
            m = o.metrics
            verdict = {"pass": "[green]pass[/green]", "fail": "[red]fail[/red]"}.get(
                o.verdict, f"[yellow]{o.verdict}[/yellow]"
            )
            if m is None:
                table.add_row(o.name, o.kind, verdict, *["-"] * 5)
                continue
            max_abs, bound = fmt(m.max_abs), fmt(o.bound)
            if o.steps is not None and o.bound_steps is not None:
                max_abs += f" ({fmt(o.steps)} steps)"
                bound += f" ({fmt(o.bound_steps)} steps)"
            kind = o.kind + (f", {len(o.groups)} groups" if o.groups else "")
            table.add_row(
                o.name,
                kind,
                verdict,
                max_abs,
                bound,
                fmt(m.rmse),
                fmt(m.cosine, 6),
                fmt(o.class_agreement),
            )
        console.print(table)
        for o in pair.outputs:
            for reason in o.reasons:
                console.print(f"  {o.name}: {escape(reason)}")
    if report.localization is not None:
        render_localization(report.localization, console)
    for finding in report.findings:
        console.print(f"[red]finding:[/red] {escape(finding)}")
    for item in report.unverified:
        console.print(f"[yellow]unverified:[/yellow] {escape(item)}")
    for item in report.not_meaningful:
        console.print(f"[yellow]not meaningful:[/yellow] {escape(item)}")
    for note in report.notes:
        console.print(f"note: {escape(note)}")
    colour = "green" if report.passed else "red"
    why = next((f for f in report.findings if f.startswith(f"{report.verdict}: ")), None)
    shown = why or report.verdict  # an inconclusive verdict says why on its own line too
    console.print(f"[bold {colour}]verdict: {shown}[/bold {colour}]")


def render_localization(loc: Localization, console: Console) -> None:
    """Ranked culprits, the first divergent op and the fp16 hazards of a localization."""
    kernels = runner_spec(loc.against)
    against = "CPU reference kernels" if kernels and kernels.kernels == "reference" else loc.against
    console.print(
        f"[bold]localization[/bold] ({loc.runner} vs {against}, "
        f"{len(loc.ops)} ops, threshold {fmt(loc.threshold)} of the op's peak, "
        f"{loc.seconds:.1f} s)"
    )
    if loc.unavailable:
        console.print(f"[yellow]localization cannot run:[/yellow] {loc.unavailable}")
        return
    table = Table(title="culprits (isolated error, ranked)", show_edge=False)
    for col in ("rank", "op", "type", "status", "isolated", "accumulated", "hazards"):
        table.add_column(col)
    for rank, op in enumerate(loc.culprits, 1):
        iso = op.isolated.score if op.isolated else None
        acc = op.accumulated.score if op.accumulated else None
        table.add_row(
            str(rank),
            f"#{op.op_index}",
            op.op_type,
            op.status,
            fmt(iso),
            fmt(acc),
            "; ".join(op.hazards) or "-",
        )
    if loc.culprits:
        console.print(table)
    else:
        console.print("no op exceeds the threshold in isolation")
    first = loc.first_divergent
    if first is not None:
        console.print(
            f"first divergent op: #{first.op_index} {first.op_type} "
            f"({first.outputs[0] if first.outputs else ''})"
        )
    hazards = [op for op in loc.ops if op.overflow]
    for op in hazards:
        console.print(f"[red]fp16 hazard[/red] #{op.op_index} {op.op_type}: {op.hazards[0]}")
    for note in loc.notes:
        console.print(f"  note: {note}")


def write_model_explorer(report: ValidateReport, path: Any) -> Any:
    """Model Explorer node data: each op's isolated GPU error score (max_abs / peak)."""
    from tflkit import ir
    from tflkit.report.model_explorer import NodeValue, node_data, write_node_data

    loc = report.localization
    if loc is None:
        raise ValueError("the report has no localization (run validate with --localize)")
    model = ir.load(report.model)
    values = {}
    for op in loc.ops:
        if op.isolated is None:
            continue
        score = op.isolated.score
        colour = "#d62728" if score > loc.threshold else "#2ca02c"
        values[model.main.ops[op.op_index]] = NodeValue(score, bg_color=colour)
    return write_node_data(path, node_data(model, values))
