"""``regress check``: rerun a model on its baseline's inputs and say what moved.

Regressions: an output of a runner outside that runner's tolerance against its recorded outputs;
a runner that ran at record time and fails now; more ops on the CPU or more GPU partitions than
recorded (even when the numbers hold); the GPU accelerator no longer compiling the model; with a
latency budget, a runner slower than ``budget x`` its recorded median on the same device.
What changed without being a regression (model hash, op histogram, versions) is listed apart.
"""

from __future__ import annotations

import hashlib
import os
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.errors import TflkitError, UsageError
from tflkit.regress.baseline import Baseline, read_baseline
from tflkit.report.regress_report import Case, ModelResult

__all__ = ["CheckOptions", "check", "compare_outputs"]


@dataclass
class CheckOptions:
    """``runners`` narrows the baseline's; ``tolerances`` override the recorded ones (same keys
    as :func:`tflkit.regress.record.runner_tolerance`); ``probe`` None means as recorded.
    ``outputs`` / ``residency`` False leave that part out (a suite runs them as separate items)."""

    runners: Sequence[str] = ()
    tolerances: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    probe: bool | None = None
    latency_budget: float | None = None
    delegate: Path | None = None
    timeout: float = 300.0
    outputs: bool = True
    residency: bool = True
    #: another runtime to run the runners with (:class:`tflkit.harness.runtimes.RuntimeEnv`)
    runtime: Any = None


def _tolerance(baseline: Baseline, runner: str, overrides: Mapping[str, Mapping[str, float]]):
    from tflkit.regress.record import runner_tolerance

    return runner_tolerance(runner, overrides, baseline.manifest["runners"][runner]["tolerance"])


def _output_message(runner: str, name: str, comparison: Any) -> str:
    """The comparison's reasons, the bound spelled out with how far past it the output went."""
    m, t = comparison.metrics, comparison.tolerance
    step = " + one quantization step" if getattr(comparison, "dequantized", False) else ""
    parts = []
    for reason in comparison.reasons:
        if m is not None and comparison.bound and reason.startswith("max_abs"):
            reason = (
                f"max_abs {m.max_abs:.3g} > bound {comparison.bound:.3g} "
                f"({m.max_abs / comparison.bound:.3g}x the bound: atol {t.atol:g} + rtol "
                f"{t.rtol:g} x peak {m.expected_peak:.3g}{step})"
            )
        parts.append(reason)
    tail = f" (mean_abs {m.mean_abs:.3g}, rmse {m.rmse:.3g})" if m is not None else ""
    return f"{runner} output {name}: " + "; ".join(parts) + tail


def compare_outputs(
    baseline: Baseline,
    results: Sequence[Any],
    overrides: Mapping[str, Mapping[str, float]],
) -> list[Case]:
    """One case per runner x output: the rerun against the recorded arrays."""
    from tflkit.compare.comparator import OutputInfo, compare_output

    infos = [
        OutputInfo(o["name"], o["dtype"], tuple(o["shape"]), o.get("scale"), o.get("zero_point", 0))
        for o in baseline.manifest["outputs"]
    ]
    cases = []
    for result in results:
        runner = result.runner
        recorded = baseline.manifest["runners"][runner]
        tolerance = _tolerance(baseline, runner, overrides)
        per_output = result.wall_seconds / max(len(infos), 1)
        for info in infos:
            case = Case(
                f"{runner} / {info.name}",
                "output",
                "pass",
                runner=runner,
                output=info.name,
                seconds=per_output,
            )
            cases.append(case)
            expected = baseline.runner_output(runner, info.name)
            if recorded["status"] != "ok":
                case.status = "skipped"
                case.message = f"{runner} did not run at record time ({recorded['status']})"
                if result.ok:
                    case.message += "; it runs now: record a new baseline to compare it"
                continue
            if not result.ok:
                case.status = "fail"
                case.message = f"{runner} {result.status} (it ran at record time): {result.error}"
                continue
            if expected is None:
                case.status = "skipped"
                why = recorded["unreadable"].get(info.name, "not recorded")
                case.message = f"{runner} output {info.name} was not recorded: {why}"
                continue
            if any(info.name not in o for o in result.outputs):
                case.status = "fail"
                why = result.unreadable.get(info.name, "missing")
                case.message = f"{runner} output {info.name} is no longer produced: {why}"
                continue
            actual = np.stack([np.asarray(o[info.name]) for o in result.outputs])
            if len(actual) != len(expected):
                case.status = "fail"
                case.message = f"{runner}: {len(actual)} input sets ran, {len(expected)} recorded"
                continue
            comparison = compare_output(info, expected, actual, tolerance)
            m = comparison.metrics
            case.details = {
                "tolerance": tolerance.to_json(),
                "bound": comparison.bound,
                "metrics": m.to_json() if m is not None else None,
            }
            if comparison.verdict == "fail":
                case.status = "fail"
                case.message = _output_message(runner, info.name, comparison)
            elif m is not None:
                case.message = f"max_abs {m.max_abs:.3g} <= bound {comparison.bound:.3g}"
    return cases


def _latency_cases(baseline: Baseline, results: Sequence[Any], budget: float) -> list[Case]:
    from tflkit.regress.record import _device

    cases = []
    recorded = (baseline.latency or {}).get("runners", {})
    for result in results:
        case = Case(f"latency {result.runner}", "latency", "pass", runner=result.runner)
        cases.append(case)
        before = recorded.get(result.runner)
        if before is None or not result.ok or not result.infer_seconds:
            case.status = "skipped"
            case.message = "no latency recorded or measured for this runner"
            continue
        device = _device(result.executed)
        if device != before["device"]:
            case.status = "skipped"
            case.message = f"measured on {device}, recorded on {before['device']}: not comparable"
            continue
        now = statistics.median(result.infer_seconds)
        ratio = now / before["infer_median_seconds"] if before["infer_median_seconds"] else 0.0
        case.details = {
            "median_seconds": now,
            "baseline_median_seconds": before["infer_median_seconds"],
            "ratio": ratio,
            "budget": budget,
        }
        text = (
            f"median inference {now * 1e3:.3g} ms vs {before['infer_median_seconds'] * 1e3:.3g} ms "
            f"recorded ({ratio:.2f}x, budget {budget:g}x) on {device}"
        )
        case.message = text
        if ratio > budget:
            case.status = "fail"
    return cases


def _changes(
    baseline: Baseline, model_sha: str, histogram: dict[str, int], now_versions: dict[str, Any]
) -> list[str]:
    manifest = baseline.manifest
    changes = []
    if manifest["model"]["sha256"] != model_sha:
        changes.append(f"model sha256 {manifest['model']['sha256'][:12]} -> {model_sha[:12]}")
    before = manifest["model"]["op_histogram"]
    moved = [
        f"{op} {before.get(op, 0)} -> {histogram.get(op, 0)}"
        for op in sorted(set(before) | set(histogram))
        if before.get(op, 0) != histogram.get(op, 0)
    ]
    if moved:
        changes.append("ops: " + ", ".join(moved))
    for key, value in sorted(now_versions.items()):
        old = manifest.get("versions", {}).get(key)
        if value is not None and old != value:
            changes.append(f"{key} {old} -> {value}")
    return changes


def _interface_mismatch(model: Any, manifest: Mapping[str, Any]) -> str | None:
    """Why the recorded inputs no longer fit the model (names, dtypes, shapes), or None."""
    from tflkit.ir.entry import entry_point

    try:
        _, _, inputs, _ = entry_point(model, manifest["signature"])
    except UsageError as exc:
        return f"the recorded entry point is gone: {exc}"
    specs = {s["name"]: s for s in manifest["inputs"]["specs"]}
    if sorted(specs) != sorted(inputs):
        return f"the model's inputs are {sorted(inputs)}; the baseline's are {sorted(specs)}"
    for name, tensor in inputs.items():
        spec = specs[name]
        dims = tensor.shape_signature or tensor.shape
        dtype = str(tensor.dtype) if tensor.dtype is not None else tensor.type_name
        shape_ok = len(dims) == len(spec["shape"]) and all(
            d < 0 or d == r for d, r in zip(dims, spec["shape"], strict=True)
        )
        if dtype != spec["dtype"] or not shape_ok:
            return (
                f"input {name} is {dtype} {list(tensor.display_shape)}; the baseline fed "
                f"{spec['dtype']} {spec['shape']}"
            )
    return None


def _output_cases(
    result: ModelResult,
    model: Any,
    path: Path,
    loaded: Baseline,
    runners: Sequence[str],
    options: CheckOptions,
) -> list[Any] | None:
    """Rerun ``runners`` on the recorded inputs (with ``options.runtime`` when given); their
    cases go into ``result``; the runs."""
    from tflkit.regress.record import run_models

    manifest = loaded.manifest
    mismatch = _interface_mismatch(model, manifest)
    if mismatch:
        result.cases.append(Case("inputs", "output", "fail", mismatch))
        return None
    shapes = {k: tuple(v) for k, v in manifest["inputs"].get("input_shapes", {}).items()}
    if options.runtime is not None:
        from tflkit.harness.runtimes import run_in_runtime
        from tflkit.regress.runtime_cases import runtime_cases

        runs = run_in_runtime(
            path,
            loaded.inputs,
            runners,
            options.runtime,
            signature=manifest["signature"],
            timeout=options.timeout,
        )
        result.cases += runtime_cases(
            compare_outputs(loaded, runs, options.tolerances), runs, manifest, options.runtime
        )
        return runs
    report = run_models(
        path,
        loaded.inputs,
        runners,
        signature=manifest["signature"],
        input_shapes=shapes,
        delegate=options.delegate,
        timeout=options.timeout,
    )
    result.cases += compare_outputs(loaded, report.runners, options.tolerances)
    return report.runners


def _residency_cases(
    result: ModelResult, path: Path, manifest: Mapping[str, Any], options: CheckOptions
) -> dict[str, Any] | None:
    """The residency now (static, and probed as recorded) against the recorded one."""
    from tflkit.regress.residency import compare_residency, snapshot

    probe = manifest["options"]["probe"] if options.probe is None else options.probe
    try:
        now = snapshot(
            path, target=manifest["options"]["target"], probe=probe, timeout=options.timeout
        )
    except TflkitError as exc:
        result.cases.append(Case("residency (static)", "residency", "fail", str(exc)))
        return None
    for name, regressed, message in compare_residency(now, manifest["residency"]):
        status = "skipped" if regressed is None else "fail" if regressed else "pass"
        result.cases.append(Case(name, "residency", status, message))
    return now


def check(
    model_path: str | os.PathLike[str],
    baseline: str | os.PathLike[str] | Baseline,
    options: CheckOptions | None = None,
) -> ModelResult:
    """Rerun ``model_path`` as its baseline was recorded and compare; see the module docstring.

    Usage errors (bad options, no baseline, unreadable model) raise :class:`UsageError` /
    :class:`tflkit.errors.ModelLoadError`; everything the runtimes do is a case in the result.
    """
    from collections import Counter

    from tflkit import ir
    from tflkit.regress.record import versions

    start = time.perf_counter()
    options = options or CheckOptions()
    loaded = baseline if isinstance(baseline, Baseline) else read_baseline(baseline)
    manifest = loaded.manifest
    recorded = list(manifest["runners"])
    runners = list(options.runners) or recorded
    missing = [r for r in runners if r not in recorded]
    if missing:
        raise UsageError(f"runner(s) {missing} are not in the baseline (it has {recorded})")
    if "delegate" in runners and options.delegate is None:
        raise UsageError("the baseline has a delegate runner: give --delegate path/to/delegate.so")
    if options.latency_budget is not None:
        if options.latency_budget <= 0:
            raise UsageError("--latency-budget must be positive (1.2 = at most 20% slower)")
        if loaded.latency is None:
            raise UsageError(
                f"--latency-budget needs a baseline recorded with --latency ({loaded.path} has "
                "no latency.json)"
            )
    path = Path(model_path)
    data, label = ir.serde.read_model_bytes(path)
    model = ir.load(data, label=label)
    result = ModelResult(str(path), str(loaded.path or ""), "pass")
    runs = None
    if options.outputs:
        runs = _output_cases(result, model, path, loaded, runners, options)
    now = _residency_cases(result, path, manifest, options) if options.residency else None
    if options.latency_budget is not None and runs is not None:
        result.cases += _latency_cases(loaded, runs, options.latency_budget)
    adapter = (now or {}).get("probe", {}) or {}
    histogram = Counter(op.type for sg in model.subgraphs for op in sg.ops)
    result.changes = _changes(
        loaded, hashlib.sha256(data).hexdigest(), dict(histogram), versions(adapter.get("adapter"))
    )
    if options.runtime is not None:
        result.runtime = options.runtime.label
        old = manifest.get("versions", {}).get("runtime") or "tflkit's own LiteRT"
        result.changes.append(f"runtime {old} -> {options.runtime.label}")
    result.verdict = "fail" if result.failures else "pass"
    result.wall_seconds = time.perf_counter() - start
    return result
