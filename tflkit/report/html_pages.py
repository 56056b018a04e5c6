"""What each HTML page shows: the template and its context, built from a report.

The templates (``templates/*.html.j2``) lay the context out; the plots come from
:mod:`tflkit.report.plots`. No markup is assembled here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tflkit.report import plots
from tflkit.report.numbers import num
from tflkit.report.speed_report import speed_json

__all__ = ["page"]

_METRICS = (
    ("max_abs", "max abs", ""),
    ("mean_abs", "mean abs", ""),
    ("rmse", "RMSE", ""),
    ("max_rel", "max rel", ""),
    ("cosine", "cosine", ""),
    ("snr_db", "SNR", "dB"),
    ("psnr_db", "PSNR", "dB"),
    ("nan_actual", "NaN", ""),
    ("inf_actual", "Inf", ""),
    ("top1", "top-1", ""),
    ("top5", "top-5", ""),
)


def page(report: Any, **extra: Any) -> tuple[str, dict[str, Any]]:
    from tflkit.report.check_report import CheckReport
    from tflkit.report.regress_report import RegressReport
    from tflkit.report.rewrite_report import RewriteReport
    from tflkit.report.validate_report import ValidateReport

    if isinstance(report, ValidateReport):
        return "validate.html.j2", validate_context(report)
    if isinstance(report, CheckReport):
        return "check.html.j2", check_context(report, extra.get("model"))
    if isinstance(report, RewriteReport):
        return "rewrite.html.j2", rewrite_context(report)
    if isinstance(report, RegressReport):
        return "regress.html.j2", regress_context(report)
    doc = report.to_json() if hasattr(report, "to_json") else {}
    if doc.get("kind") == "validate_steps":  # validate --steps (StepsReport)
        return "steps.html.j2", steps_context(report, doc)
    if doc.get("schema") == "tflkit.validate-litertlm/1":  # validate B.litertlm
        return "bundle.html.j2", bundle_context(report, doc)
    raise TypeError(f"no HTML page for {type(report).__name__}")


# --- validate --steps and a .litertlm bundle: their JSON document and terminal summary --------


def steps_context(report: Any, doc: dict[str, Any]) -> dict[str, Any]:
    from tflkit.report.steps_report import steps_lines

    ok = bool(doc["ok"])
    return {
        "title": "tflkit validate --steps",
        "verdict": "pass" if ok else "fail",
        "verdict_text": "pass" if ok else "fail: a runner parted from the CPU or did not run",
        "doc": doc,
        "lines": steps_lines(report),
    }


def bundle_context(report: Any, doc: dict[str, Any]) -> dict[str, Any]:
    from tflkit.report.steps_report import steps_lines

    ok = bool(doc["ok"])
    return {
        "title": "tflkit validate (LiteRT-LM bundle)",
        "verdict": "pass" if ok else "fail",
        "verdict_text": "pass" if ok else "fail: " + "; ".join(doc["findings"][:1]),
        "doc": doc,
        "steps_lines": [] if report.steps is None else steps_lines(report.steps),
    }


# --- check ---------------------------------------------------------------------------------------


def _category(op: Any) -> str:
    if op.on_gpu:
        return "GPU"
    if op.reasons:
        return f"CPU: {op.reasons[0].code}"
    return f"CPU: {op.status}"


def _colours(categories: list[str]) -> dict[str, str]:
    colours = {"GPU": plots.GPU_COLOUR}
    for cat in categories:
        if cat not in colours:
            colours[cat] = plots.CPU_COLOURS[(len(colours) - 1) % len(plots.CPU_COLOURS)]
    return colours


def _producers(model: Any, subgraph: int) -> dict[str, int]:
    """Tensor name -> index of the op that writes it (graph inputs: none)."""
    if model is None:
        return {}
    try:
        graph = model.subgraphs[subgraph]
        return {t.name: op.index for op in graph.ops for t in op.outputs if t is not None}
    except (AttributeError, IndexError, TypeError):
        return {}


def strip_of(report: Any, model: Any = None, subgraph: int = 0) -> dict[str, Any]:
    """The residency strip of one subgraph: plot and the numbers it shows."""
    ops = [op for op in report.ops if op.subgraph == subgraph]
    categories = [_category(op) for op in ops]
    colours = _colours(categories)
    spans = []
    for part in report.partitions:
        if part.subgraph == subgraph and part.device.lower() == "gpu" and part.ops:
            spans.append((min(part.ops), max(part.ops)))
    producers = _producers(model, subgraph)
    at: dict[int, int] = {}
    for t in report.transfers:
        if t.subgraph == subgraph and t.tensor in producers and t.bytes:
            at[producers[t.tensor] + 1] = at.get(producers[t.tensor] + 1, 0) + t.bytes
    boundaries = sorted(at.items())
    legend = [
        {"label": cat, "colour": colour, "count": categories.count(cat)}
        for cat, colour in colours.items()
        if cat in categories
    ]
    return {
        "svg": plots.residency_strip(
            categories, colours, spans, boundaries, label_of=lambda b: _num(b, "B")
        ),
        "ops": len(ops),
        "gpu": sum(1 for op in ops if op.on_gpu),
        "partitions": len(spans),
        "boundaries": len(boundaries),
        "legend": legend,
    }


def check_context(report: Any, model: Any = None) -> dict[str, Any]:
    from tflkit.report.check_report import group_cpu_ops, index_ranges

    data = report.to_json()
    subgraphs = sorted({op.subgraph for op in report.ops}) or [0]
    producers = {s: _producers(model, s) for s in subgraphs}
    transfers = [
        {"t": t, "after_op": producers.get(t.subgraph, {}).get(t.tensor)} for t in report.transfers
    ]
    groups = [
        {"g": g, "ranges": index_ranges(g.indices), "fix": g.fix.text if g.fix else ""}
        for g in group_cpu_ops(report)
    ]
    return {
        "title": f"tflkit check: {Path(report.path).name}",
        "report": report,
        "verdict": "pass" if report.gpu_ready else "fail",
        "verdict_text": "GPU-ready" if report.gpu_ready else "not GPU-ready",
        "gpu_flops_share": data["gpu_flops_share"],
        "strips": [{"subgraph": s, **strip_of(report, model, s)} for s in subgraphs],
        "transfers": transfers,
        "groups": groups,
        # LiteRT.js in Chromium (``check --probe-browser``), on reports that have it
        "browser": getattr(report, "browser", None),
    }


# --- rewrite -------------------------------------------------------------------------------------


def rewrite_context(report: Any) -> dict[str, Any]:
    fired: dict[tuple[str, str], list[int]] = {}
    for f in report.fired:
        fired.setdefault((f["rule"], f["op_type"]), []).append(f["op_index"])
    from tflkit.report.check_report import index_ranges

    fired_rows = [
        {"rule": rule, "op_type": op_type, "count": len(idx), "ranges": index_ranges(idx, 12)}
        for (rule, op_type), idx in sorted(fired.items(), key=lambda kv: -len(kv[1]))
    ]
    residency = []
    for label, static, probed in (
        ("before", report.static_before, report.probe_before),
        ("after", report.static_after, report.probe_after),
    ):
        residency.append({"label": label, "static": static, "probe": probed})
    fired_plot = None
    if report.fired:
        where: dict[str, list[int]] = {}
        for f in report.fired:
            where.setdefault(f"{f['rule']} ({f['op_type']})", []).append(f["op_index"])
        total = report.static_before.total_ops if report.static_before else None
        fired_plot = plots.positions(where, total, xlabel="op index in the input model")
    strips = []
    if report.checks is not None:
        models = report.models or (None, None)
        for label, check, model in zip(("before", "after"), report.checks, models, strict=True):
            strips.append({"label": label, **strip_of(check, model, 0)})
    histogram = sorted(set(report.histogram_before) | set(report.histogram_after))
    changed = [
        {"type": t, "before": report.histogram_before.get(t, 0),
         "after": report.histogram_after.get(t, 0)}
        for t in histogram
        if report.histogram_before.get(t, 0) != report.histogram_after.get(t, 0)
    ]  # fmt: skip
    verdict = "pass" if report.written else "fail"
    if not report.written and (report.reason or "").startswith("nothing to do"):
        verdict = "other"
    return {
        "title": f"tflkit rewrite: {Path(report.model).name}",
        "report": report,
        "verdict": verdict,
        "verdict_text": "written" if report.written else "not written",
        "fired_rows": fired_rows,
        "residency": residency,
        "strips": strips,
        "fired_plot": fired_plot,
        "changed": changed,
        "verification": report.verification,
    }


# --- validate ------------------------------------------------------------------------------------


def validate_context(report: Any) -> dict[str, Any]:
    return {
        "title": f"tflkit validate: {Path(report.model).name}",
        "report": report,
        "verdict": report.verdict,
        "verdict_text": report.verdict,
        "metrics": _METRICS,
        "pairs": _validate_pairs(report),
        "summary_plots": _summary_plots(report),
        "scatters": _scatters(report),
        "runners": _runner_rows(report),
        "speed": speed_json(report.runners),
        "loc": report.localization,
        "localization": _localization(report.localization),
        "notes": [*report.inputs.get("notes", []), *report.notes],
    }


def _validate_pairs(report: Any) -> list[dict[str, Any]]:
    """Each compared pair with its outputs' metrics and error histograms."""
    pairs = []
    for pair in report.pairs:
        outputs = []
        for out in pair.outputs:
            metrics = out.metrics.to_json() if out.metrics else {}
            hist = None
            if out.histogram is not None:
                hist = plots.error_histogram(
                    list(out.histogram.edges),
                    list(out.histogram.counts),
                    out.histogram.zeros,
                    out.bound,
                    title=f"{out.name}: |{pair.actual} - {pair.expected}|",
                )
            outputs.append({"out": out, "metrics": metrics, "histogram": hist})
        pairs.append({"pair": pair, "outputs": outputs})
    return pairs


def _max_abs_by_output(report: Any) -> dict[str, dict[str, tuple[float | None, float | None]]]:
    """Per output: every pair's max abs difference next to its bound."""
    by_output: dict[str, dict[str, tuple[float | None, float | None]]] = {}
    for pair in report.pairs:
        for out in pair.outputs:
            if out.metrics is not None:
                by_output.setdefault(out.name, {})[pair.key] = (out.metrics.max_abs, out.bound)
    return by_output


def _scatters(report: Any) -> list[dict[str, Any]]:
    """Per output: difference against value, every pair's sample in one plot."""
    scatters = []
    for name in _max_abs_by_output(report):
        series, bounds = {}, {}
        for pair in report.pairs:
            for out in pair.outputs:
                if out.name == name and out.sample is not None:
                    series[pair.key] = out.sample
                    bounds[pair.key] = out.bound
        if series:
            scatters.append(
                {
                    "output": name,
                    "pairs": list(series),
                    "points": sum(len(e) for e, _ in series.values()),
                    "svg": plots.error_vs_value(
                        series, bounds, title=f"{name}: difference against value"
                    ),
                }
            )
    return scatters


def _summary_plots(report: Any) -> list[dict[str, Any]]:
    """Per output: each pair's max abs difference as a bar, its bound as a line."""
    summary_plots = []
    for name, per_pair in _max_abs_by_output(report).items():
        keys = list(per_pair)
        summary_plots.append(
            {
                "output": name,
                "pairs": keys,
                "svg": plots.bars(
                    keys,
                    {"max abs": [per_pair[k][0] for k in keys]},
                    lines={"bound": [per_pair[k][1] for k in keys]},
                    ylabel="max |difference|",
                    log=True,
                    title=f"{name}: max |difference| and bound",
                ),
            }
        )
    return summary_plots


def _runner_rows(report: Any) -> list[dict[str, Any]]:
    """One row per runner: what executed, its mean inference time, its notes."""
    runners = []
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
        runners.append(
            {"r": r, "what": what, "mean": mean, "notes": "; ".join([*r.notes, r.error or ""])}
        )
    return runners


def _localization(loc: Any) -> dict[str, Any] | None:
    """The localization's error-along-the-graph plot, when it ran."""
    if loc is None or loc.unavailable:
        return None
    ops = [op for op in loc.ops if op.isolated is not None or op.accumulated is not None]
    return {
        "loc": loc,
        "ops": len(ops),
        "svg": plots.error_along_graph(
            [op.op_index for op in ops],
            [op.isolated.score if op.isolated else None for op in ops],
            [op.accumulated.score if op.accumulated else None for op in ops],
            loc.threshold,
            first=loc.first_divergent.op_index if loc.first_divergent else None,
            culprits=[op.op_index for op in loc.culprits],
        )
        if ops
        else None,
    }


# --- regress -------------------------------------------------------------------------------------


def _baseline_residency(baseline: str) -> dict[str, Any] | None:
    try:
        manifest = json.loads((Path(baseline) / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    return manifest.get("residency")


def regress_context(report: Any) -> dict[str, Any]:
    models = []
    for m in report.models:
        outputs = [c for c in m.cases if c.kind == "output"]
        residency = [c for c in m.cases if c.kind == "residency"]
        latency = [c for c in m.cases if c.kind == "latency"]
        rows = []
        for c in outputs:
            metrics = (c.details or {}).get("metrics") or {}
            bound = (c.details or {}).get("bound")
            rows.append({"c": c, "max_abs": metrics.get("max_abs"), "bound": bound})
        measured = [r for r in rows if r["max_abs"] is not None]
        out_plot = (
            plots.bars(
                [r["c"].name for r in measured],
                {"max abs vs baseline": [r["max_abs"] for r in measured]},
                lines={"bound": [r["bound"] for r in measured]},
                ylabel="max |now - baseline|",
                log=True,
            )
            if measured
            else None
        )
        timed = [c for c in latency if c.details.get("median_seconds") is not None]
        lat_plot = (
            plots.bars(
                [c.runner or c.name for c in timed],
                {
                    "baseline median": [c.details["baseline_median_seconds"] * 1e3 for c in timed],
                    "now median": [c.details["median_seconds"] * 1e3 for c in timed],
                },
                lines={
                    "budget": [
                        c.details["baseline_median_seconds"] * 1e3 * c.details["budget"]
                        for c in timed
                    ]
                },
                ylabel="median inference (ms)",
            )
            if timed
            else None
        )
        before = _baseline_residency(m.baseline)
        static_before = (before or {}).get("static") or {}
        models.append(
            {
                "m": m,
                "counts": m.to_json()["counts"],
                "rows": rows,
                "residency": residency,
                "static_before": static_before,
                "latency": latency,
                "runtime": [c for c in m.cases if c.kind == "runtime"],
                "out_plot": out_plot,
                "lat_plot": lat_plot,
            }
        )
    from tflkit.report.regress_report import build_matrix, cell_text

    matrix = build_matrix(report)
    return {
        "matrix": matrix,
        "cell_text": cell_text,
        "title": "tflkit regress check"
        + (f": {Path(report.models[0].model).name}" if len(report.models) == 1 else ""),
        "report": report,
        "verdict": report.verdict,
        "verdict_text": report.verdict,
        "models": models,
    }


def _num(value: Any, unit: str = "") -> str:
    return num(value, unit)
