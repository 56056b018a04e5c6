"""``validate B.litertlm`` in the terminal: each engine run (how it ended, the engine's own
figures), each prompt's token comparison, the notes, the fp32 rerun, the section through
``--steps``, the findings and the repro (the report itself:
:class:`tflkit.bundle.validate.BundleValidation`; its JSON is its ``to_json``)."""

from __future__ import annotations

from typing import Any

from tflkit.delegates.base import RunResult
from tflkit.report.steps_report import steps_lines

__all__ = ["bundle_lines", "figures", "how"]

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
    """The terminal section of a :class:`~tflkit.bundle.validate.BundleValidation`."""
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
