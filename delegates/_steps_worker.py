"""Child process: a KV-cache LLM graph's prefill + decode steps on LiteRT's GPU accelerator.

``main([FOLDER])`` (started by :class:`~tflkit.delegates.step_runner.GpuStepRunner` through
:func:`tflkit.proc.worker.spawn_python`): reads ``FOLDER/model.tflite`` and
``FOLDER/plan.json`` (the :class:`~tflkit.delegates.kv_steps.KvProgram`, prompt, steps, the
tokens to feed, ``enforce_f32``, and ``feeds_dir``: where to save every decode call's feeds for
``--localize``), compiles once with ``CompiledModel`` (GPU, CPU fallback) and runs the
signatures by index through :func:`tflkit.delegates.kv_steps.run_steps` (the loop the CPU runs
too). Writes ``result.json`` after every stage (so a crash leaves the stage it died in) and the
logits of every step to ``logits.npz``. The accelerator logs to this process's stderr; the parent
parses it. Never import TensorFlow here.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.gpu.buffers import read_buffer, write_buffer
from tflkit.proc.result_file import write_result


def _caller(cm: Any, state: dict[str, Any], result: Path):
    signatures = cm.get_signature_list()
    cache: dict[str, tuple[int, list[str], list[tuple[str, np.dtype, tuple[int, ...]]]]] = {}

    def call(key: str, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        if key not in cache:
            outs = cm.get_output_tensor_details(key)
            cache[key] = (
                cm.get_signature_index(key),
                list(signatures[key]["inputs"]),
                [
                    (n, np.dtype(outs[n]["dtype"]), tuple(int(d) for d in outs[n]["shape"]))
                    for n in signatures[key]["outputs"]
                ],
            )
        index, in_names, out_specs = cache[key]
        state["stage"] = f"run {key}"
        write_result(result, state)
        ins = cm.create_input_buffers(index)
        outs = cm.create_output_buffers(index)
        for buf, name in zip(ins, in_names, strict=True):
            write_buffer(buf, feeds[name])
        cm.run_by_index(index, ins, outs)
        return {
            name: read_buffer(buf, shape, dtype)
            for buf, (name, dtype, shape) in zip(outs, out_specs, strict=True)
        }

    return call


def main(argv: list[str]) -> int:
    from tflkit.delegates.kv_steps import KvProgram, recording, run_steps
    from tflkit.errors import one_line

    folder = Path(argv[0])
    result = folder / "result.json"
    plan = json.loads((folder / "plan.json").read_text())
    state: dict[str, Any] = {"status": "started", "stage": "compile"}
    write_result(result, state)
    try:
        from ai_edge_litert.compiled_model import CompiledModel
        from ai_edge_litert.hardware_accelerator import HardwareAccelerator
        from ai_edge_litert.options import GpuOptions, Options

        options = Options(
            hardware_accelerators=HardwareAccelerator.GPU | HardwareAccelerator.CPU,
            gpu_options=GpuOptions(enforce_f32=bool(plan["enforce_f32"])),
        )
        cm = CompiledModel.from_file(str(folder / "model.tflite"), options=options)
        state["fully_accelerated"] = bool(cm.is_fully_accelerated())
        program = KvProgram.from_json(plan["program"])
        call = _caller(cm, state, result)
        if plan.get("feeds_dir"):
            call = recording(call, program, Path(plan["feeds_dir"]))
        logits, tokens = run_steps(
            call,
            program,
            np.asarray(plan["prompt"], np.int32),
            int(plan["steps"]),
            forced=plan["forced"],
        )
    except Exception as exc:
        state.update(status="error", error=one_line(exc))
        write_result(result, state)
        return 1
    np.savez(folder / "logits.npz", **{f"step_{k}": v for k, v in enumerate(logits)})
    state.update(status="ok", stage="done", tokens=tokens)
    write_result(result, state)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
