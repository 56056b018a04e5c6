"""Child process: compile one model on the LiteRT GPU accelerator, optionally run it once.

Run as ``python -m tflkit.compat._probe_worker --model M --result R.json [--outputs O.npz]
[--inputs I.npz] [--enforce-f32] [--run] [--seed N]``. The parent (:mod:`tflkit.compat.probe`)
reads the accelerator's native log from this process's stderr. The result JSON is rewritten
atomically after every stage, so when the accelerator kills the process the parent still knows
which stage it died in. Never import TensorFlow here.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

PROTOCOL = 1
_LOCATION = re.compile(r"(?:ERROR: )?\[[\w./\-]+:\d+\]\s*")


def _write_json(path: Path, data: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".result-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def _one_line(exc: BaseException) -> str:
    """The exception's text on one line, without LiteRT's ``ERROR: [file:line]`` markers."""
    text = _LOCATION.sub("", str(exc)) or type(exc).__name__
    return " ".join(part.strip(" └") for part in text.splitlines() if part.strip(" └"))


def _main_op_count(data: bytes) -> int | None:
    """Operators in subgraph 0, read without unpacking the model."""
    try:
        from tflkit.ir.schema import fb

        model = fb.Model.GetRootAs(data, 0)
        return model.Subgraphs(0).OperatorsLength() if model.SubgraphsLength() else 0
    except Exception:
        return None


def _signature(cm: Any) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    key = next(iter(cm.get_signature_list()))
    names = cm.get_signature_list()[key]
    in_details = cm.get_input_tensor_details(key)
    out_details = cm.get_output_tensor_details(key)

    def describe(name: str, details: dict[str, Any]) -> dict[str, Any]:
        d = details[name]
        return {"name": name, "dtype": str(d["dtype"]), "shape": [int(s) for s in d["shape"]]}

    inputs = [describe(n, in_details) for n in names["inputs"]]
    outputs = [describe(n, out_details) for n in names["outputs"]]
    return key, inputs, outputs


def _make_inputs(
    specs: list[dict[str, Any]], given: Path | None, names: list[str] | None, seed: int
) -> list[np.ndarray]:
    """The given inputs (by name or position) or seeded random ones, in signature order."""
    if given is not None:
        with np.load(given, allow_pickle=False) as npz:
            arrays = [npz[f"in_{i}"] for i in range(len(npz.files))]
        if names is not None:
            by_name = dict(zip(names, arrays, strict=True))
            missing = [s["name"] for s in specs if s["name"] not in by_name]
            if missing:
                raise ValueError(
                    f"inputs missing for {missing}; the model takes {[s['name'] for s in specs]}"
                )
            arrays = [by_name[s["name"]] for s in specs]
        if len(arrays) != len(specs):
            raise ValueError(f"{len(arrays)} inputs given, the model takes {len(specs)}")
        return [
            np.ascontiguousarray(a, dtype=s["dtype"]).reshape(s["shape"])
            for a, s in zip(arrays, specs, strict=True)
        ]
    rng = np.random.default_rng(seed)
    out = []
    for s in specs:
        dtype = np.dtype(s["dtype"])
        if dtype.kind == "f":
            out.append(rng.standard_normal(s["shape"]).astype(dtype))
        elif dtype.kind == "b":
            out.append(rng.integers(0, 2, s["shape"]).astype(dtype))
        else:
            info = np.iinfo(dtype)
            low, high = max(info.min, -8), min(info.max, 8)
            out.append(rng.integers(low, high, s["shape"], endpoint=True).astype(dtype))
    return out


def _run(
    cm: Any, arrays: list[np.ndarray], outputs: list[dict[str, Any]]
) -> tuple[list[np.ndarray | None], dict[str, str], float]:
    ins = cm.create_input_buffers(0)
    outs = cm.create_output_buffers(0)
    for buf, arr in zip(ins, arrays, strict=True):
        buf.write(arr)
    start = time.perf_counter()
    cm.run_by_index(0, ins, outs)
    seconds = time.perf_counter() - start
    values: list[np.ndarray | None] = []
    unreadable: dict[str, str] = {}
    for buf, spec in zip(outs, outputs, strict=True):
        count = int(np.prod(spec["shape"], dtype=np.int64))
        try:
            values.append(buf.read(count, np.dtype(spec["dtype"])).reshape(spec["shape"]))
        except (ValueError, TypeError, RuntimeError) as exc:
            values.append(None)
            unreadable[spec["name"]] = f"TensorBuffer.read cannot read {spec['dtype']}: " + (
                _one_line(exc)
            )
    return values, unreadable, seconds


def main(argv: list[str] | None = None) -> int:
    """Compile (and optionally run) the model; always exit 0 unless the runtime kills us."""
    parser = argparse.ArgumentParser(prog="tflkit.compat._probe_worker")
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--result", type=Path, required=True)
    parser.add_argument("--outputs", type=Path)
    parser.add_argument("--inputs", type=Path)
    parser.add_argument("--input-names", help="JSON list naming the arrays in --inputs")
    parser.add_argument("--enforce-f32", action="store_true")
    parser.add_argument("--run", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    state: dict[str, Any] = {"protocol": PROTOCOL, "pid": os.getpid(), "stage": "load"}
    _write_json(args.result, state)
    data = args.model.read_bytes()
    state["num_ops"] = _main_op_count(data)

    from ai_edge_litert.compiled_model import CompiledModel
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator
    from ai_edge_litert.options import GpuOptions, Options

    options = Options(
        hardware_accelerators=HardwareAccelerator.GPU | HardwareAccelerator.CPU,
        gpu_options=GpuOptions(enforce_f32=args.enforce_f32),
    )
    state["stage"] = "compile"
    _write_json(args.result, state)
    print("tflkit-probe: compiling", file=sys.stderr, flush=True)
    start = time.perf_counter()
    try:
        cm = CompiledModel.from_buffer(data, options=options)
    except Exception as exc:
        state["compile_seconds"] = time.perf_counter() - start
        state.update(stage="done", compiled=False, error=_one_line(exc))
        print(f"tflkit-probe: compile failed: {state['error']}", file=sys.stderr, flush=True)
        _write_json(args.result, state)
        return 0
    state["compile_seconds"] = time.perf_counter() - start
    state["compiled"] = True
    state["fully_accelerated"] = bool(cm.is_fully_accelerated())
    state["signature"], state["inputs"], state["outputs"] = _signature(cm)
    print("tflkit-probe: compiled", file=sys.stderr, flush=True)

    if args.run:
        state["stage"] = "run"
        _write_json(args.result, state)
        try:
            names = json.loads(args.input_names) if args.input_names else None
            arrays = _make_inputs(state["inputs"], args.inputs, names, args.seed)
            values, unreadable, seconds = _run(cm, arrays, state["outputs"])
        except Exception as exc:
            state.update(stage="done", run_error=_one_line(exc))
            print(f"tflkit-probe: run failed: {state['run_error']}", file=sys.stderr, flush=True)
            _write_json(args.result, state)
            return 0
        state.update(ran=True, run_seconds=seconds, unreadable=unreadable)
        if args.outputs is not None:
            arrays_out = {f"in_{i}": a for i, a in enumerate(arrays)}
            arrays_out.update({f"out_{i}": v for i, v in enumerate(values) if v is not None})
            fd, tmp = tempfile.mkstemp(dir=args.outputs.parent, prefix=".out-", suffix=".npz")
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **arrays_out)
            os.replace(tmp, args.outputs)
    state["stage"] = "done"
    _write_json(args.result, state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
