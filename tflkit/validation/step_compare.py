"""``validate --steps``: the report of a steps run and the fix its parts point to.

The comparison itself (per step, each runner's logits against the CPU's, where they part) is the
step comparison kind, :mod:`tflkit.compare.steps`; the report's terminal rendering is
:mod:`tflkit.report.steps_report`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from tflkit.compare.steps import PART_FRACTION, compare_steps
from tflkit.delegates.base import find_spec
from tflkit.jsonable import plain
from tflkit.validation.llm_program import KvProgram

__all__ = ["PART_FRACTION", "StepsReport", "compare_steps", "fix_for", "num"]


@dataclass
class StepsReport:
    """What ``validate --steps`` found: per runner, per step."""

    model: str
    program: KvProgram
    prompt: list[int]
    steps: int
    cpu_tokens: list[int]
    runs: dict[str, dict[str, Any]]
    wall_seconds: float = 0.0
    #: ``--localize``: the ops of the parting step's decode call, run alone (or why not)
    localization: dict[str, Any] | None = None
    #: the kind of subject (:mod:`tflkit.validation.pipeline`)
    kind: ClassVar[str] = "steps"

    @property
    def ok(self) -> bool:
        """Every runner ran and none parted from the CPU."""
        return all(r["status"] == "ok" and r["first_part"] is None for r in self.runs.values())

    @property
    def exit_code(self) -> int:
        """0 when :attr:`ok`, else 1."""
        return 0 if self.ok else 1

    def to_json(self) -> dict[str, Any]:
        return plain(
            {
                "kind": "validate_steps",
                "model": self.model,
                "ok": self.ok,
                "program": self.program.to_json(),
                "prompt": self.prompt,
                "steps": self.steps,
                "cpu_tokens": self.cpu_tokens,
                "runs": self.runs,
                "localization": self.localization,
                "fix": self.fix,
                "seconds": self.wall_seconds,
            }
        )

    @property
    def fix(self) -> str | None:
        """What to do about a part: fp32 on the GPU when fp16 parts and fp32 holds (the fix
        LiteRT offers: the GPU options' fp32 precision), else what the parts say."""
        return fix_for(self.runs)


def fix_for(runs: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The fix a steps run points to, None when nothing parted.

    fp16 parting (on the GPU, or in the emulation) while the GPU in fp32 holds at every step is
    a precision problem with LiteRT's own fix: the GPU accelerator's options in fp32 precision
    (``GpuOptions(enforce_f32=True)`` in Python; the precision option of the GPU options in the
    other bindings). The GPU parting in fp32 too computes something else: no precision setting
    fixes that.
    """

    def parted(name: str) -> bool:
        run = runs.get(name)
        return run is not None and run["status"] == "ok" and run["first_part"] is not None

    gpu16, gpu32 = (find_spec(device="gpu", precision=p).name for p in ("fp16", "fp32"))
    fp16 = [name for name in (gpu16, find_spec(emulated=True).name) if parted(name)]
    fp32 = runs.get(gpu32)
    if parted(gpu32):
        return (
            "the GPU parts from the CPU in fp32 too: not precision, a different computation "
            "(--localize names the first op where it parts)"
        )
    if not fp16:
        return None
    if fp32 is not None and fp32["status"] == "ok":
        return (
            "run the GPU in fp32 (LiteRT's GPU options, fp32 precision: enforce_f32); "
            f"{gpu32} agrees with the CPU at every step where {' and '.join(fp16)} part"
        )
    return f"{' and '.join(fp16)} part: add -r {gpu32} to see whether fp32 on the GPU holds"


def num(x: float | str) -> str:
    """A JSON number (``plain`` writes non-finite ones as strings) for a terminal line."""
    return x if isinstance(x, str) else f"{x:.3g}"
