"""The rewrite report of one :class:`~tflkit.rewriter.run.RewriteOutcome`: what fired where,
histograms, residency before and after (static, and probed when given), verification."""

from __future__ import annotations

from typing import Any

from tflkit import ir
from tflkit.compat.check import check_report
from tflkit.gpu.probe import ProbeResult
from tflkit.jsonable import plain
from tflkit.report.rewrite_report import Residency, RewriteReport, StaticResidency
from tflkit.rewriter.rules import catalog
from tflkit.rewriter.run import RewriteOutcome, histogram

#: ``reason`` of a report with nothing written because nothing changed.
NOTHING_TO_DO = "nothing to do: no rule fired and no shape changed"


def _reason(outcome: RewriteOutcome, written: bool) -> str | None:
    """Why the output was not written (None when it was)."""
    if written:
        return None
    if not outcome.changed:
        return NOTHING_TO_DO
    problem = outcome.verification.problem if outcome.verification is not None else None
    return f"verification failed: {problem}" if problem else "verification failed"


def build_report(
    outcome: RewriteOutcome,
    model_path: str,
    output_path: str,
    written: bool,
    *,
    probe_before: ProbeResult | None = None,
    probe_after: ProbeResult | None = None,
) -> RewriteReport:
    original = ir.load(outcome.original)
    before_hist = histogram(original)
    after_hist = histogram(outcome.model)
    notes = []
    if outcome.dynamic_advice:
        left = outcome.dynamic_inputs
        names = (
            ", ".join(left) if len(left) <= 3 else f"{', '.join(left[:2])} and {len(left) - 2} more"
        )
        notes.append(
            f"dynamic dimensions left in input{'s' if len(left) > 1 else ''} "
            f"{names} (the GPU delegate needs static shapes): pass {outcome.dynamic_advice}"
        )
    if not outcome.gated_by_checker:
        notes.append(
            "the static GPU checker did not choose the ops (rules forced with --rule, or no "
            "checker): each rule's own pattern did"
        )
    check_before, check_after = check_report(original), check_report(outcome.model)
    v = outcome.verification
    passes = catalog().model_passes()
    records: dict[str, list[dict[str, Any]]] = {p.report_key: [] for p in passes}
    records.update(outcome.rule_records)
    lines = [
        line
        for model_pass in passes
        if model_pass.report_key in outcome.rule_records
        for line in model_pass.report_lines(outcome.rule_records[model_pass.report_key])
    ]
    return RewriteReport(
        model=model_path,
        output=output_path,
        written=written,
        rules=outcome.rules_used,
        gated_by_checker=outcome.gated_by_checker,
        fired=plain(outcome.passes.fired),
        not_fired=plain(outcome.passes.skipped),
        converged=outcome.passes.converged,
        contract=outcome.contract.describe(),
        verification=None if v is None else v.to_json(),
        histogram_before=before_hist,
        histogram_after=after_hist,
        shape_fixes=outcome.shape_fixes,
        dynamic_inputs=outcome.dynamic_inputs,
        default_shapes=outcome.default_shapes,
        reason=_reason(outcome, written),
        static_before=StaticResidency.from_check(check_before),
        static_after=StaticResidency.from_check(check_after),
        probe_before=None
        if probe_before is None
        else Residency.from_probe(probe_before, len(original.main.ops)),
        probe_after=None
        if probe_after is None
        else Residency.from_probe(probe_after, len(outcome.model.main.ops)),
        notes=notes,
        rule_records=records,
        rule_lines=lines,
        checks=(check_before, check_after),
        models=(original, outcome.model),
    )
