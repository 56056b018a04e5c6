"""The token comparison kind (``validate B.litertlm``): the engine's CPU run against its GPU run,
prompt by prompt: where the greedy tokens part, and
the per-token score differences (the GPU scoring the CPU's own continuation with
``run_text_scoring``: the logit-level comparison through the shipping runtime).

Scores are the engine's log-probabilities of each token. Three measurements on the corpus shape
the verdicts (``PYTHONPATH=. python bench/llm_bundles.py --calibrate``; docs/llm.md, "Bundles"):

- the two runtimes' *scoring* (``run_text_scoring``, the prefill path) agrees: on the healthy
  bundles the GPU's score of a CPU token is within 0.0123 of the CPU's. :data:`SCORE_TOL`
  (0.05, four times that) bounds it; a fault (an fp16 overflow) makes scores non-finite.
- their greedy *decode* paths do not always pick the top token of their own scoring: the CPU
  engine on an int8 bundle picks a token its scoring ranks 0.255 below the best (the float
  bundle's CPU decode does not), and the GPU's greedy picks change from run to run by up to
  0.23 (lavapipe). A parting step is therefore judged by the scores of the two tokens:
  *consistent* when both runtimes' scores of the pair agree within :data:`TIE_BAND` and the
  GPU's pick is within :data:`DECODE_TOL` of the CPU's token in its own scoring.
- the GPU engine's numbers are not always the same run to run: on an idle machine repeated runs
  are bit-identical, but on a busy machine (another process's GPU work) with the engine on both
  cores a prompt's scores came out off by up to 0.57, differently in each run, and right again
  in a later one: a race between the engine's and the driver's threads, not the model (on the
  software GPU the engine now runs on one core: ``tflkit.delegates.litert_lm``). A fault must
  come back *the same* (:func:`same_scores`) in further runs, or be wrong in every one of them
  (``validate.REPEATS``, ``validate.MAX_REPEATS``); a prompt right again in a later run is
  *unstable*, a note, not a finding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DECODE_TOL",
    "SAME_TOL",
    "SCORE_TOL",
    "TIE_BAND",
    "PromptComparison",
    "compare_prompt",
    "same_scores",
    "score_delta",
]

SCORE_TOL = 0.05
#: two tokens' scores, each within SCORE_TOL
TIE_BAND = 2 * SCORE_TOL
#: twice the largest decode-vs-scoring deviation measured on a healthy bundle (0.255)
DECODE_TOL = 0.5
#: Two GPU runs of a prompt score it "the same" within this (:func:`same_scores`): pinned runs
#: differ by 0.0 (tests/test_llm_bundles.py, beside a busy GPU too); glitches differ from each
#: other by 0.017 or more (``bench/llm_bundles.py --calibrate 8 --busy``, docs/llm.md)
SAME_TOL = 1e-3

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
    #: the same prompt in further GPU runs, made while this one looked faulty
    repeats: list[PromptComparison] = field(default_factory=list)

    @property
    def looks_faulty(self) -> bool:
        return self.verdict in ("parts", "non-finite", "off")

    @property
    def reproduced(self) -> bool:
        """Further GPU runs were made and each gave the same scores (:func:`same_scores`)."""
        return bool(self.repeats) and all(
            r.looks_faulty and same_scores(self.gpu_scores, r.gpu_scores) for r in self.repeats
        )

    @property
    def right_again(self) -> int | None:
        """The first further GPU run (2, 3, ...) that did not look faulty."""
        return next((i for i, r in enumerate(self.repeats, 2) if not r.looks_faulty), None)

    @property
    def fault(self) -> bool:
        """Faulty, and in no further GPU run right again."""
        return self.looks_faulty and self.right_again is None

    @property
    def unstable(self) -> bool:
        """Faulty in one run, right in a later one: the GPU's numbers vary run to run."""
        return self.looks_faulty and self.right_again is not None

    def settled(self, repeats: int) -> bool:
        """Whether further GPU runs can still change the verdict: not when it looks right,
        was right again, or came back the same in ``repeats`` further runs."""
        if not self.looks_faulty or self.unstable:
            return True
        return len(self.repeats) >= repeats and self.reproduced

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
            "worst_score_delta": self.worst if math.isinf(self.worst) else round(self.worst, 5),
            "worst_step": self.worst_step,
            "margins_at_part": None if self.margins is None else _plain(list(self.margins)),
            "verdict": self.verdict,
            "fault": self.fault,
            "unstable": self.unstable,
            "reproduced": self.reproduced,
            "repeats": [r.to_json() for r in self.repeats],
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
        if self.repeats:
            seen = ", ".join(r.verdict for r in self.repeats)
            if self.unstable:
                again = f"right again in run {self.right_again}: the GPU's numbers vary run to run"
            elif self.reproduced:
                again = "the same"
            else:
                again = "wrong in every run, with different numbers each time"
            text += f"; in {len(self.repeats)} more GPU run(s): {seen} ({again})"
        return text


def _first(pred: Any, n: int) -> int | None:
    return next((k for k in range(n) if pred(k)), None)


def same_scores(a: list[Score], b: list[Score]) -> bool:
    """Two GPU runs' scores of the same tokens agree: non-finite on the same steps, the finite
    ones within :data:`SAME_TOL`."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if _finite(x) and _finite(y):
            if abs(x - y) > SAME_TOL:  # type: ignore[operator]
                return False
        elif _finite(x) or _finite(y) or str(x) != str(y):
            return False
    return True


def _broken(x: Score) -> bool:
    """NaN or +inf: what an overflow leaves in a log-probability (-inf is a probability of 0)."""
    return x is None or math.isnan(x) or x == math.inf


def score_delta(cpu: Score, gpu: Score) -> float:
    """|gpu - cpu| of one token's scores; infinite when one says impossible (-inf) and the
    other not; 0 where either is broken (:func:`_broken`: judged as non-finite instead)."""
    if _broken(cpu) or _broken(gpu):
        return 0.0
    if math.isinf(cpu) or math.isinf(gpu):  # type: ignore[arg-type]
        return 0.0 if cpu == gpu else math.inf
    return abs(gpu - cpu)  # type: ignore[operator]


def _alike(d_cpu: float, d_gpu: float) -> bool:
    """Whether both runtimes' scores rank the GPU's token against the CPU's alike (within
    :data:`TIE_BAND` when both are finite, the same way when one is infinite) and the GPU's
    greedy pick is not one its own scoring ranks lower than the CPU's by more than
    :data:`DECODE_TOL`."""
    if math.isinf(d_cpu) or math.isinf(d_gpu):
        return d_cpu >= 0 and d_gpu >= 0
    return abs(d_gpu - d_cpu) <= TIE_BAND and d_gpu >= -DECODE_TOL


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
    CPU's continuation scored, ``scored``); ``cpu_branch`` the CPU's scores of the GPU's
    continuation (for the margins at the parting step)."""
    cpu_ids, gpu_ids = list(cpu["ids"]), list(gpu["ids"])
    cpu_scores = list(cpu["scores"])
    gpu_scores = list(gpu.get("scored") or [])
    n = min(len(cpu_scores), len(gpu_scores))
    first_part = _first(lambda k: cpu_ids[k] != gpu_ids[k], min(len(cpu_ids), len(gpu_ids)))
    nonfinite = _first(lambda k: _finite(cpu_scores[k]) and _broken(gpu_scores[k]), n)
    deltas = [score_delta(cpu_scores[k], gpu_scores[k]) for k in range(n)]
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
