"""The cases of a check run with another runtime (``--runtime``): what each runner did there.

Per runner a ``runtime`` case holds what the runtime ran (status, GPU residency, median
inference time) and fails when an op the baseline ran on the GPU went to the CPU. A runner the
runtime cannot run at all (the GPU runners of tflite-runtime, which has no GPU accelerator API)
makes its output cases "skipped" with the runtime's reason, never a regression nor a crash.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from tflkit.delegates.base import on_gpu
from tflkit.report.regress_report import Case

__all__ = ["runtime_cases"]


def _fallback(executed: Mapping[str, Any]) -> list[str]:
    return sorted({f.get("op", "?") for f in executed.get("cpu_fallback") or []})


def _details(run: Any) -> dict[str, Any]:
    executed = run.executed or {}
    gpu = executed.get("ops_delegated")
    total = executed.get("ops_total")
    return {
        "status": run.status,
        "error": run.error,
        "infer_median_seconds": statistics.median(run.infer_seconds) if run.infer_seconds else None,
        "ops_on_gpu": gpu,
        "ops_total": total,
        "fully_accelerated": executed.get("fully_accelerated"),
        "cpu_fallback": _fallback(executed),
    }


def _case(run: Any, recorded: Mapping[str, Any], unsupported: bool) -> Case:
    details = _details(run)
    case = Case(f"runtime {run.runner}", "runtime", "pass", runner=run.runner, details=details)
    if not run.ok:
        case.status = "skipped" if unsupported else "fail"
        case.message = f"{run.runner} {run.status}: {run.error}"
        return case
    before = set(_fallback(recorded.get("executed") or {}))
    compared = on_gpu(run.runner) and recorded.get("status") == "ok"
    left = sorted(set(details["cpu_fallback"]) - before) if compared else []
    details["left_gpu"] = left
    if details["ops_on_gpu"] is not None and on_gpu(run.runner):
        case.message = f"{details['ops_on_gpu']}/{details['ops_total']} ops on the GPU"
    if left:
        case.status = "fail"
        case.message += f"; left the GPU: {', '.join(left)}"
    return case


def runtime_cases(
    output_cases: Sequence[Case], runs: Sequence[Any], manifest: Mapping[str, Any], runtime: Any
) -> list[Case]:
    """``output_cases`` (unsupported runners skipped, with the reason) then one runtime case per
    run."""
    from tflkit.harness.device_runs import RUNNER_OF

    portable = set(RUNNER_OF.values())
    unsupported = {
        r.runner: r.error
        for r in runs
        if r.status == "unavailable" and (not runtime.gpu or r.runner not in portable)
    }
    unreadable = {r.runner: r.unreadable for r in runs if r.ok}
    for case in output_cases:
        if case.runner in unsupported:
            case.status, case.message = "skipped", f"{case.runner}: {unsupported[case.runner]}"
        why = unreadable.get(case.runner or "", {}).get(case.output or "")
        if case.status == "fail" and why:  # the harness cannot read it back: nothing to compare
            case.status = "skipped"
            case.message = f"{case.runner} output {case.output} not compared: {why}"
    recorded = manifest["runners"]
    return [
        *output_cases,
        *(_case(r, recorded.get(r.runner, {}), r.runner in unsupported) for r in runs),
    ]
