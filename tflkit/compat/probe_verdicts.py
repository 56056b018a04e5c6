"""What the real accelerator said, set beside a check report: per-op disagreements with the
static verdicts, the crash site and its fix, and the probes of each signature on its own.

``check_report`` (``compat/check.py``) makes the static report; ``attach_probe`` adds one
``tflkit.gpu.probe`` result to it, ``attach_signature_probes`` the per-signature ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tflkit import ir
from tflkit.compat import static
from tflkit.compat.check import Advise
from tflkit.compat.reasons import Reason, Rejection
from tflkit.gpu.probe_result import COMPILED_STATUSES
from tflkit.ir.composites import composite_of
from tflkit.report.check_report import CheckReport, FixHint, ReasonInfo
from tflkit.report.probe_report import CrashInfo, Disagreement, ProbeInfo, SignatureProbe

if TYPE_CHECKING:
    from tflkit.gpu.probe import ProbeResult


def claimed_verdicts(report: CheckReport) -> list[static.OpVerdict]:
    """The report's per-op verdicts as a claim about placement: the delegate takes the op
    (``ok``). When the table says GPU compilation fails for the whole model, it claims that no
    op runs on the GPU, and the fatal rejection is the reason for each."""
    fatal = [
        Rejection(Reason(i.code), i.message, i.op_index, fatal=True)
        for i in report.issues
        if i.fatal
    ][:1]
    claims = []
    for op in report.ops:
        rejections = [
            Rejection(Reason(r.code), r.message, op.index, fatal=r.fatal) for r in op.reasons
        ]
        ok = op.supported and report.compiles
        if op.supported and not report.compiles:
            rejections = fatal
        claims.append(
            static.OpVerdict(op.subgraph, op.index, op.type, ok, tuple(rejections), op.role)
        )
    return claims


def probe_op_counts(result: ProbeResult, main_ops: int) -> tuple[int | None, int | None]:
    """Main-graph ops on the GPU and on the CPU per the accelerator. It prints its summary line
    only when it leaves ops on the CPU; a model it compiled with no rejection at all ran every
    op on the GPU (``main_ops``, 0). None where nothing is known: not compiled, or a log that
    rejects ops without a count."""
    log = result.log
    if log.ops_on_gpu is not None or log.ops_on_cpu is not None:
        return log.ops_on_gpu, log.ops_on_cpu
    if result.status in COMPILED_STATUSES and result.compiled and not log.rejections:
        return main_ops, 0
    return None, None


def _probe_error(result: ProbeResult) -> str | None:
    """The accelerator's error, with the op the runtime names when a kernel failed to prepare
    (the exception only says "Failed to modify graph with delegate")."""
    culprit = next((e for e in result.log.errors if "failed to prepare" in e), None)
    if result.error and culprit and culprit not in result.error:
        return f"{result.error}: {culprit}"
    return result.error


def _crash_fix(
    report: CheckReport, model: ir.Model, crash: CrashInfo, advise: Advise | None
) -> FixHint | None:
    """The rewrite that fixes the main-graph op the probe's crash is pinned on (a CRASH reason
    for ``advise``), set as that op's fix unless it has one; None when no rule does. The default
    rewrite runs behind the static verdicts, which need not foresee the crash: unless the table
    rejects the op too, the rule is named for ``--rule``."""
    index = crash.op_index
    if advise is None or index is None or not 0 <= index < len(model.main.ops):
        return None
    message = f"the GPU accelerator crashed compiling it ({crash.message or 'no message'})"
    hint = advise(model.main.ops[index], [ReasonInfo(str(Reason.CRASH), message, True)], "")
    if hint is None or hint.rule is None:
        return None
    entry = next((o for o in report.ops if (o.subgraph, o.index) == (0, index)), None)
    if entry is None or not entry.reasons:
        hint = FixHint(hint.rule, hint.summary, "opt_in_rule")
    if entry is not None and entry.fix is None:
        entry.fix = hint
    return hint


def model_agrees(compiles: bool, result: ProbeResult) -> bool | None:
    """Whether the static "compiles" claim matches the accelerator: a crash while compiling is
    a failure to compile (the table predicts those as CRASH); None when it hung or the worker
    never started, which says nothing about the model."""
    if result.status in ("timeout", "worker_error"):
        return None
    compiled = result.status in COMPILED_STATUSES and result.compiled
    return compiled == compiles


def attach_probe(
    report: CheckReport, model: ir.Model, result: ProbeResult, advise: Advise | None = None
) -> None:
    """Add what the real accelerator said, per op, and where it disagrees with the table;
    ``advise`` names the rewrite that fixes the op a crash is pinned on (:func:`_crash_fix`)."""
    from tflkit.compat import agreement

    claims = claimed_verdicts(report)
    probed = agreement.probe_op_verdicts(model, result, claims)
    by_key = {(op.subgraph, op.index): op for op in report.ops}
    for key, verdict in probed.items():
        op = by_key.get(key)
        if op is not None:
            op.probe_on_gpu = verdict.on_gpu
            op.probe_reasons = list(verdict.reasons)
    compared = agreement.compare(claims, probed)
    adapter = result.adapter
    crash = crash_info(model.main.ops, result)
    counts = probe_op_counts(result, len(model.main.ops))
    report.probe = ProbeInfo(
        status=result.status,
        adapter=adapter.name if adapter else None,
        software_gpu=adapter.is_software if adapter else None,
        ops_on_gpu=counts[0],
        ops_on_cpu=counts[1],
        crash=crash,
        error=_probe_error(result),
        from_cache=result.from_cache,
        compile_seconds=result.compile_seconds,
        agree=compared.agree,
        compared=compared.total,
        disagreements=[
            Disagreement(
                d.subgraph,
                d.op_index,
                d.op_type,
                d.static_ok,
                d.probe_on_gpu,
                list(d.static_reasons),
                list(d.probe_reasons),
            )
            for d in compared.disagreements
        ],
        compiled=None if result.status in ("timeout", "worker_error") else result.compiled,
        model_agrees=model_agrees(report.compiles, result),
        notes=list(probed.notes),
    )
    if crash is not None:
        where = f" at {crash.op_type} (op {crash.op_index})" if crash.op_type else ""
        report.summary = f"the GPU accelerator crashes compiling this model{where}"
        fix = _crash_fix(report, model, crash, advise)
        if fix is not None:
            report.summary += f"; fix: {fix.text}"
        report.gpu_ready = False
        return
    on_cpu = sum(1 for v in probed.values() if v.on_gpu is False)
    if on_cpu and report.gpu_ready:
        report.gpu_ready = False
        report.summary += f"; but the accelerator keeps {on_cpu} ops on CPU"
    elif result.status != "ok" and report.gpu_ready:
        report.gpu_ready = False
        report.summary += f"; but the accelerator failed: {result.status}"
    elif report.probe.model_agrees is False and not report.compiles:
        report.summary += "; but the accelerator compiles it (a wrong static verdict)"
    report.probe.warnings = list(result.log.shape_mismatches)
    if report.probe.warnings and report.gpu_ready:
        report.summary += f"; but {MISMATCH_HINT}"


#: What a ``Shape mismatch in GpuModelBuilder`` warning means for the user.
MISMATCH_HINT = (
    "the accelerator warned that it computes an output at another shape than the model's (a "
    "sign of wrong values): compare them with `tflkit validate`"
)


# --- the probe, per signature ---------------------------------------------------------------------


def crash_info(ops: Sequence[ir.Op], result: ProbeResult) -> CrashInfo | None:
    """The crash of a probe, its op named (``STABLEHLO_COMPOSITE odml.rms_norm``) when the
    bisection pinned it on one of ``ops``; None when the accelerator did not crash."""
    if not result.crashed:
        return None
    site = result.crash_site
    op_type = site.op_type if site else None
    if site is not None and 0 <= site.op_index < len(ops):
        composite = composite_of(ops[site.op_index])
        if composite is not None:
            op_type = f"{site.op_type} {composite.name}"
    return CrashInfo(
        op_index=site.op_index if site else None,
        op_type=op_type,
        message=result.log.fatal or result.exit_description,
    )


def probe_each_signature(
    model: ir.Model, *, timeout: float = 120.0, cache_dir: str | Path | None = None
) -> list[SignatureProbe]:
    """Every signature of a multi-signature ``model`` compiled alone on the accelerator
    (:func:`tflkit.gpu.probe.probe_signatures`, decode first), a crash bisected within that
    signature's own subgraph; [] for a model with fewer than two signatures."""
    from tflkit.gpu.probe import probe_signatures

    found = probe_signatures(model, timeout=timeout, cache_dir=cache_dir)
    out = []
    for key, result in found.items():
        graph = model.signature(key).subgraph
        on_gpu, on_cpu = probe_op_counts(result, len(graph.ops))
        out.append(
            SignatureProbe(
                signature=key,
                subgraph=graph.index,
                status=result.status,
                total_ops=len(graph.ops),
                ops_on_gpu=on_gpu,
                ops_on_cpu=on_cpu,
                cpu_op_types=sorted({r.op_type for r in result.log.rejections}),
                crash=crash_info(graph.ops, result),
                error=_probe_error(result),
                from_cache=result.from_cache,
            )
        )
    return out


def attach_signature_probes(report: CheckReport, probes: Sequence[SignatureProbe]) -> None:
    """Fold the per-signature probes into the verdict: a signature that crashes or fails on its
    own makes the model not GPU-ready, and the summary says which (the whole-model probe may
    have died, or bisected, in another signature)."""
    if report.probe is not None:
        report.probe.signatures = list(probes)
    bad = [p for p in probes if p.crash is not None or p.status != "ok"]
    if not bad:
        return
    report.gpu_ready = False
    said = "; ".join(
        f"{p.signature} crashes at {p.crash.op_type} (op {p.crash.op_index})"
        if p.crash is not None and p.crash.op_type
        else f"{p.signature}: {p.status}"
        for p in bad
    )
    report.summary += f"; per signature: {said}"
