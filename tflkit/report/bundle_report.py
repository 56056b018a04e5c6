"""The terminal lines of the ``.litertlm`` bundle reports of ``inspect`` and ``rewrite``.

The reports are the bundle package's dataclasses (:mod:`tflkit.bundle.describe`,
:mod:`tflkit.bundle.rewrite`), read here by their fields: this layer renders, it computes
nothing, and it imports no bundle code.
"""

from __future__ import annotations

from typing import Any

__all__ = ["inspect_lines", "rewrite_lines"]


def inspect_lines(report: Any) -> list[str]:
    """``inspect`` of a ``.litertlm`` (a :class:`tflkit.bundle.describe.BundleInspect`): the
    header, each section, the tokenizer, the metadata and the warnings, one line each."""
    out = [f"{report.path}: LiteRT-LM bundle v{report.version}, {report.size_bytes:,} bytes"]
    for s in report.sections:
        extra = "".join(
            f", {k} {s.items[k]}" for k in ("backend_constraint", "prefer_activation_type")
            if k in s.items
        )  # fmt: skip
        what = f" {s.model_type}" if s.model_type else ""
        out.append(f"  section {s.index}: {s.kind}{what}, {s.size:,} bytes at {s.begin}{extra}")
    if report.tokenizer:
        t = report.tokenizer
        out.append(f"tokenizer: {t['kind']} ({t.get('model')}), {t['vocab_size']} tokens")
    if report.metadata:
        out += [f"metadata: {_meta_line(report.metadata)}"]
    for index, warnings in report.warnings.items():
        out += [f"warning (section {index}): {w}" for w in warnings]
    return out


def _token_text(token: dict[str, Any]) -> str:
    return str(token["ids"]) if "ids" in token else repr(token.get("text"))


def _meta_line(meta: dict[str, Any]) -> str:
    parts = []
    if "start_token" in meta:
        parts.append(f"start {_token_text(meta['start_token'])}")
    if meta.get("stop_tokens"):
        parts.append("stop " + ", ".join(_token_text(t) for t in meta["stop_tokens"]))
    for key in ("max_num_tokens", "llm_model_type"):
        if key in meta:
            parts.append(f"{key} {meta[key]}")
    if meta.get("prompt_templates"):
        parts.append(f"templates {meta['prompt_templates']}")
    if meta.get("jinja_prompt_template"):
        parts.append(f"jinja template ({len(meta['jinja_prompt_template'])} chars)")
    if meta.get("sampler_params"):
        parts.append(f"sampler {meta['sampler_params']}")
    return "; ".join(parts) or "(empty)"


def rewrite_lines(report: Any) -> list[str]:
    """``rewrite`` of a ``.litertlm`` (a :class:`tflkit.bundle.rewrite.BundleRewrite`): per
    TFLite section the rules fired and the verification, the sections kept, the engine's proof
    and whether it was written."""
    out = []
    for item in report.to_json()["sections"]:
        rules = ", ".join(item["rules_fired"]) or "no rule fired"
        verdict = {True: "verified", False: f"NOT verified: {item['problem']}", None: ""}
        out.append(f"section {item['section']}: {rules} {verdict[item['verified']]}".rstrip())
    out.append(f"sections kept byte-identical: {report.untouched}")
    for name, p in report.proof.items():
        out.append(f"engine {name}: {p['summary']}")
    if report.problem:
        out.append(f"not proven: {report.problem}")
    out.append(f"written: {report.output}" if report.written else "not written")
    return out
