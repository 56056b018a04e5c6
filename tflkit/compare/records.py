"""What a comparison produces: what the model says about an output (:class:`OutputInfo`), one
output's metrics and verdict (:class:`OutputComparison`, with its channel groups'), one pair's
(:class:`PairComparison`), and the value sample the HTML report plots."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tflkit.compare.groups import ChannelGroup
from tflkit.compare.metrics import ErrorHistogram, Metrics
from tflkit.compare.tolerances import Tolerance
from tflkit.delegates.base import RunnerPair, pair_key, pair_of
from tflkit.jsonable import plain, plain_fields

__all__ = [
    "SAMPLE_SIZE",
    "GroupComparison",
    "OutputComparison",
    "OutputInfo",
    "PairComparison",
    "dequantized",
    "value_sample",
]


@dataclass(frozen=True)
class OutputInfo:
    """What the model says about one output: dtype, shape, quantization."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    scale: float | None = None
    zero_point: int = 0
    #: "float", "probabilities", "scores", "mask", "sequence", "index", "bool" (see
    #: ``output_kind``)
    kind: str = "float"
    #: the rule that decided ``kind`` (docs/validate.md, "Kinds of output")
    kind_rule: str = ""
    #: parts of the channel axis judged apart, each at its own scale (:mod:`tflkit.compare.groups`)
    groups: tuple[ChannelGroup, ...] = ()


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


def dequantized(values: np.ndarray, info: OutputInfo) -> np.ndarray:
    if values.dtype.kind not in "iu" or not info.scale:
        return values
    return (values.astype(np.float64) - info.zero_point) * info.scale


@dataclass
class GroupComparison:
    """One channel group of one output: its own peak, noise, resolution and bound."""

    label: str
    axis: int
    channels: str
    source: str
    verdict: str
    max_abs: float
    bound: float
    peak: float
    noise: float | None = None
    resolution: float | None = None

    def to_json(self) -> dict[str, Any]:
        return plain_fields(self)


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
    #: outputs with channel groups: each group judged at its own scale
    groups: list[GroupComparison] = field(default_factory=list)
    #: sequences ([T, 1, C] / [1, T, C] logits): share of steps whose argmax agrees, over the
    #: steps where the reference's top-2 margin is clear, and how many steps that is
    sequence_agreement: float | None = None
    clear_steps: int | None = None
    #: (expected, actual) at up to :data:`SAMPLE_SIZE` elements, the largest difference
    #: included, for the HTML report's plot; not in JSON
    sample: tuple[np.ndarray, np.ndarray] | None = field(
        default=None, repr=False, compare=False, metadata={"json": False}
    )

    def to_json(self) -> dict[str, Any]:
        return plain_fields(self)


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
        return pair_key(self.actual, self.expected)

    @property
    def pair(self) -> RunnerPair | None:
        """The two runners as a typed pair (None for a runner outside the registry)."""
        return pair_of(self.actual, self.expected)

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
