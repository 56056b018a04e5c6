"""The runner protocol: turn input sets into outputs and record what really executed.

A runner knows nothing about comparison (Polygraphy's split). ``activate`` prepares it (load,
compile), ``infer`` runs every input set, ``deactivate`` frees it; :func:`execute` drives the
three and turns any failure into a :class:`RunResult` whose ``status`` says what happened, so a
crash, a hang or a refused model is a finding, never an exception that kills the caller.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from tflkit.jsonable import plain

__all__ = ["STATUSES", "Feed", "RunResult", "Runner", "RunnerUnavailable", "execute"]

Feed = Mapping[str, np.ndarray]

#: ``ok`` ran every input set; ``unavailable`` could not start (missing file, TensorFlow absent);
#: ``compile_error`` the runtime refused the model; ``run_error`` inference raised; ``crashed`` the
#: runtime killed its process; ``timeout`` it hung and was killed.
STATUSES = ("ok", "unavailable", "compile_error", "run_error", "crashed", "timeout")


@dataclass
class RunResult:
    """What one runner produced and what it really ran on.

    ``outputs`` has one dict per input set (output name -> array; outputs the runtime cannot read
    back are absent and explained in ``unreadable``). ``executed`` records the facts: runtime,
    accelerator, kernels, precision, adapter, whether the graph was fully delegated and which ops
    fell back to the CPU. Times are the runner's own: one compile, then one figure per inference.
    """

    runner: str
    status: str
    outputs: list[dict[str, np.ndarray]] = field(default_factory=list)
    unreadable: dict[str, str] = field(default_factory=dict)
    executed: dict[str, Any] = field(default_factory=dict)
    compile_seconds: float | None = None
    infer_seconds: list[float] = field(default_factory=list)
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    wall_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Every input set ran."""
        return self.status == "ok"

    @property
    def own_seconds(self) -> float:
        """Compile plus inference time as the runtime measured it (the benchmark's denominator)."""
        return (self.compile_seconds or 0.0) + sum(self.infer_seconds)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready summary (no arrays)."""
        n = len(self.infer_seconds)
        return plain(
            {
                "runner": self.runner,
                "status": self.status,
                "error": self.error,
                "executed": self.executed,
                "unreadable_outputs": self.unreadable,
                "compile_seconds": self.compile_seconds,
                "inference_seconds": {
                    "count": n,
                    "total": sum(self.infer_seconds),
                    "mean": sum(self.infer_seconds) / n if n else None,
                    "min": min(self.infer_seconds) if n else None,
                    "max": max(self.infer_seconds) if n else None,
                },
                "wall_seconds": self.wall_seconds,
                "notes": self.notes,
            }
        )


@runtime_checkable
class Runner(Protocol):
    """Anything that turns input sets into outputs: a runtime, an accelerator, a framework."""

    name: str

    def activate(self) -> None:
        """Load or compile; raise on failure (``execute`` records it)."""

    def infer(self, feeds: Sequence[Feed]) -> RunResult:
        """Run every input set and return the outputs with what executed."""
        ...

    def deactivate(self) -> None:
        """Release what ``activate`` took."""


def execute(runner: Runner, feeds: Sequence[Feed]) -> RunResult:
    """activate, infer, deactivate; any exception becomes a result with a status and one line."""
    start = time.perf_counter()
    try:
        runner.activate()
    except Exception as exc:
        result = RunResult(runner.name, getattr(exc, "status", "compile_error"), error=_line(exc))
        result.wall_seconds = time.perf_counter() - start
        return result
    try:
        result = runner.infer(feeds)
    except Exception as exc:
        result = RunResult(runner.name, getattr(exc, "status", "run_error"), error=_line(exc))
    finally:
        runner.deactivate()
    result.wall_seconds = time.perf_counter() - start
    return result


class RunnerUnavailable(RuntimeError):
    """The runner cannot start here (missing file, missing framework); status ``unavailable``."""

    status = "unavailable"


def _line(exc: BaseException) -> str:
    text = " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
    return text or type(exc).__name__
