"""``convert --gpu-ready``: convert, check, rewrite what the GPU rejects, validate, one verdict.

Every GPU run happens in child processes (``validate``'s runners); TensorFlow only in the
converter's child. The final model is ``output``; when a rewrite changed it, the converter's
own output is kept as ``NAME.converted.tflite``. The whole story is written to
``NAME.convert-report.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from tflkit import ir
from tflkit.compat.check import check_report
from tflkit.delegates.base import RECORD_DEFAULT, find_spec, on_gpu
from tflkit.fsio import write_atomic
from tflkit.gpu.buffers import BINDING_REFUSED
from tflkit.report.check_report import CheckReport
from tflkit.report.convert_report import ConvertReport, PipelineStage, write_json
from tflkit.report.progress import Progress, quiet, ticking
from tflkit.report.validate_report import ValidateReport
from tflkit.rewriter.advice import Advisor
from tflkit.rewriter.run import rewrite_model
from tflkit.validation.pipeline import ValidateOptions, validate

from .api import convert
from .base import ConvertOptions
from .provenance import METADATA_NAME, output_paths, read_provenance

__all__ = ["convert_gpu_ready", "report_path_for"]


def report_path_for(output: Path) -> Path:
    return Path(f"{output.with_suffix('')}.convert-report.json")


def _check(data: bytes, path: Path) -> CheckReport:
    return check_report(
        ir.load(data),
        path=str(path),
        sha256=hashlib.sha256(data).hexdigest(),
        advise=Advisor(),
    )


def _check_stage(name: str, report: CheckReport) -> PipelineStage:
    return PipelineStage(
        name,
        "ok" if report.gpu_ready else "fallback",
        report.summary,
        {
            "gpu_ops": report.gpu_ops,
            "total_ops": report.total_ops,
            "cpu_ops": [
                {"index": op.index, "type": op.type, "reasons": [r.message for r in op.reasons]}
                for op in report.ops
                if not op.on_gpu
            ],
        },
    )


def _rewrite(report: ConvertReport, output: Path, data: bytes) -> tuple[bytes, PipelineStage]:
    outcome = rewrite_model(data)
    fired = [f"{f.rule} on {f.op_type}#{f.op_index}" for f in outcome.passes.fired]
    verification = outcome.verification
    details = {"fired": fired, "verification": verification.to_json() if verification else None}
    if not outcome.changed:
        return data, PipelineStage("rewrite", "skipped", "no rule applies", details)
    if verification is not None and not verification.ok:
        why = f"not applied: {verification.problem}"
        return data, PipelineStage("rewrite", "refused", why, details)
    model = outcome.model
    record = read_provenance(model) or {}
    record["rewrites"] = fired
    model.set_metadata(METADATA_NAME, json.dumps(record, sort_keys=True).encode())
    converted = Path(f"{output.with_suffix('')}.converted.tflite")
    os.replace(output, converted)
    ir.save(model, output)
    _, sidecar, _ = output_paths(output)
    if sidecar.is_file():
        side = json.loads(sidecar.read_text())
        side["rewrites"] = fired
        side["output_sha256"] = hashlib.sha256(output.read_bytes()).hexdigest()
        side["converter_output"] = converted.name
        write_atomic(sidecar, json.dumps(side, indent=2, sort_keys=True) + "\n")
    report.notes.append(f"the converter's output before the rewrite is kept as {converted}")
    summary = (
        f"{len(fired)} rewrite(s): " + ", ".join(fired[:5]) + (" ..." if len(fired) > 5 else "")
    )
    return output.read_bytes(), PipelineStage("rewrite", "ok", summary, details)


def _validate_line(checked: ValidateReport) -> str:
    """The validate stage's figures beside its verdict (the status): the comparisons that
    failed, with their bounds, when any did; the findings when nothing was compared; else
    each pair's largest difference."""
    failed = [
        f"{pair.key} {o.name}: max abs {o.metrics.max_abs:.3g} over its bound {o.bound:.3g}"
        if o.metrics is not None and o.bound is not None and o.metrics.max_abs > o.bound
        else f"{pair.key} {o.name}: {'; '.join(o.reasons) or 'fail'}"
        for pair in checked.pairs
        for o in pair.outputs
        if o.verdict == "fail"
    ]
    if failed:
        return "; ".join(failed)
    if checked.verdict != "pass" and checked.findings:
        return "; ".join(checked.findings[:2])
    largest = {
        pair.key: max((o.metrics.max_abs if o.metrics else 0.0) for o in pair.outputs)
        for pair in checked.pairs
        if pair.outputs
    }
    return "; ".join(f"{key} max abs {value:.3g}" for key, value in largest.items())


def convert_gpu_ready(
    source: str | os.PathLike[str],
    output: str | os.PathLike[str],
    options: ConvertOptions | None = None,
    *,
    timeout: float = 300.0,
    report_path: str | os.PathLike[str] | None = None,
    progress: Progress = quiet,
) -> ConvertReport:
    """Convert, then make and prove the model GPU-ready; writes the JSON report. Each step
    after the conversion says it started and, every few seconds, that it still runs."""
    out = Path(output)
    progress(f"converting {Path(source).name}")
    report = convert(source, out, options)
    data = out.read_bytes()
    with ticking(f"checking {out.name} for the GPU", progress):
        before = _check(data, out)
    report.stages.append(_check_stage("check", before))
    if not before.gpu_ready:
        with ticking("rewriting what the GPU rejects (verified on the CPU)", progress):
            data, stage = _rewrite(report, out, data)
        report.stages.append(stage)
        if stage.status == "ok":
            after = _check(data, out)
            report.stages.append(_check_stage("check after rewrite", after))
            before = after
    runners = list(RECORD_DEFAULT)  # the CPU and the GPU in both precisions
    reference = Path(report.reference_file) if report.reference_file else None
    with ticking(f"validating on {', '.join(runners)} against the source", progress):
        checked = validate(
            out, ValidateOptions(runners=runners, reference=reference, timeout=timeout)
        )
    gpu = find_spec(device="gpu", precision="fp16").name
    fp16 = next((r for r in checked.runners if r.runner == gpu), None)
    accelerated = bool(fp16 and fp16.ok and fp16.executed.get("fully_accelerated"))
    pairs = {
        p.key: {
            o.name: {"verdict": o.verdict, "max_abs": o.metrics.max_abs if o.metrics else None}
            for o in p.outputs
        }
        for p in checked.pairs
    }
    report.stages.append(
        PipelineStage(
            "validate",
            checked.verdict,
            _validate_line(checked),
            {"pairs": pairs, "findings": checked.findings},
        )
    )
    if before.compiles:
        still = [f"{op.type}#{op.index}: {op.why}" for op in before.ops if not op.on_gpu]
    else:  # the delegate refuses the whole graph: the model-level issues are the reason
        still = [i.message for i in before.issues if i.fatal] or [before.summary]
    if fp16 is not None and fp16.ok and not accelerated:
        still += [
            f"{r['op']} (accelerator): {r['reason']}" for r in fp16.executed.get("cpu_fallback", [])
        ]
    refused = [r for r in checked.runners if r.status == BINDING_REFUSED]  # not the GPU's doing
    gpu_failed = [r for r in checked.runners if on_gpu(r.runner) and not r.ok and r not in refused]
    still += [f"{r.runner} {r.status}: {r.error}" for r in gpu_failed]
    report.still_on_cpu = list(dict.fromkeys(still))
    numbers_fail = any(o["verdict"] == "fail" for outs in pairs.values() for o in outs.values())
    if before.gpu_ready and accelerated and checked.verdict == "pass":
        report.verdict = "gpu-ready"
    elif numbers_fail:
        report.verdict = "validation-failed"
    elif refused:
        report.verdict = "unproven"
    elif len(gpu_failed) == len([n for n in runners if on_gpu(n)]):
        report.verdict = "cpu-only"
    else:
        report.verdict = "partial-gpu"
    target = Path(report_path) if report_path else report_path_for(out)
    report.report_path = str(target)
    write_json(report, target)
    return report
