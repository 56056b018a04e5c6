"""Where two runs of a model part: per-op divergence records and the localization they form.

Arrays only: how far an actual value is from the expected one (:func:`divergence`), the record of
one op (:class:`OpError`) and the picture for one runner (:class:`Localization`).
:mod:`tflkit.validation.localize` runs the models that fill them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tflkit.delegates.base import find_spec
from tflkit.jsonable import plain


@dataclass
class Divergence:
    """GPU vs CPU on one op's outputs: ``score = max_abs / peak`` (inf for new non-finite)."""

    max_abs: float
    peak: float
    score: float
    new_nonfinite: int

    def to_json(self) -> dict[str, Any]:
        return plain(
            {
                "max_abs": self.max_abs,
                "peak": self.peak,
                "score": self.score,
                "new_nonfinite": self.new_nonfinite,
            }
        )


@dataclass
class OpError:
    """One op of the main subgraph, its isolated and accumulated error and its fp16 hazards."""

    op_index: int
    op_type: str
    outputs: list[str]
    status: str = "ok"
    error: str | None = None
    fully_accelerated: bool | None = None
    isolated: Divergence | None = None
    accumulated: Divergence | None = None
    overflow: int = 0
    underflow: int = 0
    flushed: int = 0
    cpu_max_abs: float = 0.0
    inherited: bool = False
    #: against a ``.tflite`` reference: an input's reference values leave this model's grid
    #: (clipped when put on it), so the op's isolated error is partly inherited
    off_grid: bool = False

    @property
    def own_fault(self) -> bool:
        """Its own outputs leave the fp16 range, or it makes inf/NaN from representable inputs."""
        if self.inherited:
            return False
        return bool(self.overflow) or (
            self.isolated is not None and self.isolated.new_nonfinite > 0
        )

    @property
    def score(self) -> float:
        return self.isolated.score if self.isolated is not None else -1.0

    @property
    def hazards(self) -> list[str]:
        found = []
        if self.overflow:
            found.append(
                f"{self.overflow} values above fp16 max 65504 (max |x| "
                f"{self.cpu_max_abs:.4g}): overflow to inf"
            )
        if self.flushed:
            found.append(f"{self.flushed} non-zero values below 6e-8: flushed to 0 in fp16")
        elif self.underflow:
            found.append(f"{self.underflow} non-zero values below 6.1e-5: fp16 subnormals")
        return found

    def to_json(self) -> dict[str, Any]:
        return plain(
            {
                "op_index": self.op_index,
                "op_type": self.op_type,
                "outputs": self.outputs,
                "status": self.status,
                "error": self.error,
                "fully_accelerated": self.fully_accelerated,
                "isolated": self.isolated,
                "accumulated": self.accumulated,
                "fp16_overflow": self.overflow,
                "fp16_underflow": self.underflow,
                "fp16_flushed": self.flushed,
                "hazards": self.hazards,
                "input_not_fp16_representable": self.inherited,
                "input_off_grid": self.off_grid,
            }
        )


@dataclass
class Localization:
    """The per-op picture for one GPU runner against the CPU."""

    runner: str
    threshold: float
    ops: list[OpError] = field(default_factory=list)
    culprits: list[OpError] = field(default_factory=list)
    first_divergent: OpError | None = None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    against: str = field(default_factory=lambda: find_spec(kernels="reference").name)
    #: why localization could not run (then ``ops`` is empty), else None
    unavailable: str | None = None

    def to_json(self) -> dict[str, Any]:
        return plain(
            {
                "runner": self.runner,
                "against": self.against,
                "unavailable": self.unavailable,
                "threshold": self.threshold,
                "culprits": [op.op_index for op in self.culprits],
                "first_divergent": self.first_divergent.op_index if self.first_divergent else None,
                "ops": self.ops,
                "notes": self.notes,
                "seconds": self.seconds,
            }
        )


#: Expected values this large stand for an infinity (an additive mask filled with float32's
#: lowest value, as litert-torch's masks and the ones ``--steps`` builds are): an actual
#: infinity, or a value past fp16's largest (65504), of the same sign agrees with them.
SENTINEL = 1e38
_FP16_MAX = 65504.0


def divergence(expected: np.ndarray, actual: np.ndarray) -> Divergence:
    """Max abs difference over finite pairs, relative to the expected peak."""
    e = np.asarray(expected, np.float64).reshape(-1)
    a = np.asarray(actual, np.float64).reshape(-1)
    fin_e, fin_a = np.isfinite(e), np.isfinite(a)
    saturated = (np.abs(e) >= SENTINEL) & (np.abs(a) >= _FP16_MAX) & (np.sign(a) == np.sign(e))
    saturated &= fin_e
    fin_e = fin_e & ~saturated
    both = fin_e & fin_a
    new_nonfinite = int((fin_e & ~fin_a).sum())
    max_abs = float(np.max(np.abs(a[both] - e[both]))) if both.any() else 0.0
    peak = float(np.max(np.abs(e[fin_e]))) if fin_e.any() else 0.0
    if new_nonfinite:
        score = math.inf
    else:
        score = max_abs / peak if peak > 0 else (0.0 if max_abs == 0 else math.inf)
    return Divergence(max_abs, peak, score, new_nonfinite)


def merge(parts: list[Divergence]) -> Divergence:
    """The worst of several divergences (of one op's outputs)."""
    return max(parts, key=lambda d: (d.score, d.max_abs))
