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
    is_classifier_shaped,
)
from tflkit.compare.tolerances import EXACT, Tolerance, tolerance_for
from tflkit.delegates.base import RunResult

__all__ = ["OutputComparison", "OutputInfo", "PairComparison", "compare_pair", "default_pairs"]


@dataclass(frozen=True)
class OutputInfo:
    """What the model says about one output: dtype, shape, quantization."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    scale: float | None = None
    zero_point: int = 0


@dataclass
class OutputComparison:
    """One output of one pair. ``verdict``: "pass", "fail" or "unverified"."""

    name: str
    verdict: str
    tolerance: Tolerance
    bound: float | None = None
    metrics: Metrics | None = None
    histogram: ErrorHistogram | None = None
    dequantized: bool = False
    reasons: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "verdict": self.verdict,
            "reasons": self.reasons,
            "tolerance": self.tolerance.to_json(),
            "bound": self.bound,
            "dequantized": self.dequantized,
            "metrics": self.metrics.to_json() if self.metrics else None,
            "histogram": self.histogram.to_json() if self.histogram else None,
        }


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
        return {
            "pair": self.key,
            "actual": self.actual,
            "expected": self.expected,
            "verdict": self.verdict,
            "reason": self.reason,
            "outputs": [o.to_json() for o in self.outputs],
        }


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


def compare_output(
    info: OutputInfo,
    expected: np.ndarray,
    actual: np.ndarray,
    tolerance: Tolerance,
) -> OutputComparison:
    """Metrics and verdict for one output, arrays stacked over input sets."""
    dequantized = False
    if info.scale is not None and np.dtype(info.dtype).kind in "iu":
        expected = (expected.astype(np.float64) - info.zero_point) * info.scale
        actual = (actual.astype(np.float64) - info.zero_point) * info.scale
        tolerance = Tolerance(
            tolerance.rtol,
            tolerance.atol + info.scale,
            0.0,
            tolerance.basis + "; dequantized: +1 quantization step, no cosine bound",
        )
        dequantized = True
    elif np.dtype(info.dtype).kind in "iub":
        tolerance = EXACT
    if expected.shape != actual.shape:
        return OutputComparison(
            info.name,
            "fail",
            tolerance,
            reasons=[f"shapes differ: {actual.shape} vs {expected.shape}"],
        )
    classifier = (
        is_classifier_shaped(tuple(expected.shape[1:])) and np.dtype(info.dtype).kind in "f"
    )
    metrics = compute(expected, actual, classifier=classifier)
    bound = tolerance.bound(metrics.expected_peak)
    reasons = []
    if metrics.max_abs > bound:
        reasons.append(f"max_abs {metrics.max_abs:.3g} > bound {bound:.3g}")
    if metrics.cosine < tolerance.min_cosine:
        reasons.append(f"cosine {metrics.cosine:.6f} < {tolerance.min_cosine}")
    if metrics.mismatched_nonfinite:
        reasons.append(
            f"{metrics.mismatched_nonfinite} values finite on one side only "
            f"(NaN {metrics.nan_actual} vs {metrics.nan_expected}, "
            f"Inf {metrics.inf_actual} vs {metrics.inf_expected})"
        )
    return OutputComparison(
        info.name,
        "fail" if reasons else "pass",
        tolerance,
        bound=bound,
        metrics=metrics,
        histogram=error_histogram(expected, actual),
        dequantized=dequantized,
        reasons=reasons,
    )


def compare_pair(
    actual: RunResult,
    expected: RunResult,
    outputs: Sequence[OutputInfo],
    *,
    overrides: Mapping[str, Mapping[str, float]] | None = None,
) -> PairComparison:
    """Compare every output of ``actual`` with ``expected`` under the pair's tolerance."""
    pair = PairComparison(actual.runner, expected.runner, "skipped")
    failed = [r for r in (actual, expected) if not r.ok]
    if failed:
        pair.reason = "; ".join(f"{r.runner} {r.status}: {r.error or ''}".strip() for r in failed)
        return pair
    if len(actual.outputs) != len(expected.outputs):
        pair.reason = f"{len(actual.outputs)} vs {len(expected.outputs)} input sets ran"
        return pair
    tolerance = tolerance_for(actual.runner, expected.runner, overrides=overrides)
    for info in outputs:
        a, e = _stack(actual, info.name), _stack(expected, info.name)
        if a is None or e is None:
            why = _missing_reason(actual if a is None else expected, info.name)
            pair.outputs.append(OutputComparison(info.name, "unverified", tolerance, reasons=[why]))
            continue
        pair.outputs.append(compare_output(info, e, a, tolerance))
    verdicts = {o.verdict for o in pair.outputs}
    if "fail" in verdicts:
        pair.verdict = "fail"
    elif "pass" in verdicts:
        pair.verdict = "pass"
    else:
        pair.reason = "no output could be compared"
    return pair
