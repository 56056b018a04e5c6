"""``check``: what the GPU delegate will run and why, statically and (``probe=True``) for real.

Static verdicts per op come from the target's constraint table (``static``); the partition
simulation turns them into what the delegate takes; the probe compiles the model on the real
accelerator in a subprocess and every op where the two disagree is listed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from tflkit import ir
from tflkit.compat import agreement, partition, static
from tflkit.compat.probe import ProbeResult, probe
from tflkit.compat.targets import DEFAULT_TARGET, get_target
from tflkit.report.check_report import (
    CheckReport,
    CrashInfo,
    Disagreement,
    FixHint,
    OpCheck,
    PartitionInfo,
    ProbeInfo,
    ReasonInfo,
    TransferInfo,
)
from tflkit.rewriter.run import catalog

#: The default for ``max_partitions``: whatever the target's delegate does by default.
TARGET_DEFAULT = -1


def check_path(
    path: str | Path,
    *,
    target: str = DEFAULT_TARGET,
    max_partitions: int | None = TARGET_DEFAULT,
    with_probe: bool = False,
    probe_timeout: float = 120.0,
    cache_dir: str | Path | None = None,
) -> tuple[CheckReport, ir.Model]:
    """Check the model at ``path``; returns the report and the loaded model."""
    data, label = ir.serde.read_model_bytes(path)
    model = ir.load(data, label=label)
    report = check_model(
        model,
        target=target,
        max_partitions=max_partitions,
        path=label,
        sha256=hashlib.sha256(data).hexdigest(),
    )
    if with_probe:
        result = probe(bytes(data), timeout=probe_timeout, cache_dir=cache_dir)
        attach_probe(report, model, result)
    return report, model


def check(
    model: str | Path,
    *,
    target: str = DEFAULT_TARGET,
    probe: bool = False,
    max_partitions: int | None = TARGET_DEFAULT,
) -> CheckReport:
    """What the GPU delegate of ``target`` will run of ``model``, and why; ``probe`` asks the
    real accelerator too. ``max_partitions`` -1 keeps the target's default, None takes all."""
    report, _ = check_path(
        Path(model), target=target, with_probe=probe, max_partitions=max_partitions
    )
    return report


def check_model(
    model: ir.Model,
    *,
    target: str = DEFAULT_TARGET,
    max_partitions: int | None = TARGET_DEFAULT,
    path: str = "<model>",
    sha256: str = "",
) -> CheckReport:
    """The static report: verdicts, partitions, transfers, FLOP share, fix hints."""
    spec = get_target(target)
    limit = spec.max_partitions if max_partitions == TARGET_DEFAULT else max_partitions
    result = static.check(model, spec)
    verdicts = {(v.subgraph_index, v.op_index): v for v in result.verdicts}
    compiles = result.compiles

    ops: list[OpCheck] = []
    partitions: list[PartitionInfo] = []
    transfers: list[TransferInfo] = []
    gpu_ops = gpu_partitions = flops_total = flops_gpu = internal = io = 0
    for sg_index, subgraph in enumerate(model.subgraphs):
        if not subgraph.ops:
            continue

        def supported(op: ir.Op, sg: int = sg_index) -> bool:
            verdict = verdicts.get((sg, op.index))
            return compiles and verdict is not None and verdict.ok

        plan = partition.plan_partitions(subgraph, supported, max_partitions=limit)
        on_gpu = {i for p in plan.partitions if p.device == "gpu" for i in p.ops}
        not_taken = set(plan.dropped_ops)
        gpu_ops += plan.gpu_ops
        gpu_partitions += plan.gpu_partitions
        flops_total += plan.flops_total
        flops_gpu += plan.flops_gpu
        internal += plan.internal_transfer_bytes
        io += plan.transfer_bytes - plan.internal_transfer_bytes
        partitions += [PartitionInfo(sg_index, p.device, p.ops) for p in plan.partitions]
        transfers += [
            TransferInfo(sg_index, t.tensor, t.shape, t.dtype, t.bytes, t.direction, t.kind)
            for t in plan.transfers
        ]
        for op in subgraph.ops:
            verdict = verdicts.get((sg_index, op.index))
            reasons = [
                ReasonInfo(str(r.code), r.message, r.fatal)
                for r in (verdict.rejections if verdict else ())
            ]
            ops.append(
                OpCheck(
                    subgraph=sg_index,
                    index=op.index,
                    type=op.type,
                    version=op.version,
                    role=verdict.subgraph_role if verdict else "main",
                    supported=bool(verdict and verdict.ok),
                    on_gpu=op.index in on_gpu,
                    reasons=reasons,
                    fix=fix_hint(op, reasons) if reasons else None,
                    not_taken=op.index in not_taken,
                )
            )
    issues = [ReasonInfo(str(i.code), i.message, i.fatal) for i in result.issues]
    total = len(ops)
    report = CheckReport(
        path=path,
        sha256=sha256,
        target=spec.name,
        target_title=spec.title,
        max_partitions=limit,
        compiles=compiles,
        gpu_ready=compiles and total > 0 and gpu_ops == total,
        summary="",
        total_ops=total,
        gpu_ops=gpu_ops,
        gpu_partitions=gpu_partitions,
        flops_total=flops_total,
        flops_gpu=flops_gpu,
        internal_transfer_bytes=internal,
        io_transfer_bytes=io,
        ops=ops,
        partitions=partitions,
        transfers=transfers,
        issues=issues,
    )
    report.summary = summarize(report)
    return report


def summarize(report: CheckReport) -> str:
    """One line: GPU-ready, or how much falls back and where."""
    if not report.compiles:
        fatal = next((i.message for i in report.issues if i.fatal), "a fatal rejection")
        return f"GPU compilation fails for the whole model: {fatal}"
    if report.total_ops == 0:
        return "the model has no ops"
    if report.gpu_ready:
        return f"GPU-ready: all {report.total_ops} ops run on the GPU"
    cpu_partitions = sum(1 for p in report.partitions if p.device == "cpu")
    plural = "s" if cpu_partitions != 1 else ""
    return (
        f"{report.cpu_ops} of {report.total_ops} ops fall back to CPU "
        f"in {cpu_partitions} partition{plural}"
    )


def fix_hint(op: ir.Op, reasons: Sequence[ReasonInfo]) -> FixHint | None:
    """The first default rewrite rule that would fix ``op`` for these reasons, if any."""
    texts = [f"{r.code}: {r.message}" for r in reasons]
    for rule in catalog():
        if rule.opt_in or not rule.pattern(op) or not rule.addresses(texts):
            continue
        if rule.check(op) is None:
            return FixHint(rule.name, rule.summary)
    return None


def attach_probe(report: CheckReport, model: ir.Model, result: ProbeResult) -> None:
    """Add what the real accelerator said, per op, and where it disagrees with the table."""
    probed = agreement.probe_op_verdicts(model, result)
    by_key = {(op.subgraph, op.index): op for op in report.ops}
    for key, verdict in probed.items():
        op = by_key.get(key)
        if op is not None:
            op.probe_on_gpu = verdict.on_gpu
            op.probe_reasons = list(verdict.reasons)
    compared = agreement.compare(static.check_model(model, report.target), probed)
    adapter = result.adapter
    crash = None
    if result.crashed:
        site = result.crash_site
        crash = CrashInfo(
            op_index=site.op_index if site else None,
            op_type=site.op_type if site else None,
            message=result.log.fatal or result.exit_description,
        )
    report.probe = ProbeInfo(
        status=result.status,
        adapter=adapter.name if adapter else None,
        software_gpu=adapter.is_software if adapter else None,
        ops_on_gpu=result.log.ops_on_gpu,
        ops_on_cpu=result.log.ops_on_cpu,
        crash=crash,
        error=result.error,
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
    )
    if crash is not None:
        where = f" at {crash.op_type} (op {crash.op_index})" if crash.op_type else ""
        report.summary = f"the GPU accelerator crashes compiling this model{where}"
        report.gpu_ready = False
        return
    on_cpu = sum(1 for v in probed.values() if v.on_gpu is False)
    if on_cpu and report.gpu_ready:
        report.gpu_ready = False
        report.summary += f"; but the accelerator keeps {on_cpu} ops on CPU"
    elif result.status != "ok" and report.gpu_ready:
        report.gpu_ready = False
        report.summary += f"; but the accelerator failed: {result.status}"
