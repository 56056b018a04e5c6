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

import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tflkit import ir
from tflkit.compare.divergence import Localization, OpError

__all__ = ["Repro", "repro_script", "write_crash_repro", "write_repro"]

#: the failing runner -> the GPU precision the repro runs with (the emulation predicts fp16)
_PRECISION = {"gpu-fp16": "fp16", "cpu-fp16": "fp16", "gpu-fp32": "fp32"}

_SCRIPT = """\
# {title}
# LiteRT CPU vs GPU ({precision}): exit 1 and a line "REPRODUCED" = the bug shows.
import numpy as np
from ai_edge_litert.compiled_model import CompiledModel
from ai_edge_litert.hardware_accelerator import HardwareAccelerator as HA
from ai_edge_litert.interpreter import Interpreter
from ai_edge_litert.options import GpuOptions, Options

x, rtol, bad = dict(np.load("inputs.npz")), {rtol!r}, []  # bound: rtol * max|cpu|, no new inf/nan
cpu = Interpreter(model_path="model.tflite").get_signature_runner()(**x)
gpu = Options(hardware_accelerators=HA.GPU | HA.CPU, gpu_options=GpuOptions(enforce_f32={f32}))
cm = CompiledModel.from_file("model.tflite", options=gpu)
names = cm.get_signature_by_index(0)
ins, outs = cm.create_input_buffers(0), cm.create_output_buffers(0)
for buf, name in zip(ins, names["inputs"]): buf.write(np.ascontiguousarray(x[name]))
cm.run_by_index(0, ins, outs)
for buf, name in zip(outs, names["outputs"]):
    c = cpu[name].astype(np.float64)
    g = buf.read(c.size, cpu[name].dtype).reshape(c.shape).astype(np.float64)
    d = np.where(np.isfinite(c), np.abs(c - g), 0.0)
    d[np.isnan(d)] = np.inf  # NaN on the GPU where the CPU is finite
    i, bound = int(np.argmax(d)), rtol * np.abs(c[np.isfinite(c)]).max(initial=0)
    print(f"{{name}}: max abs diff {{d.flat[i]:.6g}} (bound {{bound:.6g}}), "
          f"inf/nan on the GPU only: {{int(np.isinf(d).sum())}}; "
          f"worst element {{i}}: cpu {{c.flat[i]:.6g}}, gpu {{g.flat[i]:.6g}}")
    bad += [name] if d.flat[i] > bound else []
print(f"REPRODUCED: {{bad}} out of bound" if bad else "not reproduced: every output within bound")
raise SystemExit(1 if bad else 0)
"""


@dataclass
class Repro:
    """What ``--repro`` did: ``written`` (the directory holds a reproducing model), the one-line
    ``message`` shown in the report's notes, the chunk's op indices (in the original model),
    and every chunk tried with its outcome: "reproduced", "not reproduced" or, in fp16, "input
    beyond fp16" (a chunk whose inputs the CPU holds above 65504 would only show that its input
    is not representable: skipped, as localization ranks such an op last)."""

    written: bool
    message: str
    directory: Path | None = None
    ops: list[int] = field(default_factory=list)
    tried: list[tuple[list[int], str]] = field(default_factory=list)
    output: str = ""


def repro_script(title: str, precision: str, rtol: float) -> str:
    """The text of ``repro.py`` (``precision``: "fp16" or "fp32")."""
    return _SCRIPT.format(
        title=title.replace("\n", " "), precision=precision, rtol=rtol, f32=precision == "fp32"
    )


def _weights_chain(ops: Sequence[ir.Op]) -> list[ir.Op]:
    """Producers of the ops' inputs that read constants only (DEQUANTIZE of fp16/int8 weights)."""
    inside = {id(op) for op in ops}
    return [
        t.producer
        for op in ops
        for t in op.inputs
        if t is not None
        and t.producer is not None
        and id(t.producer) not in inside
        and all(i is None or i.is_constant for i in t.producer.inputs)
    ]


def _chunk(model: ir.Model, ops: Sequence[ir.Op], culprit: ir.Op) -> ir.Model:
    """``ops`` (+ their constant-weight producers) as a model whose outputs are the culprit's."""
    sub = ir.extract_model([*_weights_chain(ops), *ops])
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


def _beyond_fp16(value: np.ndarray) -> bool:
    """A float value fp16 cannot hold (finite, above 65504)."""
    value = np.asarray(value)
    if value.dtype.kind != "f":
        return False
    finite = np.abs(value[np.isfinite(value)])
    return bool(finite.size) and float(finite.max()) > 65504.0


def _computes(op: ir.Op) -> bool:
    """Not an op that reads constants only (those come along as weights of their consumer)."""
    return any(t is not None and not t.is_constant for t in op.inputs)


def _clean_env() -> dict[str, str]:
    """The environment without tflkit on the path: the script must stand alone."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
    return env


def _run_script(directory: Path, timeout: float) -> tuple[bool, str, str, int | None]:
    """Run ``repro.py`` in ``directory`` in a fresh process: (reproduced, stdout, stderr, code)."""
    try:
        done = subprocess.run(
            [sys.executable, "repro.py"],
            cwd=directory,
            env=_clean_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout if isinstance(exc.stdout, str) else ""
        return False, out, "timed out", None
    reproduced = done.returncode == 1 and "REPRODUCED" in done.stdout
    return reproduced, done.stdout, done.stderr, done.returncode


def _op_section(op: ir.Op) -> list[str]:
    """README.md's "The op": its type, options and tensors."""
    return [
        "## The op",
        "",
        f"- type: `{op.type}`; options: {_op_options(op)}",
        "- inputs: " + "; ".join(_tensor_line(t) for t in op.inputs if t is not None),
        "- outputs: " + "; ".join(_tensor_line(t) for t in op.outputs),
    ]


def _op_options(op: ir.Op) -> str:
    options = getattr(op, "options", None)
    if options is None:
        return "none"
    fields = {k: v for k, v in vars(options).items() if not k.startswith("_")}
    return ", ".join(f"{k}={v}" for k, v in fields.items()) or "none"


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _adapter(stderr: str, data: bytes | None, precision: str) -> str:
    """The adapter as the accelerator logs it (``Selected adapter: ...``), from the script's
    own log, else from a probe of the chunk (``data``, when given)."""
    from tflkit.gpu.log import parse_gpu_log

    adapter = parse_gpu_log(stderr).adapter
    if adapter is None and data is not None:
        from tflkit.gpu.probe import probe

        adapter = probe(data, enforce_f32=precision == "fp32", locate_crash=False).adapter
    if adapter is None:
        return "not reported"
    return (
        f"{adapter.name} (vendor {adapter.vendor}, arch {adapter.arch}, backend "
        f"{adapter.backend}, {adapter.adapter_type})"
    )


def _ops(count: int) -> str:
    return f"{count} op" if count == 1 else f"{count} ops"


def _script_lines(stdout: str) -> str:
    """The script's own lines, without the runtime's log lines that reach stdout."""
    noise = ("INFO:", "WARNING:", "ERROR:", "VERBOSE:")
    return "\n".join(line for line in stdout.splitlines() if not line.startswith(noise)).strip()


def _tensor_line(tensor: ir.Tensor) -> str:
    dtype = np.dtype(tensor.dtype).name if tensor.dtype is not None else "?"
    kind = "constant" if tensor.is_constant else "activation"
    return f"`{tensor.name}` {dtype} {list(tensor.shape)} ({kind})"


def _readme(
    *,
    sub: ir.Model,
    culprit: ir.Op,
    record: OpError,
    precision: str,
    loc: Localization,
    output: str,
    adapter: str,
    command: str,
    label: str,
    found: str,
) -> str:
    ops = ", ".join(f"{op.type}" for op in sub.main.ops)
    lines = [
        f"# LiteRT GPU accelerator ({precision}): {culprit.type} differs from the CPU",
        "",
        f"A `{culprit.type}` op (op #{culprit.index} of `{label}`) gives different values on the "
        f"LiteRT GPU accelerator ({precision}) than on the CPU interpreter, on the same inputs.",
        "",
        "## Reproduce",
        "",
        "```sh",
        "pip install ai-edge-litert numpy",
        "python repro.py     # exit 1 and a line starting REPRODUCED: the bug shows",
        "```",
        "",
        f"`model.tflite` holds {_ops(len(sub.main.ops))} ({ops}); `inputs.npz` its "
        "inputs (the CPU's values on the input set that failed). The script runs the model on "
        "the CPU `Interpreter` and on `CompiledModel` with `HardwareAccelerator.GPU` "
        f"(`GpuOptions(enforce_f32={precision == 'fp32'})`) and compares.",
        "",
        "## Output of `python repro.py`",
        "",
        "```",
        _script_lines(output),
        "```",
        "",
        f"Bound: a value finite on the CPU and inf/NaN on the GPU, or a max abs difference above "
        f"{loc.threshold:g} x the CPU output's peak.",
        "",
        *_op_section(culprit),
    ]
    if record.hazards:
        lines.append("- on the CPU: " + "; ".join(record.hazards))
    lines += [
        "",
        "## Environment",
        "",
        f"- ai-edge-litert {_version('ai-edge-litert')}, numpy {np.__version__}, Python "
        f"{platform.python_version()}, {platform.system()} {platform.machine()}",
        f"- GPU adapter: {adapter}",
        f"- precision: {precision}",
        "",
        "## How it was found",
        "",
        f"`{command}` (tflkit {_version('tflkit')}): {found}; this is the smallest chunk "
        "ending at it that still shows the difference.",
        "",
    ]
    return "\n".join(lines)


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
    out = Path(directory)
    if loc is None:
        return Repro(
            False, "repro: nothing written: no op diverges, so there is nothing to cut out"
        )
    if loc.unavailable:
        return Repro(
            False, f"repro: nothing written: localization could not run: {loc.unavailable}"
        )
    precision = _PRECISION.get(loc.runner)
    if precision is None:
        return Repro(False, _not_a_gpu_fault(loc))
    record = next((r for r in loc.culprits if r.status not in ("crashed", "timeout")), None)
    if record is None and loc.culprits:
        crashed = loc.culprits[0]
        return Repro(
            False,
            f"repro: nothing written: op #{crashed.op_index} {crashed.op_type} {crashed.status} "
            "on the GPU (a crash, not a divergence: see `check --probe --repro`)",
        )
    in_context = record is None
    if record is not None:
        first = loc.first_divergent.op_index if loc.first_divergent is not None else None
        found = (
            f"localization on `{loc.runner}` ran every op alone on it and named op "
            "#{index} `{type}` as the top culprit"
        )
        targets = [(record, first, found)]
    else:  # every op right alone: the first ones wrong in the model's own run, grown back
        wrong = _wrong_in_context(loc)[:CONTEXT_TRIES]
        if not wrong:
            return Repro(False, _spread_out(loc))
        targets = [
            (
                r,
                0,
                f"localization on `{loc.runner}` found every op right when run alone on it, "
                "and op #{index} `{type}` among the first whose value in the whole model's run "
                f"parts from the CPU ({_share(r.accumulated)})",
            )
            for r in wrong
        ]
    from tflkit.validation.localize import capture_cpu

    model = ir.load(data)
    values = capture_cpu(data, model, feed, inputs)
    by_name = {t.name: values[t.index] for t in model.main.tensors if t.index in values}
    result = Repro(False, "")
    with tempfile.TemporaryDirectory(prefix="tflkit-repro-") as tmp:
        for n, (record, first, found) in enumerate(targets):
            culprit = model.main.ops[record.op_index]
            found = found.format(index=culprit.index, type=culprit.type)
            title = f"{culprit.type} (op #{culprit.index} of {label}) on the LiteRT GPU vs the CPU"
            script = repro_script(title, precision, loc.threshold)
            for k, chunk in enumerate(_candidates(model, culprit, first)):
                try:
                    sub = _chunk(model, chunk, culprit)
                except Exception as exc:  # an op that cannot stand alone (reads a variable)
                    result.tried.append(([op.index for op in chunk], f"cannot cut out: {exc}"))
                    continue
                if any(t.name not in by_name for t in sub.main.inputs):
                    result.tried.append(([op.index for op in chunk], "no CPU value for an input"))
                    continue
                feed_in = {t.name: by_name[t.name] for t in sub.main.inputs}
                if precision == "fp16" and any(_beyond_fp16(v) for v in feed_in.values()):
                    result.tried.append(([op.index for op in chunk], "input beyond fp16"))
                    continue
                work = Path(tmp) / f"t{n}c{k}"
                work.mkdir()
                sub_data = ir.dumps(sub)
                (work / "model.tflite").write_bytes(sub_data)
                np.savez(work / "inputs.npz", **feed_in)
                (work / "repro.py").write_text(script)
                ok, stdout, stderr, _code = _run_script(work, timeout)
                result.tried.append(
                    ([op.index for op in chunk], "reproduced" if ok else "not reproduced")
                )
                if not ok:
                    continue
                out.mkdir(parents=True, exist_ok=True)
                for name in ("model.tflite", "inputs.npz", "repro.py"):
                    shutil.copyfile(work / name, out / name)
                readme = _readme(
                    sub=sub,
                    culprit=culprit,
                    record=record,
                    precision=precision,
                    loc=loc,
                    output=stdout,
                    adapter=_adapter(stderr, sub_data, precision),
                    command=command,
                    label=label,
                    found=found,
                )
                (out / "README.md").write_text(readme)
                result.written, result.directory, result.output = True, out, stdout
                result.ops = [op.index for op in chunk]
                result.message = (
                    f"repro: wrote {out} ({_ops(len(sub.main.ops))} ending at op "
                    f"#{culprit.index} {culprit.type}; `python repro.py` there reproduces on the "
                    f"GPU, {precision})"
                )
                return result
    tried = ", ".join(f"{_ops(len(ops))}: {outcome}" for ops, outcome in result.tried)
    named = ", ".join(f"#{r.op_index} {r.op_type}" for r, _, _ in targets)
    how = (
        f"ops {named} are the first wrong in the model's run on {loc.runner} (each right alone)"
        if in_context
        else f"op {named} is the culprit on {loc.runner}"
    )
    result.message = (
        f"repro: nothing written: {how} but no chunk ending at them ({tried}) differs beyond "
        f"the bound on the GPU ({precision}) when run alone"
    )
    return result


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


def describe(repro: Repro) -> dict[str, Any]:
    """JSON-ready summary (for tests and tools)."""
    return {
        "written": repro.written,
        "message": repro.message,
        "directory": str(repro.directory) if repro.directory else None,
        "ops": repro.ops,
        "tried": [{"ops": ops, "outcome": outcome} for ops, outcome in repro.tried],
    }


_CRASH_SCRIPT = """\
# {title}
# Compiles (and runs once on zeros) model.tflite on the LiteRT GPU accelerator ({precision}).
# The bug shows when this process dies (by a signal, or non-zero exit) with the message below.
import numpy as np
from ai_edge_litert.compiled_model import CompiledModel
from ai_edge_litert.hardware_accelerator import HardwareAccelerator as HA
from ai_edge_litert.options import GpuOptions, Options

gpu = Options(hardware_accelerators=HA.GPU | HA.CPU, gpu_options=GpuOptions(enforce_f32={f32}))
cm = CompiledModel.from_file("model.tflite", options=gpu)  # expected: {message}
key = next(iter(cm.get_signature_list()))
names, details = cm.get_signature_by_index(0), cm.get_input_tensor_details(key)
ins, outs = cm.create_input_buffers(0), cm.create_output_buffers(0)
for buf, name in zip(ins, names["inputs"]):
    buf.write(np.zeros(details[name]["shape"], details[name]["dtype"]))
cm.run_by_index(0, ins, outs)
print("not reproduced: compiled and ran without a crash")
"""


def write_crash_repro(
    data: bytes,
    op_index: int,
    message: str | None,
    directory: str | os.PathLike[str],
    *,
    enforce_f32: bool = False,
    command: str = "tflkit check --probe",
    label: str = "the model",
    timeout: float = 120.0,
) -> Repro:
    """The op the probe pinned a crash on, alone (else the ops up to it, which the crash
    bisection proved crash), and a script that compiles it on the GPU, to ``directory``.

    A candidate counts when its script, run in a fresh process, dies (signal or non-zero exit)
    and, when ``message`` (the accelerator's fatal line) is known, says the same.
    """
    from tflkit.gpu.log import parse_gpu_log

    out = Path(directory)
    model = ir.load(data)
    ops = model.main.ops
    if not 0 <= op_index < len(ops):
        return Repro(False, f"repro: nothing written: no op #{op_index} in the main subgraph")
    culprit = ops[op_index]
    precision = "fp32" if enforce_f32 else "fp16"
    title = f"{culprit.type} (op #{op_index} of {label}) crashes the LiteRT GPU accelerator"
    script = _CRASH_SCRIPT.format(
        title=title,
        precision=precision,
        f32=enforce_f32,
        message=(message or "a crash").replace("\n", " "),
    )
    result = Repro(False, "")
    wanted = _fatal_key(message)
    with tempfile.TemporaryDirectory(prefix="tflkit-repro-") as tmp:
        for k, chunk in enumerate([[culprit], list(ops[: op_index + 1])]):
            if k and len(chunk) == 1:
                break
            try:
                sub = ir.extract_model([*_weights_chain(chunk), *chunk])
            except Exception as exc:
                result.tried.append(([op.index for op in chunk], f"cannot cut out: {exc}"))
                continue
            work = Path(tmp) / f"c{k}"
            work.mkdir()
            (work / "model.tflite").write_bytes(ir.dumps(sub))
            (work / "repro.py").write_text(script)
            _ok, stdout, stderr, code = _run_script(work, timeout)
            fatal = parse_gpu_log(stderr).fatal
            died = code is not None and code != 0
            same = wanted is None or (fatal is not None and _fatal_key(fatal) == wanted)
            outcome = "reproduced" if died and same else "not reproduced"
            result.tried.append(([op.index for op in chunk], outcome))
            if outcome != "reproduced":
                continue
            out.mkdir(parents=True, exist_ok=True)
            for name in ("model.tflite", "repro.py"):
                shutil.copyfile(work / name, out / name)
            how = _exit_how(code)
            (out / "README.md").write_text(
                _crash_readme(sub, culprit, precision, fatal or "", how, stderr, command, label)
            )
            result.written, result.directory, result.ops = True, out, [op.index for op in chunk]
            result.output = stdout
            result.message = (
                f"repro: wrote {out} ({_ops(len(sub.main.ops))} ending at op #{op_index} "
                f"{culprit.type}; `python repro.py` there dies: {how}, {fatal})"
            )
            return result
    result.message = (
        f"repro: nothing written: the GPU crashed on op #{op_index} {culprit.type} in the whole "
        "model, but no chunk ending at it crashes the same way in a fresh process"
    )
    return result


def _exit_how(code: int | None) -> str:
    """'killed by SIGABRT', 'exit status 1'."""
    import signal

    if code is None or code >= 0:
        return f"exit status {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


def _fatal_key(message: str | None) -> str | None:
    """The part of a fatal line that names the failure (``Check failed: COND``), without the
    node and value ids that change with the graph."""
    if not message:
        return None
    text = message.split(" Node ")[0]
    return text.strip()


def _crash_readme(
    sub: ir.Model,
    culprit: ir.Op,
    precision: str,
    fatal: str,
    how: str,
    stderr: str,
    command: str,
    label: str,
) -> str:
    tail = [line for line in stderr.splitlines() if line.strip()][-8:]
    ops = ", ".join(op.type for op in sub.main.ops)
    return "\n".join(
        [
            f"# LiteRT GPU accelerator ({precision}) crashes compiling {culprit.type}",
            "",
            f"Compiling a model with a `{culprit.type}` op (op #{culprit.index} of `{label}`) on "
            f"the LiteRT GPU accelerator kills the process: {how}.",
            "",
            "## Reproduce",
            "",
            "```sh",
            "pip install ai-edge-litert numpy",
            "python repro.py     # dies (signal or non-zero exit) with the message below",
            "```",
            "",
            f"`model.tflite` holds {_ops(len(sub.main.ops))} ({ops}).",
            "",
            "## The accelerator's message",
            "",
            "```",
            fatal,
            "```",
            "",
            "Last lines of the log:",
            "",
            "```",
            *tail,
            "```",
            "",
            *_op_section(culprit),
            "",
            "## Environment",
            "",
            f"- ai-edge-litert {_version('ai-edge-litert')}, numpy {np.__version__}, Python "
            f"{platform.python_version()}, {platform.system()} {platform.machine()}",
            f"- GPU adapter: {_adapter(stderr, None, precision)}",
            f"- precision: {precision}",
            "",
            "## How it was found",
            "",
            f"`{command}` (tflkit {_version('tflkit')}): the probe's crash bisection pinned the "
            f"crash on op #{culprit.index} `{culprit.type}`.",
            "",
        ]
    )
