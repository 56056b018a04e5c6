"""The report of ``tflkit rewrite``: what fired where, histograms, GPU residency, verification."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from rich.console import Console
from rich.table import Table

from tflkit.gpu.probe import ProbeResult
from tflkit.gpu.probe_result import COMPILED_STATUSES
from tflkit.jsonable import plain
from tflkit.report.check_report import CheckReport

REWRITE_SCHEMA = "tflkit.rewrite/1"
#: Per-op lines (rules not fired, ops still on the CPU) the terminal shows before "N more".
_MAX_LINES = 10


@dataclass
class Residency:
    """GPU residency of one model as the real accelerator reported it (``--probe``)."""

    status: str
    ops_on_gpu: int | None
    ops_on_cpu: int | None
    partitions: int
    fully_accelerated: bool
    rejections: list[str]
    crash: str | None

    @classmethod
    def from_probe(cls, result: ProbeResult, num_ops: int) -> Residency:
        log = result.log
        rejected = bool(log.rejections) or bool(log.ops_on_cpu)
        on_gpu = (
            log.ops_on_gpu
            if log.ops_on_gpu is not None
            else (num_ops if result.compiled and not rejected else None)
        )
        return cls(
            status=result.status,
            ops_on_gpu=on_gpu,
            ops_on_cpu=log.ops_on_cpu
            if log.ops_on_cpu is not None
            else (0 if on_gpu is not None else None),
            partitions=log.gpu_kernels,
            fully_accelerated=result.compiled and not rejected and result.status == "ok",
            rejections=[
                f"{r.op_type}: {r.reason}" + (f" ({r.detail})" if r.detail else "")
                for r in log.rejections
            ],
            crash=log.fatal if result.crashed else None,
        )


@dataclass
class StaticResidency:
    """GPU residency of one model by the static checker (the target's constraint table)."""

    summary: str
    gpu_ops: int
    total_ops: int
    gpu_partitions: int
    still_on_cpu: list[str]

    @classmethod
    def from_check(cls, report: CheckReport) -> StaticResidency:
        return cls(
            summary=report.summary,
            gpu_ops=report.gpu_ops,
            total_ops=report.total_ops,
            gpu_partitions=report.gpu_partitions,
            still_on_cpu=[
                f"{op.type} #{op.subgraph}:{op.index}: "
                + ("; ".join(f"{r.code}: {r.message}" for r in op.reasons) or op.why)
                for op in report.offending_ops
            ],
        )


@dataclass
class RewriteReport:
    model: str
    output: str
    written: bool
    rules: list[str]
    gated_by_checker: bool
    fired: list[dict[str, Any]]
    not_fired: list[dict[str, Any]]
    converged: bool
    contract: str
    verification: dict[str, Any] | None
    histogram_before: dict[str, int]
    histogram_after: dict[str, int]
    shape_fixes: list[str]
    #: Inputs still dynamic in the result, by the names users see.
    dynamic_inputs: list[str]
    static_before: StaticResidency | None = None
    static_after: StaticResidency | None = None
    probe_before: Residency | None = None
    probe_after: Residency | None = None
    notes: list[str] = field(default_factory=list)
    #: What fired rules tell the app, by the rule's ``report_key`` (``streaming``: per state, the
    #: input, the output fed back to it, shape, dtype, initial value); in JSON at the top level.
    rule_records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: The same records for a terminal (``Rule.report_lines``); not in JSON.
    rule_lines: list[str] = field(default_factory=list)
    #: Dynamic batches fixed without ``--input-shape``: input name -> the stored shape used.
    default_shapes: dict[str, list[int]] = field(default_factory=dict)
    #: Why nothing was written (None when ``written``): nothing changed, or verification failed.
    reason: str | None = None
    #: The static checks of the input and the result, and the two models, for the HTML page's
    #: residency strips; not in JSON (``static_before``/``static_after`` sum them up).
    checks: tuple[CheckReport, CheckReport] | None = field(
        default=None, repr=False, compare=False, metadata={"json": False}
    )
    models: tuple[Any, Any] | None = field(
        default=None, repr=False, compare=False, metadata={"json": False}
    )

    def to_json(self) -> dict[str, Any]:
        data = {
            f.name: plain(getattr(self, f.name))
            for f in fields(self)
            if f.metadata.get("json", True)
        }
        del data["rule_lines"]
        records = data.pop("rule_records")
        return {"schema": REWRITE_SCHEMA, **data, **records}


def render_rewrite(report: RewriteReport, console: Console) -> None:
    """Print the report for a terminal."""
    if not report.written and report.reason and report.reason.startswith("nothing to do"):
        console.print(f"[bold]{report.model}[/]: {report.reason}; {report.output} not written")
        if report.static_before is not None:
            console.print(f"static check: {report.static_before.summary}")
        for note in report.notes:
            console.print(f"note: {note}")
        return
    state = "written" if report.written else "NOT written"
    console.print(f"[bold]{report.model}[/] -> {report.output} ({state})")
    for line in default_shape_lines(report.default_shapes):
        console.print(line)
    _print_rules(report, console)
    ops = sorted(set(report.histogram_before) | set(report.histogram_after))
    hist = Table("op", "before", "after", title="op histogram (main graph and signatures)")
    for op in ops:
        hist.add_row(
            op, str(report.histogram_before.get(op, 0)), str(report.histogram_after.get(op, 0))
        )
    console.print(hist)
    _print_static(report, console)
    _print_probe(report, console)
    _print_verification(report, console)
    if report.rule_lines:
        console.print(report.rule_lines[0])
        for line in report.rule_lines[1 : _MAX_LINES + 1]:
            console.print(f"  {line}")
        _more(console, report.rule_lines[1:], "lines")
    for note in report.notes:
        console.print(f"note: {note}")


def _print_rules(report: RewriteReport, console: Console) -> None:
    """The rules that fired (grouped) and those that did not, with why."""
    if report.fired:
        from tflkit.report.check_report import index_ranges

        fired: dict[tuple[str, str, str], list[int]] = {}
        for f in report.fired:
            where = f.get("signature") or f"subgraph {f.get('subgraph', 0)}"
            fired.setdefault((f["rule"], f["op_type"], where), []).append(f["op_index"])
        table = Table("rule", "op", "times", "in", "at op", title="rules fired")
        for (rule, op_type, where), indices in fired.items():
            table.add_row(rule, op_type, str(len(indices)), where, index_ranges(indices))
        console.print(table)
    else:
        console.print("no rule fired")
    skipped = _grouped(
        ((s["rule"], s["op_type"], s["reason"]), _at(s.get("subgraph", 0), s["op_index"]))
        for s in report.not_fired
    )
    for (rule, op_type, reason), where in skipped[:_MAX_LINES]:
        console.print(f"  not fired: {rule} on {op_type} {_ops(where)}: {reason}")
    _more(console, skipped, "groups of rules not fired")


def _print_static(report: RewriteReport, console: Console) -> None:
    """The static check before and after, and what stays on the CPU."""
    for label, static in (("before", report.static_before), ("after", report.static_after)):
        if static is not None:
            console.print(
                f"static check {label}: {static.summary} "
                f"({static.gpu_ops}/{static.total_ops} ops on GPU, "
                f"{static.gpu_partitions} GPU partition(s))"
            )
    if report.static_after is not None:
        still = still_groups(report.static_after.still_on_cpu)
        for line in still[:_MAX_LINES]:
            console.print(f"  still on CPU (static): {line}")
        _more(console, still, "groups of ops still on CPU (tflkit check)")


def still_groups(lines: Sequence[str]) -> list[str]:
    """``"TYPE #where: reason"`` lines of ops left on the CPU, one line per reason (its first
    sentence): ``12 ops (FULLY_CONNECTED x8, MUL x4: #1:9, #1:12 and 10 more): reason``."""
    return [f"{_ops(where)}: {reason}" for (reason,), where in _grouped(map(_still_key, lines))]


def _print_probe(report: RewriteReport, console: Console) -> None:
    """What the real accelerator said before and after, when probed."""
    if not (report.probe_before or report.probe_after):
        return
    gpu = Table(
        "",
        "status",
        "ops on GPU",
        "ops on CPU",
        "partitions",
        "fully on GPU",
        title="GPU accelerator (probed)",
    )
    for label, r in (("before", report.probe_before), ("after", report.probe_after)):
        if r is not None:
            gpu.add_row(
                label,
                r.status,
                _count(r.ops_on_gpu, r.status),
                _count(r.ops_on_cpu, r.status),
                str(r.partitions) if r.status in COMPILED_STATUSES else NOTCOMPILED_STATUSES,
                "yes" if r.fully_accelerated else "no",
            )
    console.print(gpu)
    if report.probe_after is not None:
        for line in report.probe_after.rejections:
            console.print(f"  still on CPU: {line}")
        if report.probe_after.crash:
            console.print(f"  accelerator crashed: {report.probe_after.crash}")


def _print_verification(report: RewriteReport, console: Console) -> None:
    """The CPU verification of the rewritten model against the original."""
    v = report.verification
    if v is None:
        return
    problem = v["problem"] or "outputs differ"
    verdict = "[green]outputs match[/]" if v["ok"] else f"[red]{problem}[/]"
    console.print(f"verification (CPU, contract {v['contract']}): {verdict}")
    same = [o["name"] for o in v["outputs"] if o["identical"]]
    if same:
        console.print(f"  {len(same)} of {len(v['outputs'])} outputs bit-identical")
    differ = [o for o in v["outputs"] if not o["identical"]]
    for o in differ[:_MAX_LINES]:
        console.print(f"  {o['name']}: max abs {o['max_abs']:.3g}, max rel {o['max_rel']:.3g}")
    _more(console, differ, "outputs")


def default_shape_lines(defaults: dict[str, list[int]]) -> list[str]:
    """One line per input whose dynamic batch ``rewrite`` fixed without being told (one line
    for them all beyond three)."""
    if len(defaults) > 3:
        names = list(defaults)
        return [
            f"fixed the dynamic batch of {len(names)} inputs ({names[0]}, {names[1]}, ...) to 1, "
            "the size they store; --input-shape NAME=... (or '*=N' for all) to choose another"
        ]
    return [
        f"fixed the dynamic batch of input {name} to 1 (stored shape "
        f"{','.join(map(str, dims))}); --input-shape {name}=... to choose another"
        for name, dims in defaults.items()
    ]


#: What the terminal shows for an op count the accelerator never produced.
NOTCOMPILED_STATUSES = "not compiled"
UNKNOWN = "—"


def _count(value: int | None, status: str) -> str:
    """An op count for the terminal: the number, "not compiled" when the accelerator compiled
    nothing, "—" when it compiled but did not say."""
    if value is not None:
        return str(value)
    return UNKNOWN if status in COMPILED_STATUSES else NOTCOMPILED_STATUSES


def _at(subgraph: int, op_index: int) -> str:
    """``#5`` for op 5 of the main graph, ``#1:5`` for op 5 of subgraph 1."""
    return f"#{op_index}" if subgraph == 0 else f"#{subgraph}:{op_index}"


def _still_key(line: str) -> tuple[tuple[str], str]:
    """``"RESHAPE #1:0: why. Input 0 (name) ..."`` -> ((why.,), "RESHAPE #1:0"): ops group by
    the first sentence of their reason (the rest names their own tensors)."""
    head, _, reason = line.partition(": ")
    first, dot, _ = reason.partition(". ")
    return (first + dot.strip(),), head


def _grouped(items: Iterable[tuple[Any, str]]) -> list[tuple[Any, list[str]]]:
    """(key, what) pairs gathered by key, in first-seen order: one terminal line per key."""
    groups: dict[Any, list[str]] = {}
    for key, what in items:
        groups.setdefault(key, []).append(what)
    return list(groups.items())


def _ops(where: list[str], shown: int = 4) -> str:
    """``RESHAPE #1:0, MUL #1:5`` (or ``#16, #1:16``) for a few; past ``shown`` the count and
    the op types first: ``7 ops (RESHAPE x4, MUL x3: RESHAPE #1:0, MUL #1:5 and 5 more)``."""
    if len(where) <= shown:
        return ", ".join(where)
    types = Counter(w.split("#", 1)[0].strip() for w in where)
    kinds = ", ".join(f"{t} x{n}" for t, n in types.most_common())
    first = ", ".join(where[:2])
    return f"{len(where)} ops ({kinds}: {first} and {len(where) - 2} more)"


def _more(console: Console, items: list[Any], what: str) -> None:
    if len(items) > _MAX_LINES:
        console.print(f"  [dim]... {len(items) - _MAX_LINES} more {what}: --json[/dim]")
