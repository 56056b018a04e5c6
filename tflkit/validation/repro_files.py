"""What a repro directory holds: ``repro.py`` (the script, standalone: ``ai-edge-litert`` and
numpy only), ``README.md`` (for LiteRT's issue tracker), and running the script in a fresh
process; :class:`Repro` records what ``--repro`` (:mod:`tflkit.validation.repro`) or ``check
--probe --repro`` (:mod:`tflkit.validation.crash_repro`) did."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tflkit import ir
from tflkit.compare.divergence import Localization, OpError

__all__ = [
    "Repro",
    "adapter_line",
    "count_ops",
    "describe",
    "op_section",
    "readme",
    "repro_script",
    "run_script",
    "version_of",
    "weights_chain",
]

_SCRIPT = """\
# {title}
# LiteRT CPU vs GPU ({precision}): exit 1 and a line "REPRODUCED" = the bug shows.
import numpy as np
from ai_edge_litert.compiled_model import CompiledModel
from ai_edge_litert.hardware_accelerator import HardwareAccelerator as HA
from ai_edge_litert.interpreter import Interpreter
from ai_edge_litert.options import GpuOptions, Options

OK = ("float32", "float16", "int32", "int8", "uint8", "bool")  # what TensorBuffer.write takes

x, rtol, bad = dict(np.load("inputs.npz")), {rtol!r}, []  # bound: rtol * max|cpu|, no new inf/nan
cpu = Interpreter(model_path="model.tflite").get_signature_runner()(**x)
gpu = Options(hardware_accelerators=HA.GPU | HA.CPU, gpu_options=GpuOptions(enforce_f32={f32}))
cm = CompiledModel.from_file("model.tflite", options=gpu)
names = cm.get_signature_by_index(0)
ins, outs = cm.create_input_buffers(0), cm.create_output_buffers(0)
for buf, name in zip(ins, names["inputs"]):  # int64, int16...: the binding takes their bytes
    a = np.ascontiguousarray(x[name])
    buf.write(a if a.dtype.name in OK else a.reshape(-1).view(np.uint8))
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


def weights_chain(ops: Sequence[ir.Op]) -> list[ir.Op]:
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


def clean_env() -> dict[str, str]:
    """The environment without tflkit on the path: the script must stand alone."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
    return env


def run_script(directory: Path, timeout: float) -> tuple[bool, str, str, int | None]:
    """Run ``repro.py`` in ``directory`` in a fresh process: (reproduced, stdout, stderr, code)."""
    try:
        done = subprocess.run(
            [sys.executable, "repro.py"],
            cwd=directory,
            env=clean_env(),
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


def op_section(op: ir.Op) -> list[str]:
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


def version_of(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def adapter_line(stderr: str, data: bytes | None, precision: str) -> str:
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


def count_ops(count: int) -> str:
    return f"{count} op" if count == 1 else f"{count} ops"


def _script_lines(stdout: str) -> str:
    """The script's own lines, without the runtime's log lines that reach stdout."""
    noise = ("INFO:", "WARNING:", "ERROR:", "VERBOSE:")
    return "\n".join(line for line in stdout.splitlines() if not line.startswith(noise)).strip()


def _tensor_line(tensor: ir.Tensor) -> str:
    dtype = np.dtype(tensor.dtype).name if tensor.dtype is not None else "?"
    kind = "constant" if tensor.is_constant else "activation"
    return f"`{tensor.name}` {dtype} {list(tensor.shape)} ({kind})"


def readme(
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
    measured: str | None = None,
) -> str:
    """The repro's README; ``measured``: the precisions the chunk reproduced in ("fp16 and
    fp32"), when more than the script's ``precision``."""
    ops = ", ".join(f"{op.type}" for op in sub.main.ops)
    shown = measured or precision
    lines = [
        f"# LiteRT GPU accelerator ({shown}): {culprit.type} differs from the CPU",
        "",
        f"A `{culprit.type}` op (op #{culprit.index} of `{label}`) gives different values on the "
        f"LiteRT GPU accelerator ({shown}) than on the CPU interpreter, on the same inputs.",
        "",
        "## Reproduce",
        "",
        "```sh",
        "pip install ai-edge-litert numpy",
        "python repro.py     # exit 1 and a line starting REPRODUCED: the bug shows",
        "```",
        "",
        f"`model.tflite` holds {count_ops(len(sub.main.ops))} ({ops}); `inputs.npz` its "
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
        *op_section(culprit),
    ]
    if record.hazards:
        lines.append("- on the CPU: " + "; ".join(record.hazards))
    lines += [
        "",
        "## Environment",
        "",
        f"- ai-edge-litert {version_of('ai-edge-litert')}, numpy {np.__version__}, Python "
        f"{platform.python_version()}, {platform.system()} {platform.machine()}",
        f"- GPU adapter: {adapter}",
        f"- precision: {shown}" + (f" (the script runs {precision})" if measured else ""),
        "",
        "## How it was found",
        "",
        f"`{command}` (tflkit {version_of('tflkit')}): {found}; this is the smallest chunk "
        "ending at it that still shows the difference.",
        "",
    ]
    return "\n".join(lines)


def describe(repro: Repro) -> dict[str, Any]:
    """JSON-ready summary (for tests and tools)."""
    return {
        "written": repro.written,
        "message": repro.message,
        "directory": str(repro.directory) if repro.directory else None,
        "ops": repro.ops,
        "tried": [{"ops": ops, "outcome": outcome} for ops, outcome in repro.tried],
    }
