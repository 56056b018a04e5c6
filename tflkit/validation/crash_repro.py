"""``check --probe --repro DIR``: the op the probe pinned a GPU crash on, alone (else the ops up
to it), and a script that compiles it on the GPU accelerator, when that script dies the same way
in a fresh process."""

from __future__ import annotations

import os
import platform
import shutil
import tempfile
from pathlib import Path

import numpy as np

from tflkit import ir
from tflkit.validation.repro_files import (
    Repro,
    adapter_line,
    count_ops,
    op_section,
    run_script,
    version_of,
    weights_chain,
)

__all__ = ["write_crash_repro"]

_CRASH_SCRIPT = """\
# {title}
# Compiles (and runs once on zeros) model.tflite on the LiteRT GPU accelerator ({precision}).
# The bug shows when this process dies (by a signal, or non-zero exit) with the message below.
import numpy as np
from ai_edge_litert.compiled_model import CompiledModel
from ai_edge_litert.hardware_accelerator import HardwareAccelerator as HA
from ai_edge_litert.options import GpuOptions, Options

OK = ("float32", "float16", "int32", "int8", "uint8", "bool")  # what TensorBuffer.write takes

gpu = Options(hardware_accelerators=HA.GPU | HA.CPU, gpu_options=GpuOptions(enforce_f32={f32}))
cm = CompiledModel.from_file("model.tflite", options=gpu)  # expected: {message}
key = next(iter(cm.get_signature_list()))
names, details = cm.get_signature_by_index(0), cm.get_input_tensor_details(key)
ins, outs = cm.create_input_buffers(0), cm.create_output_buffers(0)
for buf, name in zip(ins, names["inputs"]):  # int64, int16...: the binding takes their bytes
    a = np.zeros(details[name]["shape"], details[name]["dtype"])
    buf.write(a if a.dtype.name in OK else a.reshape(-1).view(np.uint8))
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
                sub = ir.extract_model([*weights_chain(chunk), *chunk])
            except Exception as exc:
                result.tried.append(([op.index for op in chunk], f"cannot cut out: {exc}"))
                continue
            work = Path(tmp) / f"c{k}"
            work.mkdir()
            (work / "model.tflite").write_bytes(ir.dumps(sub))
            (work / "repro.py").write_text(script)
            _ok, stdout, stderr, code = run_script(work, timeout)
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
                f"repro: wrote {out} ({count_ops(len(sub.main.ops))} ending at op #{op_index} "
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
            f"`model.tflite` holds {count_ops(len(sub.main.ops))} ({ops}).",
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
            *op_section(culprit),
            "",
            "## Environment",
            "",
            f"- ai-edge-litert {version_of('ai-edge-litert')}, numpy {np.__version__}, Python "
            f"{platform.python_version()}, {platform.system()} {platform.machine()}",
            f"- GPU adapter: {adapter_line(stderr, None, precision)}",
            f"- precision: {precision}",
            "",
            "## How it was found",
            "",
            f"`{command}` (tflkit {version_of('tflkit')}): the probe's crash bisection pinned the "
            f"crash on op #{culprit.index} `{culprit.type}`.",
            "",
        ]
    )
