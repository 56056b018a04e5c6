"""Compare runners' outputs pair by pair: metrics per output, a verdict per output and pair.

Each output is compared over every input set at once (arrays stacked). Quantized outputs are
dequantized with the model's scale and zero point first; integer and bool outputs must match
exactly. An output one side could not produce (e.g. int64 on the GPU path) is "unverified",
which is reported and never counted as a pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from tflkit.compare.log_scope import judged_in_log_domain, without_log_noise
from tflkit.compare.metrics import (
    compute,
    error_histogram,
)
from tflkit.compare.records import (
    GroupComparison,
    OutputComparison,
    OutputInfo,
    PairComparison,
    dequantized,
    value_sample,
)
from tflkit.compare.sensitivity import (
    EPS,
    FLIPS,
    SAME_GRID,
    STEP_CLASSES,
    OutputNoise,
    log_diff,
    log_peak,
)
from tflkit.compare.tolerances import EXACT, NOISE_FACTOR, Tolerance, precision_of, tolerance_for
from tflkit.delegates.base import RunResult, find_spec

__all__ = [
    "GroupComparison",
    "OutputComparison",
    "OutputInfo",
    "PairComparison",
    "compare_pair",
    "default_pairs",
]


#: the ground truths the default pairs hold the others to: the CPU (XNNPACK), the reference;
#: LiteRT's reference kernels are held to the CPU only
_CPU, _CPU_REF = find_spec(kernels="xnnpack").name, find_spec(kernels="reference").name
_REFERENCE = find_spec(device="framework").name


def default_pairs(runners: Sequence[str]) -> list[tuple[str, str]]:
    """Each GPU-like runner vs the CPU, the CPU vs the reference, each GPU vs the reference."""
    pairs: list[tuple[str, str]] = []
    cpu, kernels, reference = _CPU, _CPU_REF, _REFERENCE
    others = [r for r in runners if r not in (cpu, reference)]
    if cpu in runners:
        pairs += [(r, cpu) for r in others]
    if reference in runners:
        if cpu in runners:
            pairs.append((cpu, reference))
        pairs += [(r, reference) for r in others if r != kernels]
    if not pairs and len(runners) >= 2:
        pairs = [(r, runners[0]) for r in runners[1:]]
    return pairs


def _stack(result: RunResult, name: str) -> np.ndarray | None:
    if not result.outputs or any(name not in out for out in result.outputs):
        return None
    return np.stack([np.asarray(out[name]) for out in result.outputs])


def _missing_reason(result: RunResult, name: str) -> str:
    if name in result.unreadable:
        return f"{result.runner} could not read it back: {result.unreadable[name]}"
    return f"{result.runner} produced no output named {name!r}"


def _class_flips(
    expected: np.ndarray, actual: np.ndarray, allowed: float | np.ndarray
) -> tuple[float, int, float, tuple[int, float]]:
    """(agreement, confident flips, largest flipped margin, (clear rows, agreement on them)) of
    the argmax over the last axis.

    A flip is "confident" when the reference prefers its class over the one ``actual`` chose by
    more than the two classes may move together (``2 * allowed``; per element when ``allowed``
    is an array): such a flip is an error, a flip between near-ties is noise. A row is "clear"
    when the reference's top-2 margin exceeds that, so no correct runner can flip it.
    """
    rows_e = expected.reshape(-1, expected.shape[-1]).astype(np.float64)
    rows_a = actual.reshape(-1, actual.shape[-1]).astype(np.float64)
    slack = np.broadcast_to(np.asarray(allowed, np.float64), expected.shape).reshape(rows_e.shape)
    top_e = np.argmax(rows_e, axis=1)
    top_a = np.argmax(rows_a, axis=1)
    index = np.arange(rows_e.shape[0])
    ranked = np.argsort(-np.where(np.isfinite(rows_e), rows_e, -np.inf), axis=1, kind="stable")
    second = ranked[:, 1] if rows_e.shape[1] > 1 else top_e
    top2 = rows_e[index, top_e] - rows_e[index, second]
    clear = np.where(np.isfinite(top2), top2, np.inf) > slack[index, top_e] + slack[index, second]
    differ = top_e != top_a
    clear_share = float(1.0 - differ[clear].mean()) if clear.any() else 1.0
    if not differ.any():
        return 1.0, 0, 0.0, (int(clear.sum()), clear_share)
    margins = rows_e[index, top_e] - rows_e[index, top_a]
    margins = np.where(np.isfinite(margins), margins, np.inf)
    confident = (margins > slack[index, top_e] + slack[index, top_a]) & differ
    return (
        float(1.0 - differ.mean()),
        int(confident.sum()),
        float(margins[differ].max()),
        (int(clear.sum()), clear_share),
    )


def _degenerate(expected: np.ndarray, allowed: float) -> str | None:
    """Why comparing against ``expected`` says nothing on these inputs, or None."""
    finite = expected[np.isfinite(expected)]
    if finite.size == 0:
        return "the expected output is not finite anywhere"
    spread = float(finite.max() - finite.min())
    if spread == 0.0:
        return f"the expected output is the constant {float(finite.flat[0]):.4g} on these inputs"
    if spread <= allowed:
        return (
            f"the expected output varies by only {spread:.3g}, within the {allowed:.3g} the pair "
            "may differ by"
        )
    return None


ADVICE = "give inputs that exercise the model: --inputs with real data (a .npz or an image folder)"


def compare_output(
    info: OutputInfo,
    expected: np.ndarray,
    actual: np.ndarray,
    tolerance: Tolerance,
    noise: OutputNoise | None = None,
) -> OutputComparison:
    """Metrics and verdict for one output, arrays stacked over input sets.

    With ``noise`` (the output's own movement at the pair's precision, see
    :mod:`tflkit.compare.sensitivity`) and a ``tolerance.noise_factor``, the bound on ``max_abs``
    is ``noise_factor * max(noise, eps * scale)``; quantized outputs are measured in
    quantization steps. Without it, the fixed ``atol + rtol * peak``. Class-like outputs
    (probabilities, scores, masks) also need their argmax to agree wherever the reference is
    confident; float probabilities of an fp32 pair also need their logarithms within
    ``noise_factor`` times their own log noise. A reference that is constant or varies less
    than the bound is "not-meaningful".
    """
    kind = np.dtype(info.dtype).kind
    quantized = info.scale is not None and kind in "iu"
    if expected.shape != actual.shape:
        return OutputComparison(
            info.name,
            "fail",
            tolerance,
            reasons=[f"shapes differ: {actual.shape} vs {expected.shape}"],
            kind=info.kind,
        )
    if kind in "iub" and not quantized:
        return _compare_exact(info, expected, actual)
    unit = info.scale if quantized and info.scale is not None else 1.0
    if quantized:
        expected, actual = _real_values(info, expected, actual)
    classes = info.kind in CLASS_KINDS and expected.shape[-1] >= 2
    metrics = compute(expected, actual, classifier=classes)
    bound, basis, floors = _bound(info, tolerance, noise, metrics.expected_peak, unit, quantized)
    allowed: float | np.ndarray = bound
    slope = _slope_bounds(info, expected, tolerance, noise, unit, quantized, bound)
    if slope is not None:  # a quantized model's probabilities: each element by its own slope
        allowed, basis = slope
        bound = _shown_bound(expected, actual, allowed)
    out = OutputComparison(
        info.name,
        "pass",
        tolerance,
        bound=bound,
        metrics=metrics,
        histogram=error_histogram(expected, actual),
        dequantized=quantized,
        kind=info.kind,
        basis=basis,
    )
    out.noise, out.resolution = floors
    if quantized:
        out.steps = metrics.max_abs / unit
        out.bound_steps = bound / unit
    over = _over(expected, actual, allowed)
    _check_bound(out, expected, actual, allowed, over, per_element=slope is not None, unit=unit)
    if classes:
        _check_classes(out, info, expected, actual, allowed)
    _check_log_probabilities(out, expected, actual, tolerance, noise)
    _check_groups(out, info, expected, actual, tolerance, noise, unit, quantized)
    # a value beyond its own (per-element) bound fails even where the output's range is within
    # the pooled bound: the slope says what each element may do, the range does not
    if not metrics.mismatched_nonfinite and not (slope is not None and over):
        degenerate = _degenerate(expected, float(np.max(allowed)))
        if degenerate is not None:
            within = not over
            out.verdict = "not-meaningful" if within else "fail"
            out.reasons = [
                f"not meaningful on these inputs: {degenerate}"
                + (f" (actual differs by {metrics.max_abs:.3g})" if not within else ""),
                ADVICE,
            ] + ([] if within else out.reasons)
            return out
    out.verdict = "fail" if out.reasons else "pass"
    return out


def _real_values(
    info: OutputInfo, expected: np.ndarray, actual: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A quantized output's values in real units (a float reference, from a framework model or
    a float twin, already is)."""
    assert info.scale is not None
    if expected.dtype.kind in "iu":
        expected = (expected.astype(np.float64) - info.zero_point) * info.scale
    return expected, (actual.astype(np.float64) - info.zero_point) * info.scale


def _differences(expected: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """|actual - expected|, 0 where it is not finite."""
    with np.errstate(all="ignore"):
        diff = np.abs(actual - expected)
        return np.where(np.isfinite(diff), diff, 0.0)


def _shown_bound(expected: np.ndarray, actual: np.ndarray, allowed: np.ndarray) -> float:
    """The bound shown for per-element bounds: the largest difference's own, or where a value
    is furthest over its own."""
    diff = _differences(expected, actual)
    worst = np.argmax(diff / allowed) if _over(expected, actual, allowed) else np.argmax(diff)
    return float(allowed.flat[int(worst)])


def _check_bound(
    out: OutputComparison,
    expected: np.ndarray,
    actual: np.ndarray,
    allowed: float | np.ndarray,
    over: int,
    *,
    per_element: bool,
    unit: float,
) -> None:
    """The reasons to fail of the values themselves: finite on one side only, beyond the bound
    (``over`` of them; ``per_element``: each its own bound), a low cosine under a fixed bound."""
    metrics, bound, tolerance = out.metrics, out.bound, out.tolerance
    assert metrics is not None and bound is not None
    if metrics.mismatched_nonfinite:
        out.reasons.append(
            f"{metrics.mismatched_nonfinite} values finite on one side only "
            f"(NaN {metrics.nan_actual} vs {metrics.nan_expected}, "
            f"Inf {metrics.inf_actual} vs {metrics.inf_expected})"
        )
    if over:
        what = f"max_abs {metrics.max_abs:.3g} > bound {bound:.3g}"
        if per_element:
            diff = _differences(expected, actual)
            at = int(np.argmax(diff / allowed))
            what = (
                f"{over} values beyond their own bound, the furthest {float(diff.flat[at]):.3g} "
                f"off at p = {float(expected.flat[at]):.3g}, whose bound is {bound:.3g}"
            )
        elif out.dequantized:
            what += f" ({metrics.max_abs / unit:.3g} steps > {bound / unit:.3g})"
        out.reasons.append(what)
    fixed = out.noise is None or tolerance.basis.startswith("overridden")
    low = tolerance.min_cosine and metrics.cosine < tolerance.min_cosine
    if fixed and not out.dequantized and low:
        out.reasons.append(f"cosine {metrics.cosine:.6f} < {tolerance.min_cosine}")


def _check_classes(
    out: OutputComparison,
    info: OutputInfo,
    expected: np.ndarray,
    actual: np.ndarray,
    allowed: float | np.ndarray,
) -> None:
    """A class-like output's argmax agreement where the reference is confident."""
    agreement, flips, margin, clear = _class_flips(expected, actual, allowed)
    out.class_agreement = agreement
    if info.kind == "sequence":
        out.clear_steps, out.sequence_agreement = clear
    if flips:
        what = {"mask": "pixels", "sequence": "steps"}.get(info.kind, "rows")
        out.reasons.append(
            f"argmax differs on {flips} {what} where the reference is confident "
            f"(margin up to {margin:.3g} > 2 x bound {out.bound:.3g})"
        )


def _check_log_probabilities(
    out: OutputComparison,
    expected: np.ndarray,
    actual: np.ndarray,
    tolerance: Tolerance,
    noise: OutputNoise | None,
) -> None:
    """Float probabilities of an fp32 pair: their logarithms may move ``noise_factor`` times
    their own log noise (at least fp32's resolution, eps x max(1, max|log p|)), so a
    saturated softmax cannot hide a change of the logits. Not for fp16 pairs (fp16 flushes
    probabilities below 6e-8 to 0: log differences near 70 on healthy keyword spotters,
    ``bench/validate_logprob.py``), nor quantized outputs (one step near 0 is a large ratio)."""
    if (
        out.kind != "probabilities"
        or out.dequantized
        or tolerance.precision != "fp32"
        or tolerance.noise_factor <= 0
        or noise is None
        or noise.log_max_abs is None
    ):
        return
    resolution = EPS["fp32"] * max(1.0, log_peak(expected))  # p near 1: one ulp, relative
    out.log_diff = log_diff(expected, actual)
    out.log_bound = tolerance.noise_factor * max(noise.log_max_abs, resolution)
    if out.log_diff > out.log_bound:
        out.reasons.append(
            f"log-probability differs by {out.log_diff:.3g} > bound {out.log_bound:.3g} "
            f"({tolerance.noise_factor:g} x max(log noise {noise.log_max_abs:.3g}, resolution "
            f"{resolution:.3g})): the logits moved where the softmax saturates"
        )


def _bound(
    info: OutputInfo,
    tolerance: Tolerance,
    noise: OutputNoise | None,
    peak: float,
    unit: float,
    quantized: bool,
    noise_max: float | None = None,
) -> tuple[float, str, tuple[float | None, float | None]]:
    """The largest max_abs allowed, a sentence saying where it comes from, (noise, resolution).

    ``peak``: the largest |expected| of what is judged (the output, or one channel group);
    ``noise_max``: that part's own noise (default: the output's, ``noise.max_abs``)."""
    if tolerance.noise_factor <= 0 or noise is None:
        bound = tolerance.bound(peak)
        basis = tolerance.basis
        if quantized:
            bound += unit
            basis += "; dequantized: +1 quantization step"
        return bound, basis, (None, None)
    k = tolerance.noise_factor
    if noise.precision != tolerance.precision and not tolerance.basis.startswith("overridden"):
        k = NOISE_FACTOR[noise.precision]  # quantized outputs: the 8-bit grid's factor
    scale = 1.0 if info.kind == "probabilities" else peak
    resolution = EPS[tolerance.precision] * scale
    raw = noise.max_abs if noise_max is None else noise_max
    if quantized:
        resolution = max(resolution, unit)  # one step is the finest a quantized output moves
        noise_abs = raw * unit if noise.precision in STEP_CLASSES else raw
    else:
        noise_abs = raw
    floor = max(noise_abs, resolution)
    basis = (
        f"{k:g} x max(noise {noise_abs:.3g} [{', '.join(noise.witnesses) or 'none'}], "
        f"resolution {resolution:.3g})"
    )
    return k * floor, basis, (noise_abs, resolution)


def _over(expected: np.ndarray, actual: np.ndarray, allowed: float | np.ndarray) -> int:
    """How many finite differences exceed their bound (a scalar, or one per element)."""
    with np.errstate(invalid="ignore"):
        diff = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    return int(np.count_nonzero(np.isfinite(diff) & (diff > allowed)))


#: kinds whose argmax over the last axis means something (a class, a pixel's class, a token)
CLASS_KINDS = ("probabilities", "scores", "mask", "sequence")


def _slope_bounds(
    info: OutputInfo,
    expected: np.ndarray,
    tolerance: Tolerance,
    noise: OutputNoise | None,
    unit: float,
    quantized: bool,
    pooled: float,
) -> tuple[np.ndarray, str] | None:
    """Per-element bounds of a quantized model's probabilities, scaled by each one's slope.

    A probability ``p`` made by a softmax or a logistic moves ``p (1 - p)`` times what its
    logit moves. Pooled over an output, the noise is set by the most uncertain element (on
    MTCNN's p-net, a 2-class softmax over 27x27 windows, one window near 0.5 gave a bound of 79
    steps to every window, confident ones included). So the movement beyond the resolution is
    read as logit noise ``L = max(noise / p (1 - p))``, and each element may move
    ``k * max(min(L p (1 - p), pooled noise), resolution)``: never more than the pooled bound.
    Measured (``bench/output_groups.py --slope``, per photograph): ``L`` stays within a factor
    of about 2 from one input to the next while ``p`` spans 0.01 to 0.99 (the p-net 0.13 to
    0.26, mltk keyword_spotting_mobilenetv2 0.41 to 0.63), and the runners' largest ratio to
    the per-element bound stays below 1 on the p-net (GPU fp16 0.72, fp32 0.74).
    """
    if (
        info.kind != "probabilities"
        or noise is None
        or noise.elements is None
        or tolerance.noise_factor <= 0
        or tolerance.precision not in ("int8", FLIPS)
        or tolerance.basis.startswith("overridden")
        or noise.elements.shape != expected.shape
    ):
        return None
    k = tolerance.noise_factor
    if noise.precision != tolerance.precision:
        k = NOISE_FACTOR[noise.precision]
    resolution = max(EPS[tolerance.precision], unit if quantized else 0.0)
    moved = noise.elements * (unit if quantized and noise.precision in STEP_CLASSES else 1.0)
    p = np.clip(np.nan_to_num(expected.astype(np.float64)), 0.0, 1.0)
    slope = p * (1.0 - p)
    beyond = moved > resolution  # what the floor does not already cover
    logit = float(np.max(moved[beyond] / np.maximum(slope[beyond], resolution), initial=0.0))
    noise_abs = float(np.max(moved, initial=0.0))
    allowed = k * np.maximum(np.minimum(logit * slope, noise_abs), resolution)
    allowed = np.minimum(allowed, pooled)
    basis = (
        f"{k:g} x max(logit noise {logit:.3g} x p(1-p), resolution {resolution:.3g}) per "
        f"element, at most {pooled:.3g} [{', '.join(noise.witnesses) or 'none'}]"
    )
    return allowed, basis


def _check_groups(
    out: OutputComparison,
    info: OutputInfo,
    expected: np.ndarray,
    actual: np.ndarray,
    tolerance: Tolerance,
    noise: OutputNoise | None,
    unit: float,
    quantized: bool,
) -> None:
    """Each channel group of the output against its own bound: its own noise (the noise's
    elements in the group) and its own resolution (at the group's peak; absolute, as for
    probabilities, for a group whose values all lie in [0, 1]). Measured on nudenet with random
    inputs (scores at most 0.031): GPU fp16 is 7.6e-4 off, 1.6x fp16's resolution at a
    probability, where the resolution at the group's peak (1.5e-5) would have failed it."""
    for group in info.groups:
        e, a = group.take(expected), group.take(actual)
        finite = np.isfinite(e) & np.isfinite(a)
        peak = float(np.max(np.abs(e[finite]), initial=0.0))
        diff = float(np.max(np.abs(a[finite] - e[finite]), initial=0.0))
        own = None
        elements = noise.elements if noise is not None else None
        if elements is not None and elements.shape == expected.shape:
            part = group.take(elements)
            own = float(np.max(part[np.isfinite(part)], initial=0.0))
        # scores in [0, 1] (a sigmoid's, a softmax's) have an absolute resolution, as
        # probabilities do: one fp16 step at a probability, whatever the group's peak
        inside = bool(finite.any()) and float(e[finite].min()) >= 0 and peak <= 1
        judged = replace(info, kind="probabilities") if inside else info
        bound, _, (noise_abs, resolution) = _bound(
            judged, tolerance, noise, peak, unit, quantized, own
        )
        verdict = "fail" if diff > bound else "pass"
        spread = float(np.ptp(e[finite])) if finite.any() else 0.0
        if verdict == "pass" and spread <= bound:
            verdict = "not-meaningful"
        out.groups.append(
            GroupComparison(
                group.label,
                group.axis,
                group.channels,
                group.source,
                verdict,
                diff,
                bound,
                peak,
                noise_abs,
                resolution,
            )
        )
        if verdict == "fail":
            out.reasons.append(
                f"channels {group.channels} ({group.label}, axis {group.axis}, peak {peak:.3g}): "
                f"max_abs {diff:.3g} > their own bound {bound:.3g}"
            )


def _compare_exact(info: OutputInfo, expected: np.ndarray, actual: np.ndarray) -> OutputComparison:
    metrics = compute(expected, actual, classifier=False)
    differ = int(np.count_nonzero(expected != actual))
    out = OutputComparison(
        info.name,
        "pass" if differ == 0 else "fail",
        EXACT,
        bound=0.0,
        metrics=metrics,
        histogram=error_histogram(expected, actual),
        kind=info.kind,
        basis=EXACT.basis,
    )
    if differ:
        out.reasons.append(f"{differ} of {expected.size} values differ (exact comparison)")
    return out


def compare_pair(
    actual: RunResult,
    expected: RunResult,
    outputs: Sequence[OutputInfo],
    *,
    overrides: Mapping[str, Mapping[str, float]] | None = None,
    noise: Mapping[str, Mapping[str, OutputNoise]] | None = None,
    quantized: bool = False,
    same_grid: bool = False,
) -> PairComparison:
    """Compare every output of ``actual`` with ``expected`` under the pair's tolerance.

    ``noise``: per precision class, per output, the output's own movement (see
    :mod:`tflkit.compare.sensitivity`); without it the fixed tolerances apply. ``quantized``:
    the model is quantized (a pair with the framework reference is held to the int8 contract).
    ``same_grid``: a ``.tflite`` reference has the same quantized inputs and outputs, so the two
    CPU runs are held to what two integer kernels differ by (see :func:`tolerance_for`).
    """
    pair = PairComparison(actual.runner, expected.runner, "skipped")
    failed = [r for r in (actual, expected) if not r.ok]
    if failed:
        pair.reason = "; ".join(f"{r.runner} {r.status}: {r.error or ''}".strip() for r in failed)
        return pair
    if len(actual.outputs) != len(expected.outputs):
        pair.reason = f"{len(actual.outputs)} vs {len(expected.outputs)} input sets ran"
        return pair
    tolerance = tolerance_for(
        actual.runner,
        expected.runner,
        overrides=overrides,
        quantized=quantized,
        same_grid=same_grid,
    )
    half = "fp16" in (precision_of(actual.runner), precision_of(expected.runner))
    if not judged_in_log_domain(actual.runner, expected.runner):
        noise = without_log_noise(noise)  # saturated values: judged as values between devices
    for info in outputs:
        a, e = _stack(actual, info.name), _stack(expected, info.name)
        if a is None or e is None:
            why = _missing_reason(actual if a is None else expected, info.name)
            pair.outputs.append(
                OutputComparison(info.name, "unverified", tolerance, reasons=[why], kind=info.kind)
            )
            continue
        found = _noise_for(noise, info, tolerance, half=half)
        compared = compare_output(info, e, a, tolerance, found)
        compared.sample = value_sample(
            *(dequantized(x, info) if compared.dequantized else x for x in (e, a))
        )
        pair.outputs.append(compared)
    verdicts = {o.verdict for o in pair.outputs}
    if "fail" in verdicts:
        pair.verdict = "fail"
    elif "pass" in verdicts:
        pair.verdict = "pass"
    elif "not-meaningful" in verdicts:
        pair.verdict = "not-meaningful"
        pair.reason = "every compared output is constant or ~0 on these inputs"
    else:
        pair.reason = "no output could be compared"
    return pair


def _noise_for(
    noise: Mapping[str, Mapping[str, OutputNoise]] | None,
    info: OutputInfo,
    tolerance: Tolerance,
    *,
    half: bool = False,
) -> OutputNoise | None:
    """The noise an output's verdict scales with: quantized outputs move on the 8-bit grid, and
    against a half-precision runner (``half``) also by one-step flips inside the model."""
    if not noise:
        return None
    quantized = info.scale is not None and np.dtype(info.dtype).kind in "iu"
    order: tuple[str, ...] = ("int8", tolerance.precision) if quantized else (tolerance.precision,)
    if tolerance.precision == SAME_GRID:
        order = (SAME_GRID,)
    elif half and (quantized or tolerance.precision == "int8"):
        order = (FLIPS, *order)
    for precision in order:
        found = (noise.get(precision) or {}).get(info.name)
        if found is not None:
            return found
    return None
