"""``validate --localize --repro DIR``: the smallest model that still shows a GPU divergence.

When localization pins a divergence on an op (the top culprit), :func:`write_repro` cuts it out
with ``ir.extract_model`` (with the DEQUANTIZE of its constant weights, as localization runs it)
and checks, by running the repro script itself in a fresh process, that the GPU accelerator still
parts from the CPU on it. If the op alone does not show the fault, the chunk grows backwards (the
1, 2, 4, ... ops ending at the culprit, then the chunk from the first divergent op to it, then
every op up to it), like Polygraphy's ``debug reduce``. When every op is right alone (a fault
that needs the op's neighbours, e.g. a convolution whose weights the GPU takes from a CPU
DENSIFY), the op grown back from is the first whose value in the runner's run of the whole model
parts from the CPU (its accumulated error), 1, 2, 4, ... ops back. The first chunk that
reproduces is written to ``DIR``:

- ``model.tflite``: the chunk; its outputs are the culprit's outputs;
- ``inputs.npz``: the CPU's values (reference kernels) of the chunk's inputs on the input set
  localization used, by tensor name;
- ``repro.py``: a short script using only ``ai-edge-litert`` and numpy: runs the model on the CPU
  ``Interpreter`` and on the GPU accelerator (``CompiledModel``, fp16 by default, ``enforce_f32``
  when the failing runner was ``gpu-fp32``), prints each output's max abs difference and the
  bound, and when one is out of bound prints a line starting ``REPRODUCED`` and exits 1 (exit 0:
  not reproduced);
- ``README.md``: a summary for LiteRT's issue tracker (versions, adapter, precision, the op and
  its options, the script's output, the command that made it).

The bound is localization's: a value finite on the CPU and inf/NaN on the GPU, or
``max |cpu - gpu| > threshold * max |cpu|`` (``threshold`` the runner's rtol, 0.05 for fp16).

Nothing is written, with one line saying why, when localization ran against a ``.tflite``
reference (a difference between two models on the CPU, e.g. a changed weight: no GPU fault for
the CPU-vs-GPU script to show) or when no op parts from the CPU beyond the bound, alone or in the
model's run (a loss spread over many ops, e.g. fp16 storage: no few-op model shows it).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tflkit import ir
from tflkit.compare.divergence import Localization, OpError
from tflkit.delegates.base import runner_spec
from tflkit.delegates.fp16_emulation import beyond_fp16
from tflkit.validation.crash_repro import write_crash_repro
from tflkit.validation.repro_files import (
    Repro,
    adapter_line,
    count_ops,
    readme,
    repro_script,
    run_script,
    weights_chain,
)

__all__ = ["Repro", "repro_script", "write_crash_repro", "write_repro"]


def _precision(runner: str) -> str | None:
    """The GPU precision a repro of ``runner``'s divergence runs with: the precision of a
    runner localization runs ops on (the emulation predicts the GPU's fp16); None for the
    reference (a difference between two models, not a GPU fault)."""
    spec = runner_spec(runner)
    return spec.precision if spec is not None and spec.localize else None


def _chunk(model: ir.Model, ops: Sequence[ir.Op], culprit: ir.Op) -> ir.Model:
    """``ops`` (+ their constant-weight producers) as a model whose outputs are the culprit's."""
    sub = ir.extract_model([*weights_chain(ops), *ops])
    main = sub.main
    wanted = {t.name for t in culprit.outputs}
    outputs = [t for t in main.tensors if t.name in wanted]
    main.outputs = outputs
    sig = sub.signatures[0]
    sig.outputs.clear()
    sig.outputs.update({t.name: t for t in outputs})
    return sub


def _candidates(model: ir.Model, culprit: ir.Op, first: int | None) -> list[list[ir.Op]]:
    """Chunks ending at the culprit, smallest first: 1, 2, 4, ... ops back (not before the first
    divergent op), the chunk from the first divergent op, then every op up to the culprit; of
    each, only the ops the culprit's inputs come from."""
    ops = model.main.ops
    end = culprit.index
    floor = first if first is not None and first <= end else end
    starts: list[int] = []
    size = 1
    while end - size + 1 > floor:
        starts.append(end - size + 1)
        size *= 2
    starts += [floor, 0]
    feeding = _ancestors(culprit)
    seen: list[list[ir.Op]] = []
    for start in dict.fromkeys(starts):
        chunk = [op for op in ops[start : end + 1] if _computes(op) and id(op) in feeding]
        if chunk and culprit in chunk and chunk not in seen:
            seen.append(chunk)
    return seen


def _ancestors(op: ir.Op) -> set[int]:
    """``op`` and every op its inputs come from (ids): a chunk keeps only those."""
    found = {id(op)}
    todo = [op]
    while todo:
        for tensor in todo.pop().inputs:
            producer = tensor.producer if tensor is not None else None
            if producer is not None and id(producer) not in found:
                found.add(id(producer))
                todo.append(producer)
    return found


def _computes(op: ir.Op) -> bool:
    """Not an op that reads constants only (those come along as weights of their consumer)."""
    return any(t is not None and not t.is_constant for t in op.inputs)


#: a chunk to try: the op grown back from, the first divergent op's index, how it was found
_Target = tuple[OpError, int | None, str]


@dataclass
class _Attempt:
    """One ``write_repro`` call's fixed facts: the model, the CPU values by tensor name, the
    precision and script, and where the repro goes."""

    model: ir.Model
    by_name: dict[str, np.ndarray]
    precision: str
    loc: Localization
    out: Path
    command: str
    label: str
    timeout: float


def write_repro(
    data: bytes,
    feed: Mapping[str, np.ndarray],
    inputs: Mapping[str, ir.Tensor],
    loc: Localization | None,
    directory: str | os.PathLike[str],
    *,
    command: str = "tflkit validate",
    label: str = "the model",
    timeout: float = 300.0,
) -> Repro:
    """Write the smallest reproducing chunk of ``loc``'s top culprit to ``directory``.

    ``data`` is the model localization ran on, ``feed`` its input set (entry-point names) and
    ``inputs`` those names' tensors. With no culprit (every op right alone), the chunk grows
    back from the first ops wrong in the model's own run on the runner. Nothing is written
    when no op diverges alone or in that run, when the failing runner is not a GPU or the
    emulation (a ``.tflite`` reference), or when no chunk reproduces on the GPU.
    """
    if loc is None:
        return Repro(
            False, "repro: nothing written: no op diverges, so there is nothing to cut out"
        )
    if loc.unavailable:
        return Repro(
            False, f"repro: nothing written: localization could not run: {loc.unavailable}"
        )
    precision = _precision(loc.runner)
    if precision is None:
        return Repro(False, _not_a_gpu_fault(loc))
    targets = _targets(loc)
    if isinstance(targets, Repro):
        return targets
    from tflkit.validation.localize import capture_cpu

    model = ir.load(data)
    values = capture_cpu(data, model, feed, inputs)
    by_name = {t.name: values[t.index] for t in model.main.tensors if t.index in values}
    attempt = _Attempt(model, by_name, precision, loc, Path(directory), command, label, timeout)
    result = Repro(False, "")
    with tempfile.TemporaryDirectory(prefix="tflkit-repro-") as tmp:
        for n, target in enumerate(targets):
            if _try_target(attempt, target, Path(tmp) / f"t{n}", result):
                return result
    tried = ", ".join(f"{count_ops(len(ops))}: {outcome}" for ops, outcome in result.tried)
    named = ", ".join(f"#{r.op_index} {r.op_type}" for r, _, _ in targets)
    how = (
        f"ops {named} are the first wrong in the model's run on {loc.runner} (each right alone)"
        if _top(loc) is None
        else f"op {named} is the culprit on {loc.runner}"
    )
    result.message = (
        f"repro: nothing written: {how} but no chunk ending at them ({tried}) differs beyond "
        f"the bound on the GPU ({precision}) when run alone"
    )
    return result


def _top(loc: Localization) -> OpError | None:
    """The top culprit that diverged (not one that crashed or hung)."""
    return next((r for r in loc.culprits if r.status not in ("crashed", "timeout")), None)


def _targets(loc: Localization) -> list[_Target] | Repro:
    """The ops to grow chunks back from: the top culprit, else (every op right alone) the first
    ops wrong in the model's own run; a :class:`Repro` saying why there is none."""
    record = _top(loc)
    if record is None and loc.culprits:
        crashed = loc.culprits[0]
        return Repro(
            False,
            f"repro: nothing written: op #{crashed.op_index} {crashed.op_type} {crashed.status} "
            "on the GPU (a crash, not a divergence: see `check --probe --repro`)",
        )
    if record is not None:
        first = loc.first_divergent.op_index if loc.first_divergent is not None else None
        found = (
            f"localization on `{loc.runner}` ran every op alone on it and named op "
            "#{index} `{type}` as the top culprit"
        )
        return [(record, first, found)]
    wrong = _wrong_in_context(loc)[:CONTEXT_TRIES]
    if not wrong:
        return Repro(False, _spread_out(loc))
    return [
        (
            r,
            0,
            f"localization on `{loc.runner}` found every op right when run alone on it, "
            "and op #{index} `{type}` among the first whose value in the whole model's run "
            f"parts from the CPU ({_share(r.accumulated)})",
        )
        for r in wrong
    ]


def _try_target(attempt: _Attempt, target: _Target, tmp: Path, result: Repro) -> bool:
    """Each chunk ending at ``target``'s op, until one reproduces (then written: True)."""
    record, first, found = target
    model, precision = attempt.model, attempt.precision
    culprit = model.main.ops[record.op_index]
    found = found.format(index=culprit.index, type=culprit.type)
    title = f"{culprit.type} (op #{culprit.index} of {attempt.label}) on the LiteRT GPU vs the CPU"
    script = repro_script(title, precision, attempt.loc.threshold)
    for k, chunk in enumerate(_candidates(model, culprit, first)):
        indices = [op.index for op in chunk]
        try:
            sub = _chunk(model, chunk, culprit)
        except Exception as exc:  # an op that cannot stand alone (reads a variable)
            result.tried.append((indices, f"cannot cut out: {exc}"))
            continue
        if any(t.name not in attempt.by_name for t in sub.main.inputs):
            result.tried.append((indices, "no CPU value for an input"))
            continue
        feed_in = {t.name: attempt.by_name[t.name] for t in sub.main.inputs}
        if precision == "fp16" and any(beyond_fp16(v) for v in feed_in.values()):
            result.tried.append((indices, "input beyond fp16"))
            continue
        work = tmp.with_name(f"{tmp.name}c{k}")
        work.mkdir()
        sub_data = ir.dumps(sub)
        (work / "model.tflite").write_bytes(sub_data)
        np.savez(work / "inputs.npz", **feed_in)
        (work / "repro.py").write_text(script)
        ok, stdout, stderr, _code = run_script(work, attempt.timeout)
        result.tried.append((indices, "reproduced" if ok else "not reproduced"))
        if ok:
            measured, rerun = _other_precision(work, title, attempt)
            if rerun is not None:  # fp32 too: the script shows it is not fp16's rounding
                stdout, stderr = rerun
            run = (stdout, stderr, sub_data)
            script = "fp32" if rerun is not None else precision
            _write(attempt, work, sub, culprit, record, found, run, (script, measured))
            result.written, result.directory, result.output = True, attempt.out, stdout
            result.ops = indices
            result.message = (
                f"repro: wrote {attempt.out} ({count_ops(len(sub.main.ops))} ending at op "
                f"#{culprit.index} {culprit.type}; `python repro.py` there reproduces on the "
                f"GPU, {measured or precision})"
            )
            return True
    return False


def _other_precision(
    work: Path, title: str, attempt: _Attempt
) -> tuple[str | None, tuple[str, str] | None]:
    """Whether the chunk in ``work`` reproduces in the other GPU precision too: ("fp16 and
    fp32", the fp32 run's (stdout, stderr) when the script in ``work`` was fp16 and now runs
    fp32), or (None, None). A GPU bug that shows in fp32 is not fp16's rounding."""
    other = "fp32" if attempt.precision == "fp16" else "fp16"
    trial = work.with_name(f"{work.name}{other}")
    trial.mkdir()
    for name in ("model.tflite", "inputs.npz"):
        shutil.copyfile(work / name, trial / name)
    (trial / "repro.py").write_text(repro_script(title, other, attempt.loc.threshold))
    ok, stdout, stderr, _code = run_script(trial, attempt.timeout)
    if not ok:
        return None, None
    if other != "fp32":
        return "fp16 and fp32", None
    shutil.copyfile(trial / "repro.py", work / "repro.py")
    return "fp16 and fp32", (stdout, stderr)


def _write(
    attempt: _Attempt,
    work: Path,
    sub: ir.Model,
    culprit: ir.Op,
    record: OpError,
    found: str,
    run: tuple[str, str, bytes],
    precisions: tuple[str, str | None],
) -> None:
    """The reproducing chunk's files and README to the repro directory."""
    stdout, stderr, sub_data = run
    script, measured = precisions  # the script's precision; all it reproduced in
    out = attempt.out
    out.mkdir(parents=True, exist_ok=True)
    for name in ("model.tflite", "inputs.npz", "repro.py"):
        shutil.copyfile(work / name, out / name)
    text = readme(
        sub=sub,
        culprit=culprit,
        record=record,
        precision=script,
        loc=attempt.loc,
        output=stdout,
        adapter=adapter_line(stderr, sub_data, script),
        command=attempt.command,
        label=attempt.label,
        found=found,
        measured=measured,
    )
    (out / "README.md").write_text(text)


def _share(div: Any) -> str:
    """'2 inf/NaN where the CPU is finite' or '99% of its peak'."""
    if div.new_nonfinite:
        return f"{div.new_nonfinite} inf/NaN where the CPU is finite"
    return f"max abs {div.max_abs:.3g}, {100 * div.score:.0f}% of its peak"


#: ops wrong in the model's run tried, in order, when every op is right alone
CONTEXT_TRIES = 3


def _wrong_in_context(loc: Localization) -> list[OpError]:
    """The ops (by index) whose accumulated error (their value in the runner's run of the whole
    model) is beyond the bound, though no op is wrong alone: a fault that needs the op's
    neighbours (e.g. weights the GPU takes from a CPU op), which a chunk grown back shows. The
    first is not always the one: a value read back from the GPU as an extra output can be off
    where the model's own outputs are not (measured: a PAD on the software GPU)."""
    found = []
    for record in sorted(loc.ops, key=lambda r: r.op_index):
        acc = record.accumulated
        usable = acc is not None and record.status == "ok" and not record.inherited
        if usable and (acc.new_nonfinite or acc.score > loc.threshold):
            found.append(record)
    return found


def _spread_out(loc: Localization) -> str:
    """One line: no op parts from the CPU beyond the bound, alone or in the model's run."""

    def worst(key: str) -> str:
        found = [(getattr(r, key), r) for r in loc.ops if getattr(r, key) is not None]
        if not found:
            return "none measured"
        div, r = max(found, key=lambda x: x[0].score)
        return f"op #{r.op_index} {r.op_type} at {100 * div.score:.2g}% of its peak"

    return (
        f"repro: nothing written: no op parts from the CPU by more than {loc.threshold:g} of "
        f"its peak on {loc.runner}, alone (largest: {worst('isolated')}) or in the whole "
        f"model's run (largest: {worst('accumulated')}): the failure is small losses spread "
        "over many ops (fp16 storage, when the emulation fails too), not one op's fault a "
        "few-op model could show"
    )


def _not_a_gpu_fault(loc: Localization) -> str:
    """One line: why a divergence from a ``.tflite`` reference gets no repro."""
    top = loc.culprits[0] if loc.culprits else None
    where = f"op #{top.op_index} {top.op_type}" if top is not None else "no single op"
    return (
        f"repro: nothing written: localization ran on {loc.runner} (this model against the "
        f".tflite it replaces, both on the CPU), so the difference is between two models, not "
        f"a GPU fault the CPU-vs-GPU repro could show; the models part at {where}"
    )
