"""The engine's CPU run against its GPU run, prompt by prompt: where the greedy tokens part, and
the per-token score differences (the GPU scoring the CPU's own continuation with
``run_text_scoring``: the logit-level comparison through the shipping runtime).

Scores are the engine's log-probabilities of each token. Constants, measured on the healthy
bundles of the corpus (``python -m bench.llm_bundles``; docs/llm.md, "Bundles"):

- :data:`SCORE_TOL`: on the healthy int8 bundles the GPU's score of a CPU token differs from the
  CPU's by up to 0.27 (the CPU engine runs int8 weights with dynamically quantized int8
  activations, the GPU dequantizes the weights and computes in float: the float bundle on the
  CPU agrees with the GPU within 0.01); a step is *off* beyond 1.0, about four times that, and a
  fault flips a token's score by the whole spread of the logits or makes it non-finite.
- :data:`TIE_BAND`: a greedy token that differs is a *near tie* when the two runtimes rank the
  two candidates within twice :data:`SCORE_TOL` (the CPU's margin plus the GPU's): a swap the
  runtimes' rounding explains, not a fault.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["SCORE_TOL", "TIE_BAND", "PromptComparison", "compare_prompt"]

SCORE_TOL = 0.05
TIE_BAND = 2 * SCORE_TOL

Score = float | None


def _finite(x: Score) -> bool:
    return x is not None and math.isfinite(x)


def _plain(values: list[Score]) -> list[Score | str]:
    """Scores for JSON: non-finite ones as text ("nan", "-inf")."""
    return [round(v, 5) if _finite(v) else str(v).lower() for v in values]  # type: ignore[arg-type]


def _prefers(own: Score, other: Score) -> float | None:
    """``own - other`` (either may be -inf); None when undefined (NaN, or both infinite)."""
    if own is None or other is None or math.isnan(own) or math.isnan(other):
        return None
    if math.isinf(own) and math.isinf(other):
        return None
    return own - other


@dataclass
class PromptComparison:
    """One prompt: the CPU's and a GPU run's greedy tokens and scores, and what they say."""

    prompt: str
    prompt_ids: list[int]
    cpu_ids: list[int]
    gpu_ids: list[int]
    cpu_scores: list[Score]
    gpu_scores: list[Score]  # the GPU's scores of the CPU's continuation
    first_part: int | None
    nonfinite_from: int | None
    worst: float
    worst_step: int | None
    #: at the first parting step, each runtime's score of the GPU's token minus the CPU's token's
    margins: tuple[float, float] | None
    verdict: str  # agrees | consistent | parts | non-finite | off
    #: the same prompt in a second GPU run, made when this one looked faulty
    repeat: PromptComparison | None = None

    @property
    def looks_faulty(self) -> bool:
        return self.verdict in ("parts", "non-finite", "off")

    @property
    def fault(self) -> bool:
        """Faulty, and so again in the second GPU run (when there is one)."""
        return self.looks_faulty and (self.repeat is None or self.repeat.looks_faulty)

    @property
    def unstable(self) -> bool:
        return self.looks_faulty and self.repeat is not None and not self.repeat.looks_faulty

    def deltas(self) -> list[Score]:
        return [
            round(g - c, 5) if _finite(g) and _finite(c) else None  # type: ignore[operator]
            for c, g in zip(self.cpu_scores, self.gpu_scores, strict=False)
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt,
            "prompt_ids": self.prompt_ids,
            "cpu_ids": self.cpu_ids,
            "gpu_ids": self.gpu_ids,
            "cpu_scores": _plain(self.cpu_scores),
            "gpu_scores_of_cpu_tokens": _plain(self.gpu_scores),
            "score_deltas": self.deltas(),
            "first_divergent_step": self.first_part,
            "nonfinite_from_step": self.nonfinite_from,
            "worst_score_delta": round(self.worst, 5),
            "worst_step": self.worst_step,
            "margins_at_part": None if self.margins is None else _plain(list(self.margins)),
            "verdict": self.verdict,
            "fault": self.fault,
            "repeat": None if self.repeat is None else self.repeat.to_json(),
        }

    def line(self) -> str:
        k, m = self.first_part, self.margins
        if self.verdict == "agrees":
            head = f"same {len(self.cpu_ids)} greedy tokens"
        elif self.verdict == "non-finite":
            head = f"non-finite scores from step {self.nonfinite_from}"
            head += f", tokens part at step {k}" if k is not None else ""
        elif self.verdict == "off":
            head = f"score off by {self.worst:.3g} at step {self.worst_step} (> {SCORE_TOL})"
            head += f", tokens part at step {k}" if k is not None else ""
        elif m is None:
            head = f"parts at step {k} (no margins: the CPU did not score the GPU's tokens)"
        else:
            head = f"parts at step {k} ({_pair_text(m)})"
            head += ": not a GPU fault" if self.verdict == "consistent" else ""
        text = f"{self.prompt!r}: {head}"
        if self.verdict != "non-finite":
            text += f"; worst score difference {self.worst:.3g}"
        if self.repeat is not None:
            again = "so again" if self.repeat.looks_faulty else f"not so: {self.repeat.verdict}"
            text += f"; in a second GPU run {again}"
        return text


def _first(pred: Any, n: int) -> int | None:
    return next((k for k in range(n) if pred(k)), None)


def _alike(d_cpu: float, d_gpu: float) -> bool:
    """Whether both runtimes' scores rank the GPU's token against the CPU's alike (within
    :data:`TIE_BAND` when both are finite, the same way when one is infinite) and the GPU's
    greedy pick is not one its own scoring ranks lower beyond the band."""
    if math.isinf(d_cpu) or math.isinf(d_gpu):
        return d_cpu >= 0 and d_gpu >= 0
    return abs(d_gpu - d_cpu) <= TIE_BAND and d_gpu >= -TIE_BAND


def _pair_text(m: tuple[float, float]) -> str:
    """What the two runtimes' scores say of the CPU's and the GPU's token at a parting step."""
    d_cpu, d_gpu = m
    parts = []
    if d_cpu > 0:
        parts.append(
            f"the CPU's own scoring ranks the GPU's token {d_cpu:.3g} above its greedy pick: the "
            "CPU engine's decode disagrees with its scoring"
        )
    if d_gpu < 0:
        parts.append(
            f"the GPU's own scoring ranks the CPU's token {-d_gpu:.3g} above its greedy pick"
        )
    if not parts:
        parts.append(f"a near tie: CPU margin {-d_cpu:.3g}, GPU margin {d_gpu:.3g}")
    if not (math.isinf(d_cpu) or math.isinf(d_gpu)):
        parts.append(f"the runtimes' scores of the pair differ by {abs(d_gpu - d_cpu):.3g}")
    return "; ".join(parts)


def compare_prompt(
    cpu: dict[str, Any], gpu: dict[str, Any], cpu_branch: list[Score] | None = None
) -> PromptComparison:
    """``cpu`` and ``gpu`` are the engine worker's records of one prompt (the GPU's with the
    CPU's continuation scored, ``scored[0]``); ``cpu_branch`` the CPU's scores of the GPU's
    continuation (for the margins at the parting step)."""
    cpu_ids, gpu_ids = list(cpu["ids"]), list(gpu["ids"])
    cpu_scores = list(cpu["scores"])
    gpu_scores = list(gpu["scored"][0]["scores"]) if gpu.get("scored") else []
    n = min(len(cpu_scores), len(gpu_scores))
    first_part = _first(lambda k: cpu_ids[k] != gpu_ids[k], min(len(cpu_ids), len(gpu_ids)))
    nonfinite = _first(lambda k: _finite(cpu_scores[k]) and not _finite(gpu_scores[k]), n)
    deltas = [
        abs(gpu_scores[k] - cpu_scores[k])
        if _finite(gpu_scores[k]) and _finite(cpu_scores[k])
        else 0.0
        for k in range(n)
    ]
    worst = max(deltas, default=0.0)
    worst_step = deltas.index(worst) if deltas and worst > 0 else None
    margins = None
    if first_part is not None and nonfinite is None:
        k = first_part
        own = gpu["scores"][k] if k < len(gpu["scores"]) else None
        other = cpu_branch[k] if cpu_branch and k < len(cpu_branch) else None
        d_cpu = _prefers(other, cpu_scores[k] if k < len(cpu_scores) else None)
        d_gpu = _prefers(own, gpu_scores[k] if k < n else None)
        if d_cpu is not None and d_gpu is not None:
            margins = (d_cpu, d_gpu)
    if nonfinite is not None:
        verdict = "non-finite"
    elif worst > SCORE_TOL:
        verdict = "off"
    elif first_part is not None:
        verdict = "consistent" if margins is not None and _alike(*margins) else "parts"
    else:
        verdict = "agrees"
    return PromptComparison(
        cpu["prompt"], list(cpu["prompt_ids"]), cpu_ids, gpu_ids, cpu_scores, gpu_scores,
        first_part, nonfinite, worst, worst_step, margins, verdict,
    )  # fmt: skip
