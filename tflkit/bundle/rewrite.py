"""``rewrite B.litertlm -o OUT.litertlm``: each TFLite section through the rewrite rules (proven
as for a ``.tflite``), repacked with every other section byte-identical, then proven by the
LiteRT-LM engine: the rewritten bundle must give the original's greedy tokens on the CPU, and on
the GPU where the original ran there.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tflkit.bundle.engine import DEFAULT_PROMPTS, EngineRun, run_engine
from tflkit.bundle.litertlm import load_bundle, save_bundle
from tflkit.errors import UsageError

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
        return {
            "source": self.source,
            "output": self.output,
            "written": self.written,
            "sections": sections,
            "untouched_sections": self.untouched,
            "engine_proof": self.proof,
            "problem": self.problem,
        }

    def lines(self) -> list[str]:
        out = []
        for item in self.to_json()["sections"]:
            rules = ", ".join(item["rules_fired"]) or "no rule fired"
            verdict = {True: "verified", False: f"NOT verified: {item['problem']}", None: ""}
            out.append(f"section {item['section']}: {rules} {verdict[item['verified']]}".rstrip())
        out.append(f"sections kept byte-identical: {self.untouched}")
        for name, p in self.proof.items():
            out.append(f"engine {name}: {p['summary']}")
        if self.problem:
            out.append(f"not proven: {self.problem}")
        out.append(f"written: {self.output}" if self.written else "not written")
        return out


def _same(a: EngineRun, b: EngineRun) -> dict[str, Any]:
    if not b.ok:
        return {"same_tokens": False, "summary": f"rewritten bundle {b.status}: {b.message}"}
    same = [x["ids"] == y["ids"] for x, y in zip(a.prompts, b.prompts, strict=True)]
    worst = max(
        (abs(s - t) for x, y in zip(a.prompts, b.prompts, strict=True)
         for s, t in zip(x["scores"], y["scores"], strict=False) if s == s and t == t),
        default=0.0,
    )  # fmt: skip
    text = "the same greedy tokens" if all(same) else "different greedy tokens"
    summary = f"{text} on {len(same)} prompts; worst score difference {worst:.3g}"
    return {"same_tokens": all(same), "worst_score_difference": worst, "summary": summary}


def _prove(source: Path, output: Path, prompts: list[str], say: Callable[[str], None]) -> dict:
    proof: dict[str, dict[str, Any]] = {}
    for backend in ("cpu", "gpu"):
        say(f"engine on the {backend.upper()}: original and rewritten")
        before = run_engine(source, backend, prompts)
        if not before.ok:
            proof[backend] = {"same_tokens": None, "summary": f"original {before.status} there "
                              f"({before.message}): not compared"}  # fmt: skip
            continue
        proof[backend] = _same(before, run_engine(output, backend, prompts))
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
    say = progress or (lambda _: None)
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
            broken = [k for k, p in result.proof.items() if p["same_tokens"] is False]
            if broken:
                result.problem = f"the engine on {broken[0]}: {result.proof[broken[0]]['summary']}"
        if result.problem is None or force:
            save_bundle(load_bundle(staged), dst)
            result.written = True
    return result
