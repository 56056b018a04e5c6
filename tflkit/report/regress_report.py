"""The ``regress check`` report (schema ``tflkit.regress/1``) and its renderers.

One :class:`ModelResult` per model checked against its baseline; each holds the cases a CI system
shows as tests: one per runner x output, the residency (static and probed), the latency budget.
Renderers: a terminal summary, JUnit XML (one ``testsuite`` per model), Markdown for a
pull-request comment.

The runtime matrix of a check with several ``--runtime``: model x runtime -> verdict, GPU
residency, max error against the baseline, speed; and what moved from one runtime to the next (in
the order given): a verdict, an op that left (or reached) the GPU, a runner that stopped (or
started) compiling, an output that moved past its bound; each named with the runtime where it
moved.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from tflkit.delegates.base import on_gpu
from tflkit.fsio import write_atomic
from tflkit.jsonable import plain, plain_fields

__all__ = [
    "REGRESS_SCHEMA",
    "Case",
    "Cell",
    "Matrix",
    "ModelResult",
    "RegressReport",
    "build_matrix",
    "cell_text",
    "matrix_lines",
    "record_lines",
    "render_markdown",
    "render_terminal",
    "suite_record_lines",
    "write_junit",
    "write_text_atomic",
]

REGRESS_SCHEMA = "tflkit.regress/1"


@dataclass
class Case:
    """One check. ``status``: "pass", "fail" or "skipped"; ``kind``: "output", "residency",
    "latency". ``details`` holds the numbers behind the message (metrics, counts, timings)."""

    name: str
    kind: str
    status: str
    message: str = ""
    runner: str | None = None
    output: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass
class ModelResult:
    """A model against its baseline. ``verdict``: "pass", "fail" (a regression) or "error" (the
    check could not run: a missing baseline, an unreadable model)."""

    model: str
    baseline: str
    verdict: str
    cases: list[Case] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)
    error: str | None = None
    wall_seconds: float = 0.0
    #: the runtime it ran with (``ai-edge-litert==2.3.0``); None: the one tflkit runs with
    runtime: str | None = None
    #: the Ray nodes that ran its items (``--cluster``); empty for a local run
    nodes: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[Case]:
        return [c for c in self.cases if c.status == "fail"]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelResult:
        data = dict(data)
        data.pop("counts", None)
        data["cases"] = [Case(**c) for c in data.get("cases", [])]
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        data = plain_fields(self)
        data["counts"] = {
            s: sum(1 for c in self.cases if c.status == s) for s in ("pass", "fail", "skipped")
        }
        return data


@dataclass
class RegressReport:
    """Every model checked; exit code 1 when any regressed, 2 when any could not be checked."""

    models: list[ModelResult]
    suite: str | None = None

    @property
    def verdict(self) -> str:
        verdicts = {m.verdict for m in self.models}
        return "error" if "error" in verdicts else "fail" if "fail" in verdicts else "pass"

    @property
    def exit_code(self) -> int:
        return {"pass": 0, "fail": 1}.get(self.verdict, 2)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "schema": REGRESS_SCHEMA,
            "suite": self.suite,
            "verdict": self.verdict,
            "models": self.models,
        }
        matrix = build_matrix(self)
        if matrix is not None:
            data["matrix"] = matrix
        return plain(data)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` atomically (:func:`tflkit.fsio.write_atomic`)."""
    write_atomic(path, text)


def _label(model: ModelResult) -> str:
    name = Path(model.model).name
    return f"{name} [{model.runtime}]" if model.runtime else name


def render_terminal(report: RegressReport, console: Any) -> None:
    """Per model: the verdict line, failures with their messages, then what changed."""
    from rich.markup import escape

    for model in report.models:
        counts = model.to_json()["counts"]
        colour = {"pass": "green", "fail": "red"}.get(model.verdict, "yellow")
        console.print(
            f"[{colour}]{model.verdict.upper()}[/{colour}] [bold]{escape(_label(model))}[/bold] vs "
            f"{escape(model.baseline)}: {counts['pass']} passed, {counts['fail']} failed, "
            f"{counts['skipped']} skipped ({model.wall_seconds:.1f} s)",
            markup=True,
            highlight=False,
        )
        if model.error:
            console.print(f"  [yellow]{escape(model.error)}[/yellow]", highlight=False)
        for case in model.cases:
            if case.status == "fail":
                text = f"{escape(case.name)}: {escape(case.message)}"
                console.print(f"  [red]FAIL[/red] {text}", highlight=False, soft_wrap=True)
        for change in model.changes:
            console.print(f"  changed: {change}", markup=False, highlight=False, soft_wrap=True)
    if len(report.models) > 1:
        failed = sum(1 for m in report.models if m.verdict != "pass")
        console.print(f"{len(report.models) - failed}/{len(report.models)} models pass")
    matrix = build_matrix(report)
    for line in matrix_lines(matrix) if matrix is not None else []:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def probe_counts(probe: dict[str, Any]) -> str:
    """ "N on GPU, M on CPU", or why there are no counts: the accelerator compiled nothing, or
    (a baseline recorded before counts were filled for fully delegated models) took all ops."""
    on_gpu, on_cpu = probe.get("ops_on_gpu"), probe.get("ops_on_cpu")
    if on_gpu is not None and on_cpu is not None:
        return f"{on_gpu} on GPU, {on_cpu} on CPU"
    if probe.get("status") == "ok" and not probe.get("rejected"):
        return "all ops on GPU"
    return "not compiled" if probe.get("status") != "ok" else "op counts not reported"


def record_lines(model: str | os.PathLike[str], path: Path, manifest: dict[str, Any]) -> list[str]:
    """What ``regress record`` prints for one model: where the baseline went, each runner's
    status and outputs kept, the GPU residency recorded."""
    residency = manifest["residency"]
    static = residency["static"]
    line = f"{static['gpu_ops']}/{static['total_ops']} ops on the GPU (static)"
    if residency["probe"] is not None:
        p = residency["probe"]
        line += f"; probe {p['status']}: " + probe_counts(p)
    lines = [f"recorded {Path(model).name} -> {path}"]
    for name, entry in manifest["runners"].items():
        error = entry.get("error") or "no error message"
        state = "ok" if entry["status"] == "ok" else f"{entry['status']}: {error}"
        lines.append(f"  {name}: {state}; {len(entry['outputs'])} output(s) kept")
    lines.append(f"  {line}")
    return lines


def suite_record_lines(report: RegressReport) -> list[str]:
    """What ``regress record --suite`` prints: per model, its baseline and what changed."""
    return [
        f"{Path(result.model).name} -> {result.baseline}: "
        + (f"error: {result.error}" if result.error else "; ".join(result.changes))
        for result in report.models
    ]


def _junit_tree(report: RegressReport) -> ET.Element:
    root = ET.Element("testsuites", name=report.suite or "tflkit regress")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for model in report.models:
        label = _label(model)
        suite = ET.SubElement(root, "testsuite", name=label)
        counts = {
            "tests": len(model.cases),
            "failures": len(model.failures),
            "errors": 0,
            "skipped": sum(1 for c in model.cases if c.status == "skipped"),
        }
        if model.error:
            counts["tests"] += 1
            counts["errors"] += 1
            case = ET.SubElement(suite, "testcase", classname=label, name="check", time="0")
            ET.SubElement(case, "error", message=model.error.splitlines()[0]).text = model.error
        for c in model.cases:
            case = ET.SubElement(
                suite, "testcase", classname=label, name=c.name, time=f"{c.seconds:.3f}"
            )
            if c.status == "fail":
                ET.SubElement(
                    case, "failure", message=c.message.splitlines()[0], type=c.kind
                ).text = c.message
            elif c.status == "skipped":
                ET.SubElement(case, "skipped", message=c.message)
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", f"{model.wall_seconds:.3f}")
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", f"{sum(m.wall_seconds for m in report.models):.3f}")
    return root


def write_junit(report: RegressReport, path: str | os.PathLike[str]) -> None:
    """JUnit XML: one ``testsuite`` per model, one ``testcase`` per runner x output, residency
    and latency case."""
    tree = ET.ElementTree(_junit_tree(report))
    ET.indent(tree)
    text = ET.tostring(tree.getroot(), encoding="unicode", xml_declaration=False)
    write_text_atomic(path, '<?xml version="1.0" encoding="utf-8"?>\n' + text + "\n")


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def render_markdown(report: RegressReport) -> str:
    """A pull-request comment: one line per model, then a table of the failures."""
    icon = {"pass": "pass", "fail": "**REGRESSION**", "error": "**ERROR**"}
    lines = [f"### tflkit regress: {icon[report.verdict]}", ""]
    lines += ["| model | verdict | passed | failed | skipped |", "|---|---|---|---|---|"]
    for m in report.models:
        c = m.to_json()["counts"]
        lines.append(
            f"| `{_label(m)}` | {icon.get(m.verdict, m.verdict)} | {c['pass']} | {c['fail']} | "
            f"{c['skipped']} |"
        )
    failing = [(m, c) for m in report.models for c in m.failures]
    errors = [m for m in report.models if m.error]
    if failing or errors:
        lines += ["", "| model | check | what moved |", "|---|---|---|"]
        for m in errors:
            lines.append(f"| `{_label(m)}` | check | {_md_cell(m.error or '')} |")
        for m, c in failing:
            lines.append(f"| `{_label(m)}` | {_md_cell(c.name)} | {_md_cell(c.message)} |")
    changes = [(m, ch) for m in report.models for ch in m.changes]
    if changes:
        lines += ["", "<details><summary>what changed</summary>", ""]
        lines += [f"- `{_label(m)}`: {_md_cell(ch)}" for m, ch in changes]
        lines += ["", "</details>"]
    matrix = build_matrix(report)
    if matrix is not None:
        lines += ["", "```", *matrix_lines(matrix), "```"]
    return "\n".join(lines) + "\n"


# --- the runtime matrix (``regress check --runtime A --runtime B ...``) ----------------------


@dataclass
class Cell:
    """One model on one runtime."""

    verdict: str
    gpu: dict[str, str] = field(default_factory=dict)  # runner -> "5/7 ops", "compile_error"
    fallback: dict[str, list[str]] = field(default_factory=dict)  # runner -> ops on the CPU
    max_abs: dict[str, float] = field(default_factory=dict)  # runner -> worst output
    failing: list[str] = field(default_factory=list)  # output cases that fail
    infer_ms: dict[str, float] = field(default_factory=dict)  # runner -> median ms


@dataclass
class Matrix:
    runtimes: list[str]
    cells: dict[str, dict[str, Cell]]  # model -> runtime -> cell
    moves: list[dict[str, str]]


def _cell(result: ModelResult) -> Cell:
    cell = Cell(result.verdict)
    for case in result.cases:
        runner = case.runner or ""
        if case.kind == "runtime":
            d = case.details
            if d.get("status") != "ok":
                cell.gpu[runner] = str(d.get("status"))
            elif d.get("ops_on_gpu") is not None:
                cell.gpu[runner] = f"{d['ops_on_gpu']}/{d['ops_total']} ops"
            if on_gpu(runner) and (d.get("status") == "ok" or d.get("cpu_fallback")):
                cell.fallback[runner] = list(d.get("cpu_fallback") or [])  # as the log said
            if d.get("infer_median_seconds") is not None:
                cell.infer_ms[runner] = d["infer_median_seconds"] * 1e3
        elif case.kind == "output":
            metrics = (case.details or {}).get("metrics") or {}
            if metrics.get("max_abs") is not None:
                cell.max_abs[runner] = max(cell.max_abs.get(runner, 0.0), metrics["max_abs"])
            if case.status == "fail" and metrics:  # an output that moved (not a runner down)
                cell.failing.append(case.name)
    return cell


def _moves(model: str, runtimes: Sequence[str], cells: dict[str, Cell]) -> list[dict[str, str]]:
    moves = []
    for before, after in itertools.pairwise(runtimes):
        a, b = cells.get(before), cells.get(after)
        if a is None or b is None:
            continue

        def say(what: str, before: str = before, after: str = after) -> None:
            moves.append({"model": model, "from": before, "to": after, "what": what})

        if a.verdict != b.verdict:
            say(f"verdict {a.verdict} -> {b.verdict}")
        for runner in sorted(set(a.gpu) | set(b.gpu)):
            was, now = a.gpu.get(runner, "-"), b.gpu.get(runner, "-")
            if was != now and not (was.endswith("ops") and now.endswith("ops")):
                say(f"{runner}: {was} -> {now}")
            left = sorted(set(b.fallback.get(runner, [])) - set(a.fallback.get(runner, [])))
            back = sorted(set(a.fallback.get(runner, [])) - set(b.fallback.get(runner, [])))
            if runner in a.fallback and runner in b.fallback:
                if left:
                    say(f"{runner}: {', '.join(left)} left the GPU")
                if back:
                    say(f"{runner}: {', '.join(back)} moved onto the GPU")
        for name in sorted(set(b.failing) - set(a.failing)):
            say(f"{name} moved past its bound")
        for name in sorted(set(a.failing) - set(b.failing)):
            say(f"{name} back within its bound")
    return moves


def build_matrix(report: RegressReport) -> Matrix | None:
    """The matrix of a report whose results carry runtimes (None when none do)."""
    runtimes = list(dict.fromkeys(m.runtime for m in report.models if m.runtime))
    if not runtimes:
        return None
    cells: dict[str, dict[str, Cell]] = {}
    for result in report.models:
        if result.runtime:
            cells.setdefault(Path(result.model).name, {})[result.runtime] = _cell(result)
    moves = [m for model, row in cells.items() for m in _moves(model, runtimes, row)]
    return Matrix(runtimes, cells, moves)


def cell_text(cell: Cell | None) -> str:
    if cell is None:
        return "-"
    gpu = ", ".join(f"{r} {v}" for r, v in cell.gpu.items() if on_gpu(r))
    err = max(cell.max_abs.values(), default=None)
    speed = ", ".join(f"{r} {v:.3g} ms" for r, v in cell.infer_ms.items())
    parts = [cell.verdict.upper(), gpu, f"max_abs {err:.3g}" if err is not None else "", speed]
    return "; ".join(p for p in parts if p)


def matrix_lines(matrix: Matrix) -> list[str]:
    """Per model and runtime one line, then what moved."""
    lines = [f"runtime matrix ({', '.join(matrix.runtimes)}):"]
    for model, row in matrix.cells.items():
        lines.append(f"  {model}")
        lines += [f"    {rt}: {cell_text(row.get(rt))}" for rt in matrix.runtimes]
    if matrix.moves:
        lines.append("what moved:")
        lines += [
            f"  {m['model']}: {m['what']} (in {m['to']}, from {m['from']})" for m in matrix.moves
        ]
    else:
        lines.append("nothing moved between runtimes")
    return lines
