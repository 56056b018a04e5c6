"""GPU residency of a model as a baseline stores it, and the comparison of two snapshots.

A snapshot comes from ``tflkit.rewriter.advice.check_path``: the static verdict (ops on the GPU,
GPU partitions, every op left on the CPU with its reasons) and, when probed, what the real
accelerator did (its status, adapter, ops on GPU/CPU, the ops it rejected and why). Residency
regresses when more ops run on the CPU, when the GPU takes the graph in more partitions, or when
a model that compiled on the accelerator no longer does; an op that falls back is named with the
reason the checker or the accelerator gave.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from tflkit.report.check_report import CheckReport

__all__ = ["compare_residency", "snapshot"]


def _reasons(op: Any, probed: bool) -> list[str]:
    if probed and op.probe_reasons:
        return list(op.probe_reasons)
    return [f"{r.code}: {r.message}" for r in op.reasons] or [op.why]


def _from_report(report: CheckReport) -> dict[str, Any]:
    static = {
        "target": report.target,
        "compiles": report.compiles,
        "total_ops": report.total_ops,
        "gpu_ops": report.gpu_ops,
        "cpu_ops": report.cpu_ops,
        "gpu_partitions": report.gpu_partitions,
        "ops_on_cpu": [
            {
                "subgraph": op.subgraph,
                "index": op.index,
                "type": op.type,
                "reasons": _reasons(op, False),
            }
            for op in report.ops
            if not op.on_gpu
        ],
    }
    probe = None
    if report.probe is not None:
        p = report.probe
        probe = {
            "status": p.status,
            "adapter": p.adapter,
            "software_gpu": p.software_gpu,
            "ops_on_gpu": p.ops_on_gpu,
            "ops_on_cpu": p.ops_on_cpu,
            "crash": (
                {
                    "op_index": p.crash.op_index,
                    "op_type": p.crash.op_type,
                    "message": p.crash.message,
                }
                if p.crash
                else None
            ),
            "error": p.error,
            "rejected": [
                {
                    "subgraph": op.subgraph,
                    "index": op.index,
                    "type": op.type,
                    "reasons": _reasons(op, True),
                }
                for op in report.ops
                if op.probe_on_gpu is False
            ],
        }
    return {"static": static, "probe": probe}


def snapshot(
    path: str | Path, *, target: str | None = None, probe: bool = True, timeout: float = 120.0
) -> dict[str, Any]:
    """The residency of the model at ``path`` (static, and probed on the real GPU if asked)."""
    from tflkit.compat.targets import DEFAULT_TARGET
    from tflkit.rewriter.advice import check_path

    report, _ = check_path(
        path, target=target or DEFAULT_TARGET, with_probe=probe, probe_timeout=timeout
    )
    return _from_report(report)


def _fallback_lines(now: list[dict[str, Any]], before: list[dict[str, Any]]) -> list[str]:
    """Each op that runs on the CPU now and had no CPU counterpart of its type before."""
    extra = Counter(op["type"] for op in now) - Counter(op["type"] for op in before)
    lines = []
    for op in now:
        if extra.get(op["type"], 0) > 0:
            extra[op["type"]] -= 1
            lines.append(f"{op['type']} (op {op['index']}): {'; '.join(op['reasons'])}")
    return lines


def compare_static(now: dict[str, Any], before: dict[str, Any]) -> tuple[bool, str]:
    """(regressed, message) for the static verdicts."""
    if before["compiles"] and not now["compiles"]:
        return True, "the static checker says the GPU no longer compiles the model"
    problems = []
    if now["cpu_ops"] > before["cpu_ops"]:
        problems.append(
            f"{now['cpu_ops']} ops fall back to the CPU (baseline {before['cpu_ops']}, "
            f"{now['gpu_ops']}/{now['total_ops']} on the GPU)"
        )
    if now["gpu_partitions"] > before["gpu_partitions"]:
        problems.append(
            f"the GPU takes the graph in {now['gpu_partitions']} partitions "
            f"(baseline {before['gpu_partitions']})"
        )
    if not problems:
        return False, (
            f"{now['gpu_ops']}/{now['total_ops']} ops on the GPU in {now['gpu_partitions']} "
            f"partition(s) (baseline {before['gpu_ops']}/{before['total_ops']})"
        )
    lines = _fallback_lines(now["ops_on_cpu"], before["ops_on_cpu"])
    return True, "; ".join(problems) + "".join(f"\n  now on the CPU: {line}" for line in lines)


def compare_probe(now: dict[str, Any] | None, before: dict[str, Any]) -> tuple[bool, str]:
    """(regressed, message) for what the real accelerator did."""
    if now is None:
        return False, "not compared: this check did not probe the GPU accelerator (--no-probe)"
    if before["status"] == "ok" and now["status"] != "ok":
        what = now["status"]
        if now.get("crash"):
            crash = now["crash"]
            what += f" at {crash['op_type']} (op {crash['op_index']}): {crash['message']}"
        elif now.get("error"):
            what += f": {now['error']}"
        return True, f"the GPU accelerator no longer compiles the model ({what})"
    if now["status"] != "ok":
        return False, f"not compared: the accelerator reports {now['status']} (as in the baseline)"
    # The accelerator prints no summary line when it takes every op: None means "all on GPU".
    cpu_now, cpu_before = now["ops_on_cpu"] or 0, before["ops_on_cpu"] or 0
    gpu_now, gpu_before = _count(now["ops_on_gpu"]), _count(before["ops_on_gpu"])
    if cpu_now > cpu_before:
        lines = _fallback_lines(now["rejected"], before["rejected"])
        return True, (
            f"the accelerator runs {cpu_now} ops on the CPU (baseline {cpu_before}) and "
            f"{gpu_now} on the GPU (baseline {gpu_before})"
            + "".join(f"\n  falls back: {line}" for line in lines)
        )
    return False, (
        f"{gpu_now} ops on the GPU, {cpu_now} on the CPU (baseline {gpu_before}/{cpu_before}), "
        f"adapter {now['adapter']}"
    )


def _count(ops: int | None) -> str:
    return "all" if ops is None else str(ops)


def compare_residency(
    now: dict[str, Any], before: dict[str, Any]
) -> list[tuple[str, bool | None, str]]:
    """[(case name, regressed or None when not compared, message)] for static and probe."""
    cases: list[tuple[str, bool | None, str]] = []
    regressed, message = compare_static(now["static"], before["static"])
    cases.append(("residency (static)", regressed, message))
    if before.get("probe") is not None:
        regressed, message = compare_probe(now.get("probe"), before["probe"])
        skipped = not regressed and message.startswith("not compared")
        cases.append(("residency (GPU probe)", None if skipped else regressed, message))
    return cases
