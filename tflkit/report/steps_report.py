"""``validate --steps`` in the terminal: how the steps ran, each runner's verdict per step, the
localization and the fix (the report itself: :class:`tflkit.validation.step_compare.StepsReport`;
its JSON is its ``to_json``)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["steps_lines"]


def steps_lines(report: Any) -> list[str]:
    """The short terminal section of a :class:`~tflkit.validation.step_compare.StepsReport`."""
    out = [*_program_lines(report.model, report.steps, report.program)]
    out.append(f"cpu greedy tokens: {report.cpu_tokens}")
    for name, run in report.runs.items():
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
            f"{'same' if run['tokens'] == report.cpu_tokens else run['tokens']}"
        )
        for note in run.get("notes", []):
            out.append(f"  {note}")
    loc = report.localization
    if loc is not None and loc.get("unavailable") and loc.get("step") is None:
        out.append(f"localization: {loc['unavailable']}")
    if report.fix is not None:
        out.append(f"fix: {report.fix}")
    return out


def _program_lines(model: str, steps: int, p: Any) -> list[str]:
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


def _fmt(x: float) -> str:
    return "inf" if not np.isfinite(x) else f"{x:.2g}"
