"""Runs on a device: one job per device, one :class:`RunResult` per backend it ran.

The device runs every backend of the job in one go (see :mod:`tflkit.harness`); this module only
turns a backend's record from ``result.json`` into the :class:`RunResult` every comparison reads,
named ``<runner>@<device>`` (e.g. ``gpu-fp16@adb:R58M123``), with what really executed.
"""

from __future__ import annotations

from typing import Any

from tflkit.delegates.base import RUNNER_SPECS, RunResult, harness_timings, spec_by_harness
from tflkit.delegates.device_protocol import BackendResult, DeviceResult
from tflkit.delegates.litert_js import browser_run_result
from tflkit.gpu.log import parse_gpu_log

__all__ = ["RUNNER_OF", "device_run_results", "runner_name"]

#: Protocol backend -> tflkit runner name (whose tolerance class applies), from the registry: the
#: classic GPU delegate allows fp16 by default on Android, hence the "gpu" runner's fp16 class;
#: the browser harness's backends are LiteRT.js's (``tflkit.delegates.litert_js``).
RUNNER_OF = {s.harness: s.name for s in RUNNER_SPECS if s.harness is not None}
_PRECISION = {s.harness: s.precision for s in RUNNER_SPECS if s.harness is not None}


def runner_name(backend: str, device: str) -> str:
    """``gpu-fp16@ssh:pi@board``: the runner name of a backend on a device."""
    spec = spec_by_harness(backend)
    if spec is None:
        raise KeyError(backend)
    return spec.id.on(device).name


def _executed(result: DeviceResult, backend: BackendResult, device: str) -> dict[str, Any]:
    record = backend.record
    gpu_backend = backend.backend != "cpu"
    executed: dict[str, Any] = {
        "runtime": result.harness.get("runtime"),
        "device": f"{'GPU' if gpu_backend else 'CPU'} on {device}",
        "precision": _PRECISION[backend.backend],
        "harness": result.harness.get("kind"),
        "device_info": result.device,
        "ops_total": record.get("ops_total"),
        "ops_delegated": record.get("ops_delegated"),
        "fully_accelerated": record.get("fully_accelerated"),
    }
    gpu = record.get("gpu")
    if gpu:
        executed["adapter"] = {
            "name": gpu.get("name"),
            "vendor": gpu.get("vendor"),
            "backend": gpu.get("backend"),
            "type": gpu.get("type"),
            "software": bool(gpu.get("software")),
        }
    if gpu_backend and record.get("delegate_log"):
        log = parse_gpu_log(record["delegate_log"])
        executed["cpu_fallback"] = [
            {"op": r.op_type, "reason": r.reason, "detail": r.detail} for r in log.rejections
        ]
    return executed


def _notes(backend: BackendResult, executed: dict[str, Any]) -> list[str]:
    notes = []
    adapter = executed.get("adapter")
    if adapter and adapter.get("software"):
        notes.append(
            f"the GPU adapter is a software renderer ({adapter['name']}): correct numerics, not "
            "device speed"
        )
    if backend.record.get("fully_accelerated") is False:
        fallback = sorted({f["op"] for f in executed.get("cpu_fallback", [])})
        notes.append(
            "not fully accelerated: some ops ran on the CPU"
            + (f" ({', '.join(fallback)})" if fallback else "")
        )
    for name, why in (backend.record.get("unreadable") or {}).items():
        notes.append(f"output {name} cannot be read back on this backend: {why}")
    return notes


def device_run_results(result: DeviceResult, device: str) -> list[RunResult]:
    """One :class:`RunResult` per backend in a device's result folder."""
    runs = []
    for backend in result.backends.values():
        record = backend.record
        if result.harness.get("kind") == "browser":
            name = runner_name(backend.backend, device)
            spec = spec_by_harness(backend.backend)
            assert spec is not None
            runs.append(
                browser_run_result(name, spec, record, backend.outputs, result.document, device)
            )
            continue
        executed = _executed(result, backend, device)
        runs.append(
            RunResult(
                runner_name(backend.backend, device),
                backend.status,
                outputs=backend.outputs,
                unreadable=dict(record.get("unreadable") or {}),
                executed=executed,
                **harness_timings(record),
                error=backend.error,
                notes=_notes(backend, executed),
                wall_seconds=float(record.get("wall_seconds") or 0.0),
            )
        )
    return runs
