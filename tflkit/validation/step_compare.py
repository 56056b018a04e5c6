"""``validate --steps``: per step, each runner's logits against the CPU's, where they part, the
fix that points to, and the report.

A step "parts" when its logits differ from the CPU's by more than :data:`PART_FRACTION` of the
CPU logits' largest magnitude (for the runner's precision class), or when the greedy token
differs, or when a logit is not finite.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tflkit.delegates.base import RunResult, find_spec
from tflkit.delegates.step_runner import logits_of, tokens_of
from tflkit.jsonable import plain
from tflkit.validation.llm_program import KvProgram

__all__ = ["PART_FRACTION", "StepsReport", "compare_steps", "fix_for", "num"]

#: per precision class, the fraction of the CPU logits' range a step may differ by (fp16 stores
#: about 3 decimal digits)
PART_FRACTION = {"fp16": 2e-2, "fp32": 1e-4}


@dataclass
class StepsReport:
    """What ``validate --steps`` found: per runner, per step."""

    model: str
    program: KvProgram
    prompt: list[int]
    steps: int
    cpu_tokens: list[int]
    runs: dict[str, dict[str, Any]]
    seconds: float
    #: ``--localize``: the ops of the parting step's decode call, run alone (or why not)
    localization: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        """Every runner ran and none parted from the CPU."""
        return all(r["status"] == "ok" and r["first_part"] is None for r in self.runs.values())

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
                "seconds": self.seconds,
            }
        )

    @property
    def fix(self) -> str | None:
        """What to do about a part: fp32 on the GPU when fp16 parts and fp32 holds (the fix
        LiteRT offers: the GPU options' fp32 precision), else what the parts say."""
        return fix_for(self.runs)

    def lines(self) -> list[str]:
        """The short terminal section."""
        out = [*_program_lines(self.model, self.steps, self.program)]
        out.append(f"cpu greedy tokens: {self.cpu_tokens}")
        for name, run in self.runs.items():
            if run["status"] != "ok":
                out.append(f"{name}: {run['status']}: {run.get('error') or ''}".rstrip())
                continue
            per = run["per_step"]
            worst = max(per, key=lambda s: s["max_abs"])
            part = run["first_part"]
            verdict = (
                "agrees with the CPU at every step"
                if part is None
                else f"parts from the CPU at step {part['step']} ({part['why']})"
            )
            out.append(
                f"{name}: {verdict}; max abs per step "
                + " ".join(_fmt(s["max_abs"]) for s in per)
                + f" (worst {_fmt(worst['max_abs'])} at step {worst['step']}); tokens "
                f"{'same' if run['tokens'] == self.cpu_tokens else run['tokens']}"
            )
            for note in run.get("notes", []):
                out.append(f"  {note}")
        loc = self.localization
        if loc is not None and loc.get("unavailable") and loc.get("step") is None:
            out.append(f"localization: {loc['unavailable']}")
        if self.fix is not None:
            out.append(f"fix: {self.fix}")
        return out


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


def _program_lines(model: str, steps: int, p: KvProgram) -> list[str]:
    """How the steps run: prefill or the prompt through decode, the mask, the cache length."""
    cache = f"cache {', '.join(p.cache[:2])}... fed back by name"
    if p.prefill is not None:
        lines = [
            f"{model}: {steps} decode steps after a {p.prefill_len}-token prefill "
            f"({p.prefill} -> {p.decode}, {cache})"
            if p.prompt_len is None
            else f"{model}: {steps} decode steps after a {p.prompt_len}-token prompt padded into "
            f"{p.prefill} ({p.prefill_len} tokens; {p.prefill} -> {p.decode}, {cache})"
        ]
    else:
        lines = [
            f"{model}: {steps} decode steps after a {p.prompt_length}-token prompt run through "
            f"{p.decode} one token per call (no prefill signature; {cache})"
        ]
    if p.mask_specs:
        shapes = ", ".join(f"{k} {list(s)}" for k, (_, s, _) in p.mask_specs.items())
        lines.append(
            f"mask input {p.mask or next(iter(p.mask_specs.values()))[0]!r} ({shapes}) built "
            f"every call: 0 up to the position, the dtype's lowest after it; cache length "
            f"{p.cache_len} from {p.cache_len_from}"
        )
    return lines


def num(x: float | str) -> str:
    """A JSON number (``plain`` writes non-finite ones as strings) for a terminal line."""
    return x if isinstance(x, str) else f"{x:.3g}"


def _fmt(x: float) -> str:
    return "inf" if not np.isfinite(x) else f"{x:.2g}"


def compare_steps(run: RunResult, reference: RunResult, part_fraction: float) -> dict[str, Any]:
    """Per step: max abs of the logits against ``reference``, both greedy tokens, whether the
    step parts; and the first step that parts (both: step runners' results)."""
    tokens = tokens_of(run)
    result: dict[str, Any] = {
        "status": run.status,
        "error": run.error,
        "executed": run.executed,
        "seconds": run.wall_seconds,
        "tokens": tokens,
        "per_step": [],
        "first_part": None,
        "part_fraction": part_fraction,
    }
    if run.status != "ok":
        return result
    ref_tokens = tokens_of(reference)
    for k, (got, want) in enumerate(zip(logits_of(run), logits_of(reference), strict=False)):
        finite = bool(np.isfinite(got).all())
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        max_abs = float(diff.max()) if finite else float("inf")
        scale = float(np.abs(want).max()) or 1.0
        token, ref_token = tokens[k], ref_tokens[k]
        result["per_step"].append(
            {
                "step": k,
                "max_abs": max_abs,
                "max_rel_to_range": max_abs / scale,
                "token": token,
                "cpu_token": ref_token,
                "finite": finite,
            }
        )
        if result["first_part"] is None:
            why = _why_parted(finite, (token, ref_token), max_abs, part_fraction, scale)
            if why:
                result["first_part"] = {"step": k, "why": why}
    return result


def _why_parted(
    finite: bool, tokens: tuple[int, int], max_abs: float, fraction: float, scale: float
) -> str | None:
    """Why a step parts (its greedy token and the CPU's, its logits' max abs difference, the
    fraction of the CPU logits' range ``scale`` allowed), None when it does not."""
    if not finite:
        return "non-finite logits"
    if tokens[0] != tokens[1]:
        return f"greedy token {tokens[0]} != cpu {tokens[1]}"
    if max_abs > fraction * scale:
        return f"max abs {max_abs:.3g} > {fraction:g} x logit range {scale:.3g}"
    return None
