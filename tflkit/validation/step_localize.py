"""``validate --steps N --localize``: the first parting step of a GPU runner replayed with the
feeds it was given (its own cache), every op of the decode signature run alone on that runner
against the CPU (:func:`tflkit.validation.localize.localize_signature`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.delegates.base import RUNNER_SPECS, find_spec, precision_of
from tflkit.delegates.kv_steps import recorded_feed
from tflkit.errors import one_line
from tflkit.validation.llm_program import KvProgram
from tflkit.validation.step_compare import num

__all__ = ["LOCALIZABLE", "localize_parting", "localize_step"]

#: runners ``--localize`` localizes, in the order one is picked when several part (fp32 first:
#: a GPU that parts in fp32 computes something else, not just fewer digits). The fp16 emulation
#: names its own ops: the overflows new at its parting step (``first_part["ops"]``).
LOCALIZABLE = tuple(
    s.name
    for precision in ("fp32", "fp16")
    for s in RUNNER_SPECS
    if s.device == "gpu" and s.steps and s.precision == precision
)


def localize_parting(
    data: bytes,
    program: KvProgram,
    runs: Mapping[str, dict[str, Any]],
    feeds_root: Path,
    wanted: str | None,
    timeout: float,
    progress: Callable[[str], None] | None,
) -> dict[str, Any]:
    """Localize the first parting step of ``wanted`` (or of the first parting runner of
    :data:`LOCALIZABLE`); the result also goes into that runner's ``first_part``."""
    parted = [n for n in LOCALIZABLE if n in runs and runs[n]["first_part"] is not None]
    name = wanted or next(iter(parted), None)
    if name is None or name not in parted:
        ran = ", ".join(n for n in LOCALIZABLE if n in runs)
        if name:
            why = f"{name} did not part from the CPU"
        elif ran:
            why = f"no GPU runner ({ran}) parted from the CPU"
        else:
            why = f"no GPU runner ran (--localize localizes {', '.join(LOCALIZABLE)})"
        return {"runner": name, "unavailable": f"nothing to localize: {why}"}
    run = runs[name]
    step = int(run["first_part"]["step"])
    if progress:
        progress(f"localizing {name} at step {step}: every op of {program.decode} on its own")
    try:
        feed = recorded_feed(feeds_root / name, step)
        found = localize_step(data, program.decode, feed, name, timeout)
    except Exception as exc:  # a localization that cannot run is a finding, not a crash
        found = {"runner": name, "unavailable": f"localization failed: {one_line(exc)}"}
    found.update(step=step)
    run["first_part"]["localization"] = found
    run["notes"].extend(_localization_lines(found))
    return found


def localize_step(
    data: bytes, signature: str, feed: Mapping[str, np.ndarray], runner: str, timeout: float
) -> dict[str, Any]:
    """Every op of ``signature`` alone on ``runner`` against the CPU, fed ``feed`` (one decode
    call's inputs by name): :func:`tflkit.validation.localize.localize_signature` at the
    runner's own tolerance, as JSON with the first divergent op and the culprits spelled out."""
    from tflkit import ir
    from tflkit.compare.tolerances import DEFAULTS, tolerance_for
    from tflkit.validation.localize import localize_signature

    cpu = find_spec(kernels="xnnpack").name
    threshold = tolerance_for(runner, cpu).rtol or DEFAULTS[precision_of(runner)].rtol
    loc = localize_signature(
        data, signature, feed, runner=runner, threshold=threshold, timeout=timeout
    )
    graph = ir.load(data).signature(signature).subgraph
    out = loc.to_json()
    first = loc.first_divergent
    out.update(
        signature=signature,
        fed="the decode inputs this runner was given at that step (its own cache)",
        first_divergent_op=None if first is None else _op_json(first, graph, signature),
        culprit_ops=[_op_json(c, graph, signature) for c in loc.culprits],
    )
    return out


def _op_json(record: Any, graph: Any, signature: str) -> dict[str, Any]:
    """A localized op's record with its signature and the shapes of its inputs (``c`` marks a
    constant): what a static rule needs to recognise the pattern."""
    data = record.to_json()
    op = graph.ops[record.op_index]
    data["signature"] = signature
    data["inputs"] = [
        None
        if t is None
        else {"shape": [int(d) for d in t.shape], "dtype": t.type_name, "constant": t.is_constant}
        for t in op.inputs
    ]
    return data


def _localization_lines(found: Mapping[str, Any]) -> list[str]:
    """Terminal lines of a step localization."""
    if found.get("unavailable"):
        return [f"step {found['step']} not localized: {found['unavailable']}"]
    first = found.get("first_divergent_op")
    head = (
        f"step {found['step']} localized ({found['signature']} call replayed with its own "
        f"feeds, every op alone vs the CPU, threshold {found['threshold']:g} of the op's peak): "
    )
    if first is None:
        return [head + "no op parts on its own: the difference builds up over many ops"]
    lines = [head + "first op where it parts: " + _op_line(first)]
    for op in found["culprit_ops"][:3]:
        if op["op_index"] != first["op_index"]:
            lines.append("  also: " + _op_line(op))
    return lines


def _op_line(op: Mapping[str, Any]) -> str:
    iso = op.get("isolated") or {}
    what = (
        f"isolated max abs {num(iso['max_abs'])} ({num(iso['score'])} x its output's peak "
        f"{num(iso['peak'])})"
        if iso
        else f"{op['status']}: {op.get('error') or ''}"
    )
    if op.get("hazards"):
        what += "; " + op["hazards"][0]
    outputs = op.get("outputs") or ["?"]
    shapes = " x ".join(
        ("const " if t["constant"] else "") + str(t["shape"]).replace(" ", "")
        for t in op.get("inputs") or []
        if t is not None
    )
    name = outputs[0] if len(outputs[0]) <= 60 else "..." + outputs[0][-57:]
    return (
        f"op #{op['op_index']} {op['op_type']} {shapes} ({op['signature']}, output {name}): {what}"
    )
