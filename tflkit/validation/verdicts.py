"""Reading the comparisons: findings, the notes a reader needs beyond pass/fail (fp16 emulation
against the GPU, the ops whose fp16 storage moves a failing output, skipped optional runners,
dynamic inputs) and the report's verdict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tflkit import ir
from tflkit.compare.comparator import PairComparison
from tflkit.compat.cpu_kernels import cpu_kernel_hazards
from tflkit.delegates.base import RunnerPair, RunResult, find_spec, on_gpu, runner_id, runner_spec
from tflkit.delegates.fp16_emulation import Fp16EmulationRunner
from tflkit.gpu.buffers import BINDING_REFUSED
from tflkit.report.validate_report import ValidateReport
from tflkit.validation.inconclusive import inconclusive_reason
from tflkit.validation.inputs import InputSets
from tflkit.validation.options import ValidateOptions, say

__all__ = ["conclude", "drift_finding", "findings", "fp16_storage", "notes", "verdict"]

#: seconds spent naming the ops whose fp16 storage moves failing outputs (one emulated run per op)
STORAGE_BUDGET_S = 30.0

_CPU = find_spec(kernels="xnnpack").id
_GPU16, _GPU32 = (find_spec(device="gpu", precision=p).id for p in ("fp16", "fp32"))
#: the pairs the notes read: the fp16 emulation, the GPU in fp16 and in fp32, each against the CPU
_EMULATED = RunnerPair(find_spec(emulated=True).id, _CPU)
_REAL, _REAL32 = RunnerPair(_GPU16, _CPU), RunnerPair(_GPU32, _CPU)


def _emulated(runner: str) -> bool:
    """The runner is the fp16 emulation (on this machine)."""
    spec, rid = runner_spec(runner), runner_id(runner)
    return spec is not None and rid is not None and spec.emulated and rid.here


def conclude(
    report: ValidateReport,
    data: bytes,
    sets: InputSets,
    results: Sequence[RunResult],
    comparisons: Sequence[PairComparison],
    optional: set[str],
    quantized: bool,
    options: ValidateOptions,
) -> None:
    """Fill ``report``'s findings, unverified and not-meaningful outputs, notes and verdict
    (``optional``: default runners that may not apply to a model)."""
    report.findings = findings(results, comparisons, optional)
    report.unverified = [
        f"{p.key} output {o.name}: {'; '.join(o.reasons)}"
        for p in comparisons
        for o in p.outputs
        if o.verdict == "unverified"
    ]
    report.not_meaningful = [
        f"{p.key} output {o.name}: {o.reasons[0]}"
        for p in comparisons
        for o in p.outputs
        if o.verdict == "not-meaningful"
    ]
    emulation = next((r for r in results if _emulated(r.runner)), None)
    storage = fp16_storage(data, sets, emulation, comparisons, options)
    report.notes = notes(results, comparisons, optional, quantized, storage)
    dynamic = [s.name for s in sets.specs if s.tensor.is_dynamic]
    if dynamic and any(r.status == "compile_error" and on_gpu(r.runner) for r in results):
        report.notes.append(
            f"inputs {', '.join(dynamic)} have dynamic dimensions, which the GPU accelerator may "
            "refuse: fix them with tflkit rewrite --input-shape NAME=D1,D2,... and validate the "
            "result"
        )
    report.notes += [
        f"{h.line()}; see the GPU-vs-CPU verdicts in that light"
        for h in cpu_kernel_hazards(ir.load(data))
    ]
    verdict(report, comparisons, optional)


def findings(
    results: Sequence[RunResult], pairs: Sequence[PairComparison], optional: set[str]
) -> list[str]:
    """What fails: runners that did not run (optional ones aside) and failing outputs."""
    found = []
    for r in results:
        if not r.ok and r.runner not in optional and r.status != BINDING_REFUSED:
            found.append(f"{r.runner} {r.status}: {r.error or 'no detail'}")
        drift = drift_finding(r)
        if drift:
            found.append(drift)
    for pair in pairs:
        for out in pair.outputs:
            if out.verdict == "fail":
                found.append(f"{pair.key} output {out.name}: " + "; ".join(out.reasons))
    return found


def drift_finding(result: RunResult) -> str | None:
    """A runner that ran each input set several times (the browser's) and got different
    outputs from the same inputs: a failed check of its own, whatever the comparisons say."""
    repeats = result.executed.get("repeats") or {}
    if not result.ok or repeats.get("stable") is not False:
        return None
    worst: dict[str, float] = {}
    for per_set in repeats.get("max_abs_diff_to_first") or []:
        for name, diffs in per_set.items():
            worst[name] = max([worst.get(name, 0.0), *diffs])
    moved = ", ".join(f"{n} by {v:.3g}" for n, v in worst.items() if v > 0)
    runs = repeats.get("runs") or []
    return (
        f"{result.runner} drift: repeated runs of the same input set gave different outputs "
        f"({moved or 'max ' + str(repeats.get('max_abs_diff'))}; runs per set {runs}): only one "
        "of them can be what the model computes"
    )


def fp16_storage(
    data: bytes,
    sets: InputSets,
    emulation: RunResult | None,
    comparisons: Sequence[PairComparison],
    options: ValidateOptions,
) -> dict[str, str]:
    """Per output the fp16 emulation fails on: the op at fault in fp16 (the first hazard: inf/NaN
    from finite inputs, an overflow), else the ops whose fp16 storage moves it most."""
    emulated = next((p for p in comparisons if p.pair == _EMULATED), None)
    failing = [o.name for o in emulated.outputs if o.verdict == "fail"] if emulated else []
    if not failing or emulation is None:
        return {}
    hazards = emulation.executed.get("fp16_hazards") or []
    if hazards:
        first = hazards[0]
        cause = f"the first op at fault in fp16 is op #{first['op_index']} {first['op_type']}"
        return {name: f"{cause} ({first['what']})" for name in failing}
    say(options, "finding the ops whose fp16 storage moves the failing outputs")
    runner = Fp16EmulationRunner(data, signature=options.signature)
    try:
        runner.activate()
    except Exception:
        return {}
    found = {}
    try:
        for name in failing:
            effects, complete = runner.storage_effects(
                sets.feeds[0], name, budget=STORAGE_BUDGET_S / len(failing)
            )
            top = [e for e in effects if e[2] > 0][:3]
            if top:
                found[name] = (
                    "the values whose fp16 storage moves it most are the outputs of "
                    + ", ".join(f"op #{i} {t} ({v:.3g} alone)" for i, t, v in top)
                    + ("" if complete else " (among the ops tried in the time allowed)")
                )
    finally:
        runner.deactivate()
    return found


def notes(
    results: Sequence[RunResult],
    comparisons: Sequence[PairComparison],
    optional: set[str],
    quantized: bool = False,
    storage: Mapping[str, str] | None = None,
) -> list[str]:
    """What the reader should know beyond pass/fail: emulation vs GPU, skipped optional runs."""
    storage = storage or {}
    found = [
        f"{r.runner} did not run: {r.error}" for r in results if r.runner in optional and not r.ok
    ]
    by_pair = {p.pair: p for p in comparisons}
    emulated, real = by_pair.get(_EMULATED), by_pair.get(_REAL)
    if emulated is None:
        return found + _both_precisions(real, by_pair.get(_REAL32))
    if real is None or real.verdict == "skipped":
        found += _emulation_alone(emulated, storage)
    elif "skipped" not in (emulated.verdict, real.verdict):
        fp32 = by_pair.get(_REAL32)
        found += _emulation_vs_gpu(emulated, real, fp32, storage, quantized)
    return found


def _emulation_alone(emulated: PairComparison, storage: Mapping[str, str]) -> list[str]:
    """No GPU result beside the fp16 emulation: each output it fails is an fp16 finding."""
    found = []
    for e_out in emulated.outputs:
        if e_out.verdict == "fail":
            where = f"; {storage[e_out.name]}" if e_out.name in storage else ""
            found.append(
                f"fp16 finding, output {e_out.name}: the fp16 emulation fails, so storing "
                f"this model's values in half precision costs this much{where}: run it in "
                "fp32 on the GPU, or accept the loss"
            )
    return found


def _emulation_vs_gpu(
    emulated: PairComparison,
    real: PairComparison,
    fp32: PairComparison | None,
    storage: Mapping[str, str],
    quantized: bool,
) -> list[str]:
    """The fp16 emulation and the fp16 GPU, output by output: where both fail, fp16 storage
    itself costs it; where only one fails, what that says."""
    fix = (
        "run this model on the GPU in fp32 (enforce_f32: gpu-fp32 passes here)"
        if fp32 is not None and fp32.verdict == "pass"
        else "run it in fp32 on the GPU"
    )
    found = []
    for e_out, g_out in zip(emulated.outputs, real.outputs, strict=True):
        if e_out.verdict == g_out.verdict == "fail":
            where = f"; {storage[g_out.name]}" if g_out.name in storage else ""
            found.append(
                f"fp16 finding, output {g_out.name}: the fp16 emulation fails too, so fp16 "
                f"storage itself costs this much on this model, not this GPU's kernels{where}"
                f": {fix}, or accept the loss (--tolerance {_REAL}@noise_factor=N)"
            )
            continue
        if e_out.verdict == g_out.verdict or "unverified" in (e_out.verdict, g_out.verdict):
            continue
        if e_out.verdict == "fail":
            where = f"; {storage[e_out.name]}" if e_out.name in storage else ""
            found.append(
                f"output {e_out.name}: the fp16 emulation fails where this GPU passes: "
                "another GPU backend, without this one's fusions or fp32 accumulators, may "
                "fail too (" + "; ".join(e_out.reasons[:1]) + f"){where}"
            )
        elif g_out.verdict == "fail" and _fails(fp32, g_out.name):
            found.append(_BOTH.format(name=g_out.name))
        elif g_out.verdict == "fail" and (g_out.steps is not None or quantized):
            found.append(
                f"output {g_out.name}: the GPU computes this quantized model dequantized, in "
                "fp16; the fp16 emulation runs its integer ops as the CPU does, so it does not "
                "predict this path"
            )
        elif g_out.verdict == "fail":
            found.append(
                f"output {g_out.name}: this GPU fails where the fp16 emulation passes: the "
                "GPU's kernels lose more than fp16 storage explains (precision inside a "
                "kernel, or a backend bug)"
            )
    return found


#: The note for an output the GPU fails in both precisions.
_BOTH = (
    "output {name}: gpu-fp32 fails too, so fp16 is not the cause: the GPU computes this model "
    "wrong in fp32 and fp16 alike (a kernel or compiler bug; the GPU runners' notes show any "
    "warning the accelerator gave)"
)


def _both_precisions(real: PairComparison | None, fp32: PairComparison | None) -> list[str]:
    """Without the fp16 emulation: each output gpu-fp16 and gpu-fp32 both fail."""
    if real is None:
        return []
    return [
        _BOTH.format(name=o.name)
        for o in real.outputs
        if o.verdict == "fail" and _fails(fp32, o.name)
    ]


def _fails(pair: PairComparison | None, output: str) -> bool:
    """Whether ``pair`` compared ``output`` and it failed."""
    if pair is None:
        return False
    return any(o.name == output and o.verdict == "fail" for o in pair.outputs)


def verdict(
    report: ValidateReport, comparisons: Sequence[PairComparison], optional: set[str]
) -> None:
    """The report's verdict: fail, incomplete (a pair not compared), inconclusive (nothing
    meaningful compared) or pass."""
    counted = [
        p
        for p in comparisons
        if not (p.verdict == "skipped" and ({p.actual, p.expected} & optional))
    ]
    if report.findings:
        report.verdict = "fail"
    elif any(p.verdict == "skipped" for p in counted) or not counted:
        report.verdict = "incomplete"
        report.findings.append(
            "nothing was compared for "
            + (", ".join(p.key for p in counted if p.verdict == "skipped") or "any pair")
        )
    elif all(p.verdict == "not-meaningful" for p in counted):
        report.verdict = "inconclusive"
        report.findings.append(inconclusive_reason(counted, report.inputs))
    else:
        report.verdict = "pass"
