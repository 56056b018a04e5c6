"""A ``.litertlm`` bundle's reports in the terminal.

``validate B.litertlm`` (:func:`bundle_lines`): each engine run (how it ended, the engine's own
figures), each prompt's token comparison, the notes, the fp32 rerun, the section through
``--steps``, the findings and the repro (the report itself:
:class:`tflkit.validation.bundle_subject.BundleValidation`; its JSON is its ``to_json``).
``inspect`` and ``rewrite`` (:func:`inspect_lines`, :func:`rewrite_lines`) of the bundle package's
:class:`~tflkit.bundle.describe.BundleInspect` and :class:`~tflkit.bundle.rewrite.BundleRewrite`,
read by their fields: this layer renders and computes nothing."""

from __future__ import annotations

from typing import Any

from tflkit.delegates.base import RunResult
from tflkit.report.steps_report import steps_lines

__all__ = ["bundle_lines", "figures", "how", "inspect_lines", "rewrite_lines"]

#: How each status of an engine run reads in a report.
_WORDS = {"crashed": "aborted", "compile_error": "refused", "run_error": "refused",
          "timeout": "timed out", "unavailable": "unavailable"}  # fmt: skip


def how(result: RunResult) -> str:
    """``ok``, ``aborted`` (the engine killed its process), ``refused`` or ``timed out``."""
    return _WORDS.get(result.status, result.status)


def figures(result: RunResult) -> dict[str, float]:
    """The engine's own figures of a run (init, time to first token, tokens/s)."""
    return dict(result.executed.get("figures") or {})


def bundle_lines(v: Any) -> list[str]:
    """The terminal section of a :class:`~tflkit.validation.bundle_subject.BundleValidation`."""
    out = [f"{v.bundle}: LiteRT-LM engine, CPU vs GPU, {len(v.prompts)} prompts"]
    for name, run in v.runs.items():
        out.append(_run_line(name, run))
        for c in v.comparisons.get(name, []):
            out.append(f"  {c.line()}")
    out += [f"note: {n}" for n in v.notes]
    if v.fp32 is not None:
        out.append(f"fp32 activations: {v.fp32['summary']}")
    if v.steps is not None:
        out.append("the section through --steps (it locates the op; the verdict is the engine's):")
        out += steps_lines(v.steps)
    out += [f"finding: {f}" for f in v.findings] or ["no finding"]
    if v.repro is not None:
        out.append(v.repro.line)
    return out


def _run_line(name: str, run: RunResult) -> str:
    if not run.ok:
        return f"{name}: {how(run)} ({run.executed.get('stage')}): {run.error}"
    f = figures(run)
    return (
        f"{name}: ran; init {f.get('init_time_in_second', 0):.3g} s, time to first token "
        f"{f.get('time_to_first_token_in_second', 0):.3g} s, prefill "
        f"{f.get('last_prefill_tokens_per_second', 0):.4g} tok/s, decode "
        f"{f.get('last_decode_tokens_per_second', 0):.4g} tok/s"
        + (f"; on CPU {cpus[0]} only (software GPU)" if (cpus := run.executed.get("cpus")) else "")
    )


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
