"""Compare runners' outputs pair by pair: metrics per output, a verdict per output and pair.

Each output is compared over every input set at once (arrays stacked). Quantized outputs are
dequantized with the model's scale and zero point first; integer and bool outputs must match
exactly. An output one side could not produce (e.g. int64 on the GPU path) is "unverified",
which is reported and never counted as a pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tflkit.compare.metrics import (
    ErrorHistogram,
    Metrics,
    compute,
    error_histogram,
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
from tflkit.delegates.base import RunResult
from tflkit.jsonable import plain

__all__ = ["OutputComparison", "OutputInfo", "PairComparison", "compare_pair", "default_pairs"]


@dataclass(frozen=True)
class OutputInfo:
    """What the model says about one output: dtype, shape, quantization."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    scale: float | None = None
    zero_point: int = 0
    #: "float", "probabilities", "scores", "mask", "index", "bool" (see ``output_kind``)
    kind: str = "float"


#: Elements of an output kept for the HTML report's error-vs-value plot.
SAMPLE_SIZE = 400


def value_sample(
    expected: np.ndarray, actual: np.ndarray, size: int = SAMPLE_SIZE
) -> tuple[np.ndarray, np.ndarray] | None:
    """Up to ``size`` (expected, actual) pairs as float64, evenly spread over the flattened
    output, plus the element with the largest difference; None when the shapes differ."""
    e = np.asarray(expected).reshape(-1)
    a = np.asarray(actual).reshape(-1)
    if e.shape != a.shape or e.size == 0:
        return None
    e, a = e.astype(np.float64), a.astype(np.float64)
    picked = np.unique(np.linspace(0, e.size - 1, min(size, e.size)).astype(np.int64))
    with np.errstate(invalid="ignore"):
        diff = np.abs(a - e)
    if np.isfinite(diff).any():
        picked = np.union1d(picked, [int(np.nanargmax(np.where(np.isfinite(diff), diff, -1)))])
    return e[picked], a[picked]


def _dequantized(values: np.ndarray, info: OutputInfo) -> np.ndarray:
    if values.dtype.kind not in "iu" or not info.scale:
        return values
    return (values.astype(np.float64) - info.zero_point) * info.scale


@dataclass
class OutputComparison:
    """One output of one pair.

    ``verdict``: "pass", "fail", "unverified" (one side could not produce it) or
    "not-meaningful" (the reference is constant or ~0 on these inputs: nothing to tell apart).
    """

    name: str
    verdict: str
    tolerance: Tolerance
    bound: float | None = None
    metrics: Metrics | None = None
    histogram: ErrorHistogram | None = None
    dequantized: bool = False
    reasons: list[str] = field(default_factory=list)
    kind: str = "float"
    basis: str = ""
    #: quantized outputs: the largest difference and the bound, in quantization steps
    steps: float | None = None
    bound_steps: float | None = None
    #: class-like outputs: share of rows (pixels for masks) with the same argmax
    class_agreement: float | None = None
    #: calibrated bounds: the output's own noise and the format's resolution at its scale
    noise: float | None = None
    resolution: float | None = None
    #: float probabilities in an fp32 pair: the largest log-probability difference and its bound
    log_diff: float | None = None
    log_bound: float | None = None
    #: (expected, actual) at up to :data:`SAMPLE_SIZE` elements, the largest difference
    #: included, for the HTML report's plot; not in JSON
    sample: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return plain(
            {
                "name": self.name,
                "verdict": self.verdict,
                "reasons": self.reasons,
                "kind": self.kind,
                "tolerance": self.tolerance,
                "bound": self.bound,
                "basis": self.basis,
                "steps": self.steps,
                "bound_steps": self.bound_steps,
                "class_agreement": self.class_agreement,
                "noise": self.noise,
                "resolution": self.resolution,
                "log_diff": self.log_diff,
                "log_bound": self.log_bound,
                "dequantized": self.dequantized,
                "metrics": self.metrics,
                "histogram": self.histogram,
            }
        )


@dataclass
class PairComparison:
    """``actual`` against ``expected``; ``verdict``: "pass", "fail" or "skipped"."""

    actual: str
    expected: str
    verdict: str
    outputs: list[OutputComparison] = field(default_factory=list)
    reason: str | None = None

    @property
    def key(self) -> str:
        return f"{self.actual}:{self.expected}"

    def to_json(self) -> dict[str, Any]:
        return plain(
            {
                "pair": self.key,
                "actual": self.actual,
                "expected": self.expected,
                "verdict": self.verdict,
                "reason": self.reason,
                "outputs": self.outputs,
            }
        )


def default_pairs(runners: Sequence[str]) -> list[tuple[str, str]]:
    """Each GPU-like runner vs the CPU, the CPU vs the reference, each GPU vs the reference."""
    pairs: list[tuple[str, str]] = []
    others = [r for r in runners if r not in ("cpu", "reference")]
    if "cpu" in runners:
        pairs += [(r, "cpu") for r in others]
    if "reference" in runners:
        if "cpu" in runners:
            pairs.append(("cpu", "reference"))
        pairs += [(r, "reference") for r in others if r != "cpu-ref"]
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
    expected: np.ndarray, actual: np.ndarray, allowed: float
) -> tuple[float, int, float]:
    """(agreement, confident flips, largest flipped margin) of the argmax over the last axis.

    A flip is "confident" when the reference prefers its class over the one ``actual`` chose by
    more than ``2 * allowed`` (each side may move by ``allowed``): such a flip is an error, a
    flip between near-ties is noise.
    """
    rows_e = expected.reshape(-1, expected.shape[-1]).astype(np.float64)
    rows_a = actual.reshape(-1, actual.shape[-1]).astype(np.float64)
    top_e = np.argmax(rows_e, axis=1)
    top_a = np.argmax(rows_a, axis=1)
    differ = top_e != top_a
    if not differ.any():
        return 1.0, 0, 0.0
    index = np.arange(rows_e.shape[0])
    margins = rows_e[index, top_e] - rows_e[index, top_a]
    margins = np.where(np.isfinite(margins), margins, np.inf)[differ]
    return float(1.0 - differ.mean()), int((margins > 2 * allowed).sum()), float(margins.max())


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
    unit = 1.0
    if quantized:
        assert info.scale is not None
        unit = info.scale
        # a float reference (a framework model, a float twin) is already in real values
        if expected.dtype.kind in "iu":
            expected = (expected.astype(np.float64) - info.zero_point) * unit
        actual = (actual.astype(np.float64) - info.zero_point) * unit
    classes = info.kind in ("probabilities", "scores", "mask") and expected.shape[-1] >= 2
    metrics = compute(expected, actual, classifier=classes)
    bound, basis, floors = _bound(info, tolerance, noise, metrics, unit, quantized)
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
    reasons = out.reasons
    if metrics.mismatched_nonfinite:
        reasons.append(
            f"{metrics.mismatched_nonfinite} values finite on one side only "
            f"(NaN {metrics.nan_actual} vs {metrics.nan_expected}, "
            f"Inf {metrics.inf_actual} vs {metrics.inf_expected})"
        )
    if metrics.max_abs > bound:
        what = f"max_abs {metrics.max_abs:.3g} > bound {bound:.3g}"
        if quantized:
            what += f" ({metrics.max_abs / unit:.3g} steps > {bound / unit:.3g})"
        reasons.append(what)
    fixed = out.noise is None or tolerance.basis.startswith("overridden")
    if fixed and not quantized and tolerance.min_cosine and metrics.cosine < tolerance.min_cosine:
        reasons.append(f"cosine {metrics.cosine:.6f} < {tolerance.min_cosine}")
    if classes:
        agreement, flips, margin = _class_flips(expected, actual, bound)
        out.class_agreement = agreement
        if flips:
            what = "pixels" if info.kind == "mask" else "rows"
            reasons.append(
                f"argmax differs on {flips} {what} where the reference is confident "
                f"(margin up to {margin:.3g} > 2 x bound {bound:.3g})"
            )
    _check_log_probabilities(out, info, expected, actual, tolerance, noise, quantized)
    if not metrics.mismatched_nonfinite:
        degenerate = _degenerate(expected, bound)
        if degenerate is not None:
            within = metrics.max_abs <= bound
            out.verdict = "not-meaningful" if within else "fail"
            out.reasons = [
                f"not meaningful on these inputs: {degenerate}"
                + (f" (actual differs by {metrics.max_abs:.3g})" if not within else ""),
                ADVICE,
            ] + ([] if within else reasons)
            return out
    out.verdict = "fail" if reasons else "pass"
    return out


def _check_log_probabilities(
    out: OutputComparison,
    info: OutputInfo,
    expected: np.ndarray,
    actual: np.ndarray,
    tolerance: Tolerance,
    noise: OutputNoise | None,
    quantized: bool,
) -> None:
    """Float probabilities of an fp32 pair: their logarithms may move ``noise_factor`` times
    their own log noise (at least fp32's resolution, eps x max(1, max|log p|)), so a
    saturated softmax cannot hide a change of the logits. Not for fp16 pairs (fp16 flushes
    probabilities below 6e-8 to 0: log differences near 70 on healthy keyword spotters,
    ``bench/validate_logprob.py``), nor quantized outputs (one step near 0 is a large ratio)."""
    if (
        info.kind != "probabilities"
        or quantized
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
    metrics: Any,
    unit: float,
    quantized: bool,
) -> tuple[float, str, tuple[float | None, float | None]]:
    """The largest max_abs allowed, a sentence saying where it comes from, (noise, resolution)."""
    if tolerance.noise_factor <= 0 or noise is None:
        bound = tolerance.bound(metrics.expected_peak)
        basis = tolerance.basis
        if quantized:
            bound += unit
            basis += "; dequantized: +1 quantization step"
        return bound, basis, (None, None)
    k = tolerance.noise_factor
    if noise.precision != tolerance.precision and not tolerance.basis.startswith("overridden"):
        k = NOISE_FACTOR[noise.precision]  # quantized outputs: the 8-bit grid's factor
    scale = 1.0 if info.kind == "probabilities" else metrics.expected_peak
    resolution = EPS[tolerance.precision] * scale
    if quantized:
        resolution = max(resolution, unit)  # one step is the finest a quantized output moves
        noise_abs = noise.max_abs * unit if noise.precision in STEP_CLASSES else noise.max_abs
    else:
        noise_abs = noise.max_abs
    floor = max(noise_abs, resolution)
    basis = (
        f"{k:g} x max(noise {noise_abs:.3g} [{', '.join(noise.witnesses) or 'none'}], "
        f"resolution {resolution:.3g})"
    )
    return k * floor, basis, (noise_abs, resolution)


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
            *(_dequantized(x, info) if compared.dequantized else x for x in (e, a))
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
