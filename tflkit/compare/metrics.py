"""Error metrics between an expected array and an actual one; nothing here knows about runners.

Definitions (``e`` expected, ``a`` actual, ``d = a - e``, over finite pairs, in float64):

- ``max_abs = max|d|``, ``mean_abs = mean|d|``, ``rmse = sqrt(mean d²)``
- ``max_rel = max(|d| / max(|e|, rel_floor))`` with ``rel_floor = 1e-3 * max|e|`` (or 1e-12 when
  ``e`` is all zeros), so values near zero do not turn rounding noise into huge ratios
- ``cosine = e·a / (|e| |a|)`` (1 when both are all zeros)
- ``snr_db = 10 log10(Σe² / Σd²)`` (inf when ``d`` is all zeros)
- ``psnr_db = 20 log10(peak / rmse)`` with ``peak = max|e|`` (inf when ``rmse`` is 0)
- NaN / Inf counts on each side; pairs where either side is not finite are left out of the above
  and ``mismatched_nonfinite`` counts the pairs where the two sides disagree about finiteness
- classifier-shaped outputs (rank 2, second dim ≥ 2; or rank 1 of a set of such rows): ``top1``
  is the fraction of rows with the same argmax, ``top5`` the fraction of rows whose top-5 sets
  (order ignored) are equal (None when there are fewer than 5 classes)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tflkit.jsonable import plain_fields

__all__ = ["ErrorHistogram", "Metrics", "compute", "error_histogram", "is_classifier_shaped"]

REL_FLOOR_FRACTION = 1e-3
HIST_EDGES = tuple(float(e) for e in range(-12, 5))  # log10 |d| bins: 1e-12 .. 1e4


@dataclass
class ErrorHistogram:
    """Counts of ``log10|d|`` in unit bins from ``edges``; zeros and non-finite counted apart."""

    edges: list[float]
    counts: list[int]
    zeros: int
    below: int
    above: int
    nonfinite: int

    def to_json(self) -> dict[str, Any]:
        return plain_fields(self)


@dataclass
class Metrics:
    """Every figure for one output (pooled over all input sets)."""

    elements: int
    max_abs: float
    mean_abs: float
    rmse: float
    max_rel: float
    cosine: float
    snr_db: float
    psnr_db: float
    expected_peak: float
    nan_expected: int = 0
    nan_actual: int = 0
    inf_expected: int = 0
    inf_actual: int = 0
    mismatched_nonfinite: int = 0
    top1: float | None = None
    top5: float | None = None
    argmax_index: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return plain_fields(self)


def is_classifier_shaped(shape: tuple[int, ...]) -> bool:
    """(rows, classes) with at least 2 classes; a rank-1 vector counts as one row."""
    if len(shape) == 2:
        return shape[1] >= 2
    return len(shape) == 1 and shape[0] >= 2


def _topk(expected: np.ndarray, actual: np.ndarray) -> tuple[float | None, float | None]:
    rows_e = expected.reshape(-1, expected.shape[-1])
    rows_a = actual.reshape(-1, actual.shape[-1])
    top1 = float(np.mean(np.argmax(rows_e, axis=1) == np.argmax(rows_a, axis=1)))
    if rows_e.shape[1] < 5:
        return top1, None
    top_e = np.sort(np.argsort(-rows_e, axis=1, kind="stable")[:, :5], axis=1)
    top_a = np.sort(np.argsort(-rows_a, axis=1, kind="stable")[:, :5], axis=1)
    return top1, float(np.mean(np.all(top_e == top_a, axis=1)))


def compute(expected: np.ndarray, actual: np.ndarray, *, classifier: bool | None = None) -> Metrics:
    """All metrics of ``actual`` against ``expected`` (same shape; any numeric or bool dtype).

    ``classifier`` forces (or suppresses) top-k agreement; by default it is computed when the
    arrays' shape is classifier-shaped (for stacked input sets pass the per-set shape's answer).
    """
    expected = np.asarray(expected)
    actual = np.asarray(actual)
    if expected.shape != actual.shape:
        raise ValueError(f"shapes differ: expected {expected.shape}, actual {actual.shape}")
    e = expected.astype(np.float64).reshape(-1)
    a = actual.astype(np.float64).reshape(-1)
    fin_e, fin_a = np.isfinite(e), np.isfinite(a)
    both = fin_e & fin_a
    e_f, a_f = e[both], a[both]
    d = a_f - e_f
    absd = np.abs(d)
    n = int(e.size)
    peak = float(np.max(np.abs(e_f))) if e_f.size else 0.0
    floor = REL_FLOOR_FRACTION * peak if peak > 0 else 1e-12
    sum_e2 = float(np.dot(e_f, e_f))
    sum_a2 = float(np.dot(a_f, a_f))
    sum_d2 = float(np.dot(d, d))
    rmse = math.sqrt(sum_d2 / d.size) if d.size else 0.0
    if sum_e2 == 0.0 and sum_a2 == 0.0:
        cosine = 1.0
    elif sum_e2 == 0.0 or sum_a2 == 0.0:
        cosine = 0.0
    else:
        cosine = float(np.dot(e_f, a_f) / math.sqrt(sum_e2 * sum_a2))
    snr = (
        math.inf
        if sum_d2 == 0.0
        else (10.0 * math.log10(sum_e2 / sum_d2) if sum_e2 > 0 else -math.inf)
    )
    psnr = math.inf if rmse == 0.0 else (20.0 * math.log10(peak / rmse) if peak > 0 else -math.inf)
    metrics = Metrics(
        elements=n,
        max_abs=float(absd.max()) if absd.size else 0.0,
        mean_abs=float(absd.mean()) if absd.size else 0.0,
        rmse=rmse,
        max_rel=float(np.max(absd / np.maximum(np.abs(e_f), floor))) if absd.size else 0.0,
        cosine=cosine,
        snr_db=snr,
        psnr_db=psnr,
        expected_peak=peak,
        nan_expected=int(np.isnan(e).sum()),
        nan_actual=int(np.isnan(a).sum()),
        inf_expected=int(np.isinf(e).sum()),
        inf_actual=int(np.isinf(a).sum()),
        mismatched_nonfinite=int((fin_e != fin_a).sum()),
    )
    if classifier is None:
        classifier = is_classifier_shaped(expected.shape)
    if classifier and expected.ndim >= 1 and expected.shape[-1] >= 2:
        metrics.top1, metrics.top5 = _topk(expected.astype(np.float64), actual.astype(np.float64))
    if absd.size:
        metrics.argmax_index = [
            int(i)
            for i in np.unravel_index(
                int(np.flatnonzero(both)[int(np.argmax(absd))]), expected.shape
            )
        ]
    return metrics


def error_histogram(expected: np.ndarray, actual: np.ndarray) -> ErrorHistogram:
    """Histogram of ``log10|actual - expected|`` over finite pairs, unit bins 1e-12 .. 1e4."""
    e = np.asarray(expected, np.float64).reshape(-1)
    a = np.asarray(actual, np.float64).reshape(-1)
    both = np.isfinite(e) & np.isfinite(a)
    d = np.abs(a[both] - e[both])
    zeros = int((d == 0).sum())
    logs = np.log10(d[d > 0])
    edges = np.asarray(HIST_EDGES)
    counts, _ = np.histogram(logs, bins=edges)
    return ErrorHistogram(
        edges=list(HIST_EDGES),
        counts=[int(c) for c in counts],
        zeros=zeros,
        below=int((logs < edges[0]).sum()),
        above=int((logs > edges[-1]).sum()),
        nonfinite=int((~both).sum()),
    )
