"""How much a model's outputs move on their own: the yardstick every verdict is scaled by.

A GPU (or any other runner) stores values at some precision; the first thing it does is round
the inputs to it, and every op's output is rounded again. So the CPU's response to a random
relative perturbation of the inputs of the size of that precision's rounding (``eps``) is the
smallest error a correct runner at that precision makes on this model, on these inputs: an
ill-conditioned model (deep, with cancellation, with steep activations) moves a lot, a
well-conditioned one hardly at all. For fp32 the spread between the two CPU paths (XNNPACK and
the reference kernels) is a second witness and the larger of the two counts.

``noise`` holds, per output and per precision, the element-wise largest response over
``trials`` perturbations (arrays stacked over input sets like the comparator's), and summary
figures for the report. Integer outputs have no noise (they are compared exactly, or in steps).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tflkit.jsonable import plain

__all__ = [
    "EPS",
    "FLIPS",
    "LOG_FLOOR",
    "SAME_GRID",
    "STEP_CLASSES",
    "OutputNoise",
    "log_diff",
    "log_peak",
    "measure",
    "perturb",
]

#: relative perturbation per precision: fp16's unit roundoff (2^-11: what rounding an fp32 input
#: to fp16 does), one ulp of fp32 (2^-23: its unit roundoff, 2^-24, would round back to the same
#: float32 for most values) and one step of an 8-bit grid (2^-8) for quantized models.
EPS = {"fp32": 2.0**-23, "fp16": 2.0**-11, "int8": 2.0**-8}
#: a quantized model against a half-precision runner: the 8-bit grid's noise including one-step
#: flips of every quantized activation (:mod:`tflkit.delegates.step_flips`)
FLIPS = "int8-fp16"
EPS[FLIPS] = EPS["int8"]
#: a quantized model against a ``.tflite`` reference with the same quantized inputs and outputs
#: (a rewritten copy, a re-export), both run by the same integer kernels (XNNPACK) on identical
#: integer inputs: nothing moves, so the bound is the factor times one step (docs/validate.md)
SAME_GRID = "int8-same-grid"
EPS[SAME_GRID] = EPS["int8"]
#: precision classes whose quantized outputs are measured in quantization steps
STEP_CLASSES = ("int8", FLIPS, SAME_GRID)
#: the smallest normal float32: a probability below it has lost its relative precision, so
#: log-probabilities are compared with values clamped to it (see :func:`log_diff`)
LOG_FLOOR = float(np.finfo(np.float32).tiny)


@dataclass
class OutputNoise:
    """One output's own movement at one precision (figures pooled over input sets)."""

    precision: str
    eps: float
    rms: float
    max_abs: float
    witnesses: list[str] = field(default_factory=list)
    elements: np.ndarray | None = field(default=None, repr=False, compare=False)
    #: fp32, outputs in [0, 1]: the largest movement of log(value) (see :func:`log_diff`)
    log_max_abs: float | None = None

    def widened(self, other: OutputNoise) -> OutputNoise:
        """The element-wise larger of two measurements of the same output, witnesses of both."""
        elements = self.elements
        if elements is not None and other.elements is not None:
            elements = np.fmax(elements, other.elements)
        logs = [v for v in (self.log_max_abs, other.log_max_abs) if v is not None]
        return OutputNoise(
            self.precision,
            self.eps,
            rms=max(self.rms, other.rms),
            max_abs=max(self.max_abs, other.max_abs),
            witnesses=list(dict.fromkeys(self.witnesses + other.witnesses)),
            elements=elements,
            log_max_abs=max(logs) if logs else None,
        )

    def to_json(self) -> dict[str, Any]:
        return plain(
            {
                "precision": self.precision,
                "eps": self.eps,
                "rms": self.rms,
                "max_abs": self.max_abs,
                "log_max_abs": self.log_max_abs,
                "witnesses": self.witnesses,
            }
        )


def perturb(
    feeds: Sequence[Mapping[str, np.ndarray]],
    eps: float,
    seed: int,
    quant: Mapping[str, tuple[float, int]] | None = None,
    steps: Mapping[str, float] | None = None,
) -> list[dict[str, np.ndarray]]:
    """Feeds with every float value scaled by ``1 + eps*u``, ``u`` uniform in [-1, 1].

    Quantized integer inputs (``quant`` names them) move by one step on a random half of their
    elements when ``eps`` is the 8-bit grid's; so do float inputs a QUANTIZE op puts on a grid
    (``steps`` gives that grid's step: a relative ``eps`` would round away where values are
    small); other integer inputs (indices) are left alone.
    """
    rng = np.random.default_rng(seed)
    out = []
    for feed in feeds:
        moved = {}
        for name, value in feed.items():
            value = np.asarray(value)
            if value.dtype.kind == "f" and steps and name in steps and eps >= EPS["int8"]:
                step = steps[name] * rng.integers(-1, 2, value.shape)
                moved[name] = (value.astype(np.float64) + step).astype(value.dtype)
            elif value.dtype.kind == "f":
                factor = 1.0 + eps * rng.uniform(-1.0, 1.0, value.shape)
                moved[name] = (value.astype(np.float64) * factor).astype(value.dtype)
            elif quant and name in quant and eps >= EPS["int8"]:
                info = np.iinfo(value.dtype)
                step = rng.integers(-1, 2, value.shape)
                moved[name] = np.clip(value.astype(np.int64) + step, info.min, info.max).astype(
                    value.dtype
                )
            else:
                moved[name] = value
        out.append(moved)
    return out


def measure(
    base: Sequence[Mapping[str, np.ndarray]],
    moved: Sequence[Sequence[Mapping[str, np.ndarray]]],
    precision: str,
    *,
    spread: Sequence[Mapping[str, np.ndarray]] | None = None,
    dequantize: Mapping[str, tuple[float, int]] | None = None,
    labels: Sequence[str] | None = None,
) -> dict[str, OutputNoise]:
    """Per output, the element-wise largest |moved - base| (and |spread - base|) over trials.

    ``base``/``moved``/``spread``: one dict of outputs per input set; ``labels`` name the
    ``moved`` trials (default: the input perturbation). Quantized outputs named in
    ``dequantize`` are measured in steps (integer differences).
    """
    noise: dict[str, OutputNoise] = {}
    if not base:
        return noise
    for name in base[0]:
        ref = np.stack([np.asarray(b[name]) for b in base])
        steps = ref.dtype.kind in "iu" and name in (dequantize or {})
        if ref.dtype.kind != "f" and not steps:
            continue
        ref64 = ref.astype(np.float64)
        worst = np.zeros_like(ref64)
        witnesses = []
        others = []
        for number, trial in enumerate(moved):
            if any(name not in t for t in trial):
                continue
            other = np.stack([np.asarray(t[name]) for t in trial]).astype(np.float64)
            worst = np.fmax(worst, _abs_diff(ref64, other))
            others.append(other)
            witnesses.append(
                labels[number] if labels else f"inputs x(1+{EPS.get(precision, 0):.3g}u)"
            )
        if spread is not None and all(name in s for s in spread):
            other = np.stack([np.asarray(s[name]) for s in spread]).astype(np.float64)
            worst = np.fmax(worst, _abs_diff(ref64, other))
            others.append(other)
            witnesses.append("XNNPACK vs reference kernels")
        finite = worst[np.isfinite(worst)]
        log_noise = None
        if precision == "fp32" and not steps and _unit_interval(ref64):
            log_noise = max((log_diff(ref64, o) for o in others), default=0.0)
        noise[name] = OutputNoise(
            precision,
            EPS[precision],
            rms=float(np.sqrt(np.mean(finite**2))) if finite.size else 0.0,
            max_abs=float(finite.max()) if finite.size else 0.0,
            witnesses=list(dict.fromkeys(witnesses)),
            elements=worst,
            log_max_abs=log_noise,
        )
    return noise


def _unit_interval(values: np.ndarray) -> bool:
    finite = values[np.isfinite(values)]
    return bool(finite.size) and float(finite.min()) >= 0.0 and float(finite.max()) <= 1.0


def log_diff(expected: np.ndarray, actual: np.ndarray) -> float:
    """The largest |log a - log e| over finite elements, both clamped to :data:`LOG_FLOOR`.

    Where a softmax saturates, its probabilities hide what moved before it (a class at 4e-9
    against 2e-10 differs by 4e-9, within any bound on values near 1): their logarithms, the
    logits up to a shift, do not.
    """
    e = np.asarray(expected, np.float64)
    a = np.asarray(actual, np.float64)
    both = np.isfinite(e) & np.isfinite(a)
    if not both.any():
        return 0.0
    diff = np.log(np.maximum(a[both], LOG_FLOOR)) - np.log(np.maximum(e[both], LOG_FLOOR))
    return float(np.max(np.abs(diff)))


def log_peak(values: np.ndarray) -> float:
    """The largest |log value| (clamped to :data:`LOG_FLOOR`): the scale of log-probabilities,
    whose fp32 resolution is eps times it (a class at 4e-9 has a logit about 19 below the top)."""
    v = np.asarray(values, np.float64)
    finite = v[np.isfinite(v)]
    return float(np.max(np.abs(np.log(np.maximum(finite, LOG_FLOOR))))) if finite.size else 0.0


def _abs_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    both = np.isfinite(a) & np.isfinite(b)
    return np.where(both, np.abs(np.where(both, a - b, 0.0)), 0.0)
