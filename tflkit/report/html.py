"""Self-contained HTML for a ``validate`` report: tables, inline SVG plots, no script, no network.

Every number sits in an element with a ``data-*`` address (``data-pair``, ``data-output``,
``data-metric``; ``data-op`` for per-op rows) so tests and tools can read it off the page.
"""

from __future__ import annotations

import html
import math
import os
from pathlib import Path
from typing import Any

from tflkit.compare.comparator import OutputComparison, PairComparison
from tflkit.compare.divergence import Localization
from tflkit.fsio import write_atomic
from tflkit.report.validate_report import ValidateReport, fmt

__all__ = ["render_html", "write_html"]

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:20px}h2{font-size:17px;margin-top:28px}h3{font-size:15px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 7px;
text-align:right}th{background:#f3f3f3}td.l,th.l{text-align:left}
.pass{color:#1a7f37;font-weight:600}.fail{color:#c62828;font-weight:600}
.other{color:#9a6700;font-weight:600}.note{color:#555}svg{background:#fafafa;margin:4px 0}
"""
_METRICS = (
    ("max_abs", "max abs"),
    ("mean_abs", "mean abs"),
    ("rmse", "RMSE"),
    ("max_rel", "max rel"),
    ("cosine", "cosine"),
    ("snr_db", "SNR dB"),
    ("psnr_db", "PSNR dB"),
    ("nan_actual", "NaN"),
    ("inf_actual", "Inf"),
    ("top1", "top-1"),
    ("top5", "top-5"),
)


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _num(value: Any) -> str:
    """Integers as they are, other numbers to 6 significant digits (:func:`fmt`)."""
    return str(value) if isinstance(value, int) else fmt(value, 6)


def _verdict(verdict: str) -> str:
    cls = {"pass": "pass", "ok": "pass", "fail": "fail"}.get(verdict, "other")
    return f'<span class="{cls}" data-verdict="{_e(verdict)}">{_e(verdict)}</span>'


def _runners(report: ValidateReport) -> str:
    rows = []
    for r in report.runners:
        ex = r.executed
        adapter = ex.get("adapter") or {}
        what = " ".join(
            str(x)
            for x in (ex.get("runtime"), ex.get("device"), ex.get("kernels"), ex.get("precision"))
            if x
        )
        if adapter:
            what += f", {adapter.get('name')}" + (
                " (software GPU)" if adapter.get("software") else ""
            )
        mean = sum(r.infer_seconds) / len(r.infer_seconds) if r.infer_seconds else None
        notes = "; ".join(r.notes + ([r.error] if r.error else []))
        rows.append(
            f'<tr data-runner="{_e(r.runner)}"><td class="l">{_e(r.runner)}</td>'
            f'<td class="l">{_verdict(r.status)}</td><td class="l">{_e(what)}</td>'
            f'<td data-metric="compile_seconds">{_num(r.compile_seconds)}</td>'
            f'<td data-metric="mean_infer_seconds">{_num(mean)}</td>'
            f'<td class="l note">{_e(notes)}</td></tr>'
        )
    head = (
        '<tr><th class="l">runner</th><th class="l">status</th><th class="l">executed</th>'
        '<th>compile s</th><th>mean inference s</th><th class="l">notes</th></tr>'
    )
    return f'<table id="runners">{head}{"".join(rows)}</table>'


def _output_row(pair: PairComparison, out: OutputComparison) -> str:
    m = out.metrics.to_json() if out.metrics else {}
    cells = "".join(
        f'<td data-metric="{key}">{_num(m.get(key)) if m else "-"}</td>' for key, _ in _METRICS
    )
    return (
        f'<tr data-pair="{_e(pair.key)}" data-output="{_e(out.name)}">'
        f'<td class="l">{_e(out.name)}</td><td class="l">{_verdict(out.verdict)}</td>'
        f'<td data-metric="bound">{_num(out.bound)}</td>{cells}'
        f'<td class="l note">{_e("; ".join(out.reasons))}'
        + (f" (kind {_e(out.kind)}; bound: {_e(out.basis)})" if out.basis else "")
        + "</td></tr>"
    )


def _histogram_svg(
    pair: PairComparison, out: OutputComparison, width: int = 360, height: int = 120
) -> str:
    hist = out.histogram
    if hist is None:
        return ""
    counts = [hist.zeros, *hist.counts]
    labels = ["0"] + [f"1e{int(e)}" for e in hist.edges[:-1]]
    top = max(counts) or 1
    bar = (width - 40) / len(counts)
    parts = [
        f'<svg width="{width}" height="{height + 30}" role="img" '
        f'aria-label="error histogram {_e(out.name)}">'
    ]
    for i, (count, label) in enumerate(zip(counts, labels, strict=True)):
        h = (height - 10) * (math.log10(count + 1) / math.log10(top + 1))
        x = 30 + i * bar
        parts.append(
            f'<rect x="{x:.1f}" y="{height - h:.1f}" width="{bar - 2:.1f}" height="{h:.1f}" '
            f'fill="#4c78a8"><title>|d| bin {label}: {count}</title></rect>'
        )
        if i % 3 == 0:
            parts.append(f'<text x="{x:.1f}" y="{height + 14}" font-size="9">{_e(label)}</text>')
    parts.append(
        f'<text x="30" y="{height + 27}" font-size="10">{_e(out.name)}: |{_e(pair.actual)} - '
        f"{_e(pair.expected)}| per element, log bins (log-scaled counts)</text></svg>"
    )
    return "".join(parts)


def _pairs(report: ValidateReport) -> str:
    parts = []
    head = (
        '<tr><th class="l">output</th><th class="l">verdict</th><th>bound</th>'
        + "".join(f"<th>{label}</th>" for _, label in _METRICS)
        + '<th class="l">why</th></tr>'
    )
    for pair in report.pairs:
        parts.append(f"<h3>{_e(pair.actual)} vs {_e(pair.expected)}: {_verdict(pair.verdict)}</h3>")
        if pair.reason:
            parts.append(f'<p class="note">{_e(pair.reason)}</p>')
        if pair.outputs:
            rows = "".join(_output_row(pair, o) for o in pair.outputs)
            parts.append(f'<table class="pair" data-pair="{_e(pair.key)}">{head}{rows}</table>')
            parts.extend(_histogram_svg(pair, o) for o in pair.outputs if o.histogram is not None)
    return "".join(parts)


def _per_op_svg(loc: Localization, width: int = 1000, height: int = 200) -> str:
    ops = [op for op in loc.ops if op.isolated is not None or op.accumulated is not None]
    if not ops:
        return ""

    def y(score: float | None) -> float | None:
        if score is None:
            return None
        value = 1.0 if math.isinf(score) else min(max(score, 1e-9), 1.0)
        return 10 + (height - 20) * (1 - (math.log10(value) + 9) / 9)

    step = (width - 40) / max(len(ops), 1)
    parts = [f'<svg width="{width}" height="{height + 20}" role="img" aria-label="per-op error">']
    threshold_y = y(loc.threshold)
    parts.append(
        f'<line x1="30" x2="{width}" y1="{threshold_y:.1f}" y2="{threshold_y:.1f}" '
        'stroke="#c62828" stroke-dasharray="4 3"/>'
    )
    acc_points = []
    for i, op in enumerate(ops):
        x = 30 + i * step
        iso = y(op.isolated.score if op.isolated else None)
        if iso is not None:
            colour = "#c62828" if op in loc.culprits else "#4c78a8"
            parts.append(
                f'<rect x="{x:.1f}" y="{iso:.1f}" width="{max(step - 1, 1):.1f}" '
                f'height="{height - 10 - iso:.1f}" fill="{colour}"><title>#{op.op_index} '
                f"{_e(op.op_type)} isolated {_num(op.isolated.score)}</title></rect>"
            )
        acc = y(op.accumulated.score if op.accumulated else None)
        if acc is not None:
            acc_points.append(f"{x + step / 2:.1f},{acc:.1f}")
    if acc_points:
        parts.append(
            f'<polyline points="{" ".join(acc_points)}" fill="none" stroke="#f58518" '
            'stroke-width="1.5"/>'
        )
    parts.append(
        f'<text x="30" y="{height + 14}" font-size="10">ops in execution order; bars: isolated '
        "error / peak (log, 1e-9..1), line: accumulated, dashed: threshold</text></svg>"
    )
    return "".join(parts)


def _localization(loc: Localization | None) -> str:
    if loc is None:
        return ""
    if loc.unavailable:
        return f"<h2>Localization</h2><p>Localization cannot run: {_e(loc.unavailable)}</p>"
    rows = []
    for rank, op in enumerate(loc.culprits, 1):
        rows.append(
            f'<tr data-op="{op.op_index}"><td>{rank}</td><td>#{op.op_index}</td>'
            f'<td class="l">{_e(op.op_type)}</td><td class="l">{_e(op.status)}</td>'
            f'<td data-metric="isolated">{_num(op.isolated.score if op.isolated else None)}</td>'
            f'<td data-metric="accumulated">'
            f"{_num(op.accumulated.score if op.accumulated else None)}</td>"
            f'<td class="l">{_e("; ".join(op.hazards))}</td></tr>'
        )
    if not rows:
        rows.append(
            '<tr><td colspan="7" class="l">no op exceeds the threshold in isolation</td></tr>'
        )
    first = loc.first_divergent
    first_text = f"#{first.op_index} {first.op_type}" if first is not None else "none"
    return (
        f"<h2>Where the GPU diverges ({_e(loc.runner)})</h2>"
        f'<p>First divergent op: <b id="first-divergent">{_e(first_text)}</b>; '
        f"threshold {_num(loc.threshold)} of each op's peak.</p>"
        + _per_op_svg(loc)
        + '<table id="culprits"><tr><th>rank</th><th>op</th><th class="l">type</th>'
        '<th class="l">status</th><th>isolated</th><th>accumulated</th>'
        '<th class="l">fp16 hazards</th></tr>'
        + "".join(rows)
        + "</table>"
        + "".join(f'<p class="note">{_e(n)}</p>' for n in loc.notes)
    )


def render_html(report: ValidateReport) -> str:
    """The whole page as a string."""
    findings = "".join(f"<li>{_e(f)}</li>" for f in report.findings)
    unverified = "".join(f"<li>{_e(u)}</li>" for u in report.unverified)
    meaningless = "".join(f"<li>{_e(u)}</li>" for u in report.not_meaningful)
    notes = "".join(f"<li>{_e(n)}</li>" for n in [*report.inputs.get("notes", []), *report.notes])
    inputs = report.inputs
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>tflkit validate: {_e(os.path.basename(report.model))}</title>"
        f"<style>{_CSS}</style></head><body>"
        f"<h1>tflkit validate: {_e(os.path.basename(report.model))}</h1>"
        f'<p>Verdict: <b id="verdict">{_verdict(report.verdict)}</b> &middot; '
        f"inputs: {_e(inputs.get('count'))} sets ({_e(inputs.get('source'))}) &middot; "
        f"sha256 {_e(report.model_sha256[:16])} &middot; wall {report.wall_seconds:.1f} s</p>"
        + (f"<h2>Findings</h2><ul>{findings}</ul>" if findings else "")
        + (f"<h2>Unverified</h2><ul>{unverified}</ul>" if unverified else "")
        + (f"<h2>Not meaningful on these inputs</h2><ul>{meaningless}</ul>" if meaningless else "")
        + (f"<h2>Notes</h2><ul>{notes}</ul>" if notes else "")
        + "<h2>Runners</h2>"
        + _runners(report)
        + "<h2>Comparisons</h2>"
        + _pairs(report)
        + _localization(report.localization)
        + "</body></html>"
    )


def write_html(report: ValidateReport, path: str | os.PathLike[str]) -> Path:
    """Write the page atomically."""
    return write_atomic(path, [render_html(report).encode("utf-8")])
