"""The step comparison kind (``validate --steps``): per decode step, a runner's logits and greedy
token against the CPU's, and the first step where they part.

A step *parts* when a logit is not finite, when the greedy token differs from the CPU's, or when
its logits differ from the CPU's by more than :data:`PART_FRACTION` (of the runner's precision
class) of the CPU logits' largest magnitude. Every runner is fed the CPU's tokens (teacher
forcing), so step k is comparable everywhere.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tflkit.delegates.base import RunResult

__all__ = ["PART_FRACTION", "compare_steps", "logits_of", "tokens_of"]

#: Per precision class, the fraction of the CPU logits' largest magnitude a step may differ by.
#: fp16 stores about 3 decimal digits. Measured on the tiny LLM corpus (random weights, 4 decode
#: steps; ``PYTHONPATH=. python bench/step_part_fraction.py``, ``--gpu`` for the GPU runners):
#: the fp16 emulation differs by at most 1.2e-3 of the range (phi2 1.16e-3, tinyllama 1.21e-3:
#: 2e-2 is 17x above), LiteRT's reference kernels by at most 5.8e-7 (1e-4 is 170x above); the
#: GPU stays under both on the inlined corpus (``tests/test_llm_graphs.py``); a planted fp16
#: overflow makes the logits non-finite at its step. gemma as exported parts on the CPU runners
#: by 0.41 of the range: XNNPACK's multi-query attention kernel computes something else than the
#: decomposition (docs/llm.md: "Gemma disagrees three ways"), a real part, not noise.
PART_FRACTION = {"fp16": 2e-2, "fp32": 1e-4}


def logits_of(result: RunResult) -> list[np.ndarray]:
    """The logits of every decode step of a step runner's result."""
    return [np.asarray(out["logits"]) for out in result.outputs]


def tokens_of(result: RunResult) -> list[int]:
    """The greedy token of every decode step of a step runner's result."""
    return [int(out["token"]) for out in result.outputs]


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
