"""``rewrite B.litertlm -o OUT.litertlm``: each TFLite section through the rewrite rules (proven
as for a ``.tflite``), repacked with every other section byte-identical, then proven by the
LiteRT-LM engine: the rewritten bundle must give the original's greedy tokens and scores (within
``compare.SCORE_TOL``) on the CPU, and on the GPU, where the original ran there, the original's
scores of the CPU's continuation.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tflkit.bundle.engine import DEFAULT_PROMPTS, how, records, run_engine
from tflkit.bundle.litertlm import load_bundle, save_bundle
from tflkit.compare.tokens import SCORE_TOL, score_delta
from tflkit.delegates.base import RunResult
from tflkit.errors import UsageError
from tflkit.jsonable import plain
from tflkit.report.progress import quiet

__all__ = ["BundleRewrite", "rewrite_bundle"]


@dataclass
class BundleRewrite:
    """Per TFLite section the rewrite outcome; the engine's proof; whether it was written."""

    source: str
    output: str
    outcomes: dict[int, Any]  # section index -> RewriteOutcome
    untouched: list[int]
    written: bool = False
    proof: dict[str, dict[str, Any]] = field(default_factory=dict)
    problem: str | None = None

    @property
    def exit_code(self) -> int:
        return 0 if self.written and self.problem is None else 1

    def to_json(self) -> dict[str, Any]:
        sections = []
        for index, o in self.outcomes.items():
            v = o.verification
            sections.append({
                "section": index,
                "rules_fired": sorted({f.rule for f in o.passes.fired}),
                "changed": o.rewritten != o.original,
                "verified": None if v is None else v.ok,
                "problem": None if v is None else v.problem,
            })  # fmt: skip
        return plain(
            {
                "schema": "tflkit.rewrite-litertlm/1",
                "source": self.source,
                "output": self.output,
                "written": self.written,
                "sections": sections,
                "untouched_sections": self.untouched,
                "engine_proof": self.proof,
                "problem": self.problem,
            }
        )


def _scored(run: RunResult) -> list[list[float]]:
    return [p["scored"] if p["scored"] is not None else p["scores"] for p in records(run)]


def _worst(a: list[list[float]], b: list[list[float]]) -> float:
    """Largest score difference (:func:`compare.score_delta`; a NaN where the other has none
    counts as infinite)."""
    worst = 0.0
    for x, y in zip(a, b, strict=True):
        for s, t in zip(x, y, strict=False):
            lost = math.isnan(s) != math.isnan(t)
            worst = max(worst, math.inf if lost else score_delta(s, t))
    return worst


def _compare(before: RunResult, after: RunResult, tokens: bool) -> dict[str, Any]:
    if not after.ok:
        return {"same": False, "summary": f"rewritten bundle {how(after)}: {after.error}"}
    worst = _worst(_scored(before), _scored(after))
    pairs = zip(records(before), records(after), strict=True)
    same_ids = all(x["ids"] == y["ids"] for x, y in pairs)
    same = worst <= SCORE_TOL and (same_ids or not tokens)
    what = "the same greedy tokens and " if tokens and same_ids else ""
    if tokens and not same_ids:
        what = "different greedy tokens; "
    summary = f"{what}scores within {worst:.3g} of the original's on {len(before.outputs)} prompts"
    return {"same": same, "same_tokens": same_ids, "worst_score_difference": worst,
            "summary": summary}  # fmt: skip


def _prove(source: Path, output: Path, prompts: list[str], say: Callable[[str], None]) -> dict:
    """CPU: the original's greedy tokens and scores again. GPU (where the original ran): the
    rewritten bundle's scores of the CPU's continuation within ``SCORE_TOL`` of the CPU's, or
    no further than the original's own (a faulty original stays as faulty, no worse; its greedy
    picks vary between runs here), per prompt the best of up to three runs (a run can glitch
    or, with the GPU's picks, hit a refusal: ``validate.REPEATS``)."""
    say("engine on the CPU: original and rewritten")
    cpu = run_engine(source, "cpu", prompts)
    if not cpu.ok:
        return {"cpu": {"same": None, "summary": f"original {how(cpu)}: {cpu.error}"}}
    texts = {i: [p["text"]] for i, p in enumerate(records(cpu))}
    proof = {"cpu": _compare(cpu, run_engine(output, "cpu", prompts, score=texts), True)}
    say("engine on the GPU: original and rewritten")
    before = run_engine(source, "gpu", prompts, score=texts)
    if not before.ok:
        note = f"original {how(before)} there ({before.error}): not compared"
        return {**proof, "gpu": {"same": None, "summary": note}}
    reference = [p["scores"] for p in records(cpu)]
    original = _worst(reference, _scored(before))
    best, failed = [math.inf] * len(prompts), None
    for _ in range(3):
        after = run_engine(output, "gpu", prompts, score=texts)
        if not after.ok:  # the GPU's greedy picks vary: a refusal may not come back
            failed = after
            continue
        for i, scores in enumerate(_scored(after)):
            best[i] = min(best[i], _worst([reference[i]], [scores]))
        if max(best) <= max(SCORE_TOL, original):
            break
    worst = max(best)
    if failed is not None and math.isinf(worst):
        return {**proof, "gpu": _compare(before, failed, False)}
    proof["gpu"] = {
        "same": worst <= max(SCORE_TOL, original),
        "worst_score_difference_to_cpu": worst,
        "summary": f"scores of the CPU's continuation within {worst:.3g} of the CPU's "
        f"(original: {original:.3g}; tolerance {SCORE_TOL}, or the original's own)",
    }
    return proof


def rewrite_bundle(
    source: str | Path,
    output: str | Path,
    *,
    rule_names: Sequence[str] = (),
    force: bool = False,
    prompts: Sequence[str] | None = None,
    prove: bool = True,
    progress: Callable[[str], None] | None = None,
) -> BundleRewrite:
    """Rewrite every TFLite section of ``source`` into ``output`` (never the same file)."""
    from tflkit.rewriter.run import rewrite_model

    src, dst = Path(source), Path(output)
    if dst.exists() and os.path.samefile(src, dst):
        raise UsageError(f"refusing to overwrite the input bundle {src}; choose another -o path")
    bundle = load_bundle(src)
    say = progress or quiet
    result = BundleRewrite(bundle.label, str(dst), {}, [])
    for section in bundle.of_kind("TFLiteModel"):
        say(f"rewriting {section.label}")
        label = f"{bundle.label}#{section.index}"
        result.outcomes[section.index] = rewrite_model(
            bytes(bundle.view(section)), rule_names=rule_names, label=label
        )
    replace = {i: o.rewritten for i, o in result.outcomes.items() if o.rewritten != o.original}
    failed = [o for o in result.outcomes.values() if o.verification and not o.verification.ok]
    result.untouched = [s.index for s in bundle.sections if s.index not in replace]
    if not replace or (failed and not force):
        result.problem = "no rule fired" if not replace else failed[0].verification.problem
        return result
    with tempfile.TemporaryDirectory(dir=dst.parent if dst.parent.exists() else None) as tmp:
        staged = Path(tmp) / dst.name
        save_bundle(bundle, staged, replace)
        if prove:
            result.proof = _prove(src, staged, list(prompts or DEFAULT_PROMPTS), say)
            broken = [k for k, p in result.proof.items() if p["same"] is False]
            if broken:
                result.problem = f"the engine on {broken[0]}: {result.proof[broken[0]]['summary']}"
        if result.problem is None or force:
            save_bundle(load_bundle(staged), dst)
            result.written = True
    return result
