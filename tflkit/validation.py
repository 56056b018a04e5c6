"""``validate``: run a model on several runners with the same inputs, compare, localize.

The runners only produce outputs and say what ran (:mod:`tflkit.delegates`); the comparison
only sees arrays (:mod:`tflkit.compare`); this module wires them and builds the report.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tflkit import ir
from tflkit.compare.comparator import OutputInfo, PairComparison, compare_pair, default_pairs
from tflkit.compare.localize import Localization, localize
from tflkit.compare.tolerances import tolerance_for
from tflkit.delegates.base import Runner, RunResult, execute
from tflkit.delegates.external import ExternalDelegateRunner
from tflkit.delegates.litert_cpu import LiteRTCpuRunner
from tflkit.delegates.litert_gpu import LiteRTGpuRunner
from tflkit.delegates.tf_reference import ReferenceRunner, is_bundle, load_bundle, save_bundle
from tflkit.errors import UsageError
from tflkit.inputs import InputSets, IoSpec, entry_point, make_input_sets
from tflkit.native_check import ensure_cpu_safe
from tflkit.report.validate_report import ValidateReport

__all__ = ["RUNNERS", "ValidateOptions", "conclude", "output_infos", "resolve_inputs", "validate"]

RUNNERS = ("cpu", "cpu-ref", "gpu-fp16", "gpu-fp32", "delegate", "reference")
DEFAULT_RUNNERS = ("cpu", "gpu-fp16", "gpu-fp32")


@dataclass
class ValidateOptions:
    """What to run and compare. Empty ``runners``/``pairs`` mean the defaults."""

    runners: Sequence[str] = ()
    pairs: Sequence[tuple[str, str]] = ()
    reference: Path | None = None
    save_reference: Path | None = None
    delegate: Path | None = None
    delegate_options: Mapping[str, str] = field(default_factory=dict)
    inputs: Path | None = None
    num_inputs: int = 4
    seed: int = 0
    input_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    signature: str | None = None
    tolerances: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    localize: bool = False
    localize_runner: str | None = None
    timeout: float = 300.0


def _runner_names(options: ValidateOptions) -> list[str]:
    names = list(options.runners) or list(DEFAULT_RUNNERS)
    if options.reference is not None and "reference" not in names:
        names.append("reference")
    if options.delegate is not None and "delegate" not in names:
        names.append("delegate")
    unknown = [n for n in names if n not in RUNNERS]
    if unknown:
        raise UsageError(f"unknown runner(s) {unknown}; choose from {', '.join(RUNNERS)}")
    if "reference" in names and options.reference is None:
        raise UsageError("the reference runner needs --reference (Keras, SavedModel or .npz)")
    if "delegate" in names and options.delegate is None:
        raise UsageError("the delegate runner needs --delegate path/to/delegate.so")
    if options.save_reference is not None and options.reference is None:
        raise UsageError("--save-reference needs --reference (the Keras model or SavedModel)")
    return list(dict.fromkeys(names))


def resolve_inputs(model: ir.Model, options: ValidateOptions) -> InputSets:
    """The input sets every runner gets: given, from the reference bundle, or seeded."""
    sets = make_input_sets(
        model,
        signature=options.signature,
        source=options.inputs,
        count=options.num_inputs,
        seed=options.seed,
        shapes=options.input_shapes,
    )
    if options.reference is not None and is_bundle(options.reference) and options.inputs is None:
        bundle = load_bundle(options.reference)
        names = [s.name for s in sets.specs]
        if sorted(bundle.manifest["inputs"]) != sorted(names):
            raise UsageError(
                f"the reference bundle's inputs {bundle.manifest['inputs']} are not the "
                f"model's {names}"
            )
        return InputSets(bundle.feeds, sets.specs, f"reference bundle:{options.reference}")
    return sets


def output_infos(outputs: Mapping[str, ir.Tensor]) -> list[OutputInfo]:
    """What the comparator needs to know about each output: dtype, shape, quantization."""
    infos = []
    for name, tensor in outputs.items():
        spec = IoSpec(name, tensor, tensor.shape)
        quant = spec.quant
        infos.append(
            OutputInfo(
                name,
                spec.dtype.name,
                tensor.shape,
                scale=quant[0] if quant else None,
                zero_point=quant[1] if quant else 0,
            )
        )
    return infos


def _build(
    name: str, data: bytes, options: ValidateOptions, model: ir.Model, outputs: list[OutputInfo]
) -> Runner:
    key = options.signature
    if name in ("cpu", "cpu-ref"):
        kernels = "xnnpack" if name == "cpu" else "reference"
        return LiteRTCpuRunner(data, kernels=kernels, signature=key, name=name)
    if name in ("gpu-fp16", "gpu-fp32"):
        return LiteRTGpuRunner(
            data, enforce_f32=name == "gpu-fp32", signature=key, timeout=options.timeout
        )
    _, _, ins, outs = entry_point(model, key)
    if name == "delegate":
        assert options.delegate is not None
        return ExternalDelegateRunner(
            data,
            options.delegate,
            options=options.delegate_options,
            input_tensors={n: t.name for n, t in ins.items()},
            output_names={t.name: n for n, t in outs.items()},
            timeout=options.timeout,
        )
    assert options.reference is not None
    return ReferenceRunner(
        options.reference,
        outputs={o.name: o.shape for o in outputs},
        signature=key,
        timeout=options.timeout,
    )


def _check_pairs(pairs: Sequence[tuple[str, str]], names: Sequence[str]) -> None:
    for actual, expected in pairs:
        for side in (actual, expected):
            if side not in names:
                raise UsageError(f"--pair {actual}:{expected}: {side} is not among the runners")


def _findings(results: Sequence[RunResult], pairs: Sequence[PairComparison]) -> list[str]:
    found = []
    for r in results:
        if not r.ok:
            found.append(f"{r.runner} {r.status}: {r.error or 'no detail'}")
    for pair in pairs:
        for out in pair.outputs:
            if out.verdict == "fail":
                found.append(f"{pair.key} output {out.name}: " + "; ".join(out.reasons))
    return found


def validate(
    model_path: str | os.PathLike[str], options: ValidateOptions | None = None
) -> ValidateReport:
    """Run, compare and (optionally) localize; never raises for what a runtime does."""
    options = options or ValidateOptions()
    start = time.perf_counter()
    data, label = ir.serde.read_model_bytes(model_path)
    file_sha256 = hashlib.sha256(data).hexdigest()
    model = ir.load(data, label=label)
    if options.input_shapes:  # every runner, the GPU's included, runs the model at that shape
        from tflkit.rewriter.shapes import fix_input_shapes

        fix_input_shapes(model, options.input_shapes)
        data = ir.dumps(model)
    names = _runner_names(options)
    if options.localize or {"cpu", "cpu-ref"} & set(names):  # they run in this process
        ensure_cpu_safe(data, label, timeout=options.timeout)
    pairs = list(options.pairs) or default_pairs(names)
    _check_pairs(pairs, names)
    key, _, _, outs = entry_point(model, options.signature)
    sets = resolve_inputs(model, options)
    outputs = output_infos(outs)
    results = [execute(_build(n, data, options, model, outputs), sets.feeds) for n in names]
    by_name = {r.runner: r for r in results}
    bundle_path = None
    reference = by_name.get("reference")
    if options.save_reference is not None and reference is not None and reference.ok:
        framework = str(reference.executed.get("runtime"))
        bundle_path = str(
            save_bundle(
                options.save_reference,
                sets.feeds,
                reference.outputs,
                source=str(options.reference),
                framework=framework,
            )
        )
    comparisons = [
        compare_pair(by_name[a], by_name[e], outputs, overrides=options.tolerances)
        for a, e in pairs
    ]
    report = ValidateReport(
        model=label,
        model_sha256=file_sha256,
        signature=key,
        inputs=sets.to_json(),
        outputs=[
            {"name": o.name, "dtype": o.dtype, "shape": list(o.shape), "scale": o.scale}
            for o in outputs
        ],
        runners=results,
        pairs=comparisons,
        reference_bundle=bundle_path,
    )
    conclude(report)
    if options.localize:
        report.localization = _localize(data, model, sets, options, comparisons, names)
    report.wall_seconds = time.perf_counter() - start
    return report


def conclude(report: ValidateReport) -> None:
    """Set the report's findings, unverified outputs and verdict from its runners and pairs."""
    results, comparisons = report.runners, report.pairs
    report.findings = _findings(results, comparisons)
    report.unverified = [
        f"{p.key} output {o.name}: {'; '.join(o.reasons)}"
        for p in comparisons
        for o in p.outputs
        if o.verdict == "unverified"
    ]
    if report.findings:
        report.verdict = "fail"
    elif any(p.verdict == "skipped" for p in comparisons) or not comparisons:
        report.verdict = "incomplete"
        report.findings.append(
            "nothing was compared for "
            + (", ".join(p.key for p in comparisons if p.verdict == "skipped") or "any pair")
        )
    else:
        report.verdict = "pass"


def _localize(
    data: bytes,
    model: ir.Model,
    sets: InputSets,
    options: ValidateOptions,
    comparisons: Sequence[PairComparison],
    names: Sequence[str],
) -> Localization:
    """Localize on the GPU runner of the first failing GPU pair (else the requested one)."""
    runner = options.localize_runner
    if runner is None:
        failing = [
            p.actual for p in comparisons if p.verdict == "fail" and p.actual.startswith("gpu")
        ]
        runner = (
            failing[0] if failing else next((n for n in names if n.startswith("gpu")), "gpu-fp16")
        )
    if runner not in ("gpu-fp16", "gpu-fp32"):
        raise UsageError(f"--localize works on gpu-fp16 or gpu-fp32, not {runner}")
    _, _, ins, _ = entry_point(model, options.signature)
    feed = {n: np.asarray(v) for n, v in sets.feeds[0].items()}
    threshold = tolerance_for(runner, "cpu", overrides=options.tolerances).rtol
    return localize(
        data, feed, inputs=ins, runner=runner, threshold=threshold, timeout=options.timeout
    )
