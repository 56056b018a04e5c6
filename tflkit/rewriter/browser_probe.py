"""``check --probe-browser``: what LiteRT.js in headless Chromium leaves to the CPU, beside the
native GPU accelerator.

The model runs once on the ``webgpu-fp32`` backend of the browser harness (one seeded random
input set, through :class:`~tflkit.delegates.litert_js.BrowserSession`, in a child process);
LiteRT.js's own console lines about ops the GPU delegate did not take, ``isFullyAccelerated`` and
the delegated op count become a :class:`~tflkit.report.check_report.BrowserProbeInfo`. Where the
native probe ran too, every op type that one runtime leaves to the CPU and the other does not is
named: the same GPU engine (ML Drift) can still differ between WebGPU in a browser and the
native accelerator (dtypes, the JS I/O layer, the ops each build registers).
"""

from __future__ import annotations

from tflkit import ir
from tflkit.delegates.base import RunResult, find_spec
from tflkit.delegates.litert_js import BrowserSession
from tflkit.errors import UsageError
from tflkit.ir.entry import entry_point
from tflkit.ir.feeds import random_feed
from tflkit.report.check_report import CheckReport
from tflkit.report.probe_report import BrowserProbeInfo

__all__ = ["attach_browser_probe", "op_type_differences", "probe_in_browser"]


def probe_in_browser(
    data: bytes, model: ir.Model, adapter: str, *, timeout: float = 120.0
) -> RunResult:
    """Run ``model`` once on LiteRT.js's WebGPU fp32 backend (seed-0 random inputs)."""
    from tflkit.delegates.browser.chromium import ADAPTERS

    if adapter not in ADAPTERS:
        raise UsageError(f"unknown browser adapter {adapter!r}; choose from {sorted(ADAPTERS)}")
    key, _, inputs, _ = entry_point(model)
    by_tensor = random_feed(inputs.values(), 0)
    feed = {name: by_tensor[tensor.name] for name, tensor in inputs.items()}
    spec = find_spec(device="browser", harness="webgpu_fp32")
    session = BrowserSession(data, [spec], adapter=adapter, signature=key, timeout=timeout)
    return session.result(spec.name, [feed])


def attach_browser_probe(report: CheckReport, adapter: str, result: RunResult) -> None:
    """Add what LiteRT.js did (``result`` of :func:`probe_in_browser`) to ``report``."""
    executed = result.executed or {}
    # LiteRT.js prints its rejection block at every compile: keep each (op, reason) once
    pairs = dict.fromkeys((f["op"], f["reason"]) for f in executed.get("cpu_fallback") or [])
    fallback = [{"op": op, "reason": reason} for op, reason in pairs]
    gpu = executed.get("adapter") or {}
    report.browser = BrowserProbeInfo(
        adapter=adapter,
        status=result.status,
        error=result.error,
        webgpu_adapter=gpu.get("name"),
        fully_accelerated=executed.get("fully_accelerated"),
        ops_total=executed.get("ops_total"),
        ops_delegated=executed.get("ops_delegated"),
        cpu_fallback=fallback,
        differences=_differences(report, fallback) if result.status == "ok" else [],
    )


def _differences(report: CheckReport, fallback: list[dict[str, str]]) -> list[str]:
    """Op types on the CPU in one runtime and not in the other (needs the native probe)."""
    if report.probe is None or not report.probe.compiled:
        return []
    native = {op.type for op in report.ops if op.subgraph == 0 and op.probe_on_gpu is False}
    return op_type_differences(native, {f["op"] for f in fallback})


def op_type_differences(native_cpu: set[str], browser_cpu: set[str]) -> list[str]:
    """A sentence per op type that one runtime leaves to the CPU and the other does not."""
    lines = [
        f"{t}: the native accelerator leaves it to the CPU, LiteRT.js in the browser takes it"
        for t in sorted(native_cpu - browser_cpu)
    ]
    lines += [
        f"{t}: LiteRT.js in the browser leaves it to the CPU, the native accelerator takes it"
        for t in sorted(browser_cpu - native_cpu)
    ]
    return lines
