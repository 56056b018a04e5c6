"""Child process: compile one model on the LiteRT GPU accelerator, optionally run it once.

Arguments: ``--model M --result R.json [--outputs O.npz]
[--inputs I.npz | --input-sets S.npz] [--signature KEY] [--enforce-f32] [--run] [--seed N]``, or
in batch mode ``--jobs J.json --result R.json [--start K]`` (compile and run several small models
one after the other, e.g. every op of a model cut out on its own). The parent
(:mod:`tflkit.gpu.probe`) reads the accelerator's native log from this process's stderr. The
result JSON is rewritten atomically after every stage (and every job), so when the accelerator
kills the process the parent still knows which stage, and which job, it died in. Never import
TensorFlow here.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.fsio import atomic_output
from tflkit.gpu.buffers import BindingRefused, read_buffer, write_buffer
from tflkit.proc.result_file import write_result

PROTOCOL = 1
_LOCATION = re.compile(r"(?:ERROR: )?\[[\w./\-]+:\d+\]\s*")


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


#: What CompiledModel calls the one entry point of a model without signatures (its inputs and
#: outputs then carry their tensor names, as tflkit's entry point does).
PLACEHOLDER = "<placeholder signature>"


def _signature(
    cm: Any, key: str | None = None
) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    signatures = cm.get_signature_list()
    if key is None:
        key = next(iter(signatures))
    elif key not in signatures:
        if list(signatures) == [PLACEHOLDER]:
            raise ValueError(f"the model has no signatures, so --signature {key!r} is unknown")
        raise ValueError(f"no signature {key!r}; the model has {list(signatures)}")
    names = cm.get_signature_list()[key]
    in_details = cm.get_input_tensor_details(key)
    out_details = cm.get_output_tensor_details(key)

    def describe(name: str, details: dict[str, Any]) -> dict[str, Any]:
        d = details[name]
        return {"name": name, "dtype": str(d["dtype"]), "shape": [int(s) for s in d["shape"]]}

    inputs = [describe(n, in_details) for n in names["inputs"]]
    outputs = [describe(n, out_details) for n in names["outputs"]]
    return key, inputs, outputs


def _input_tensors(data: bytes, key: str | None) -> dict[str, Any]:
    """The entry point's input tensors by signature name (for the integer rule of the random
    inputs); {} when the model does not load as tflkit's IR."""
    try:
        from tflkit import ir
        from tflkit.ir.entry import entry_point

        model = ir.load(data)
        return entry_point(model, key if model.signatures else None)[2]
    except Exception:
        return {}


def _make_inputs(
    specs: list[dict[str, Any]],
    given: Path | None,
    names: list[str] | None,
    seed: int,
    tensors: dict[str, Any] | None = None,
) -> list[np.ndarray]:
    """The given inputs (by name or position) or seeded random ones (:mod:`tflkit.ir.feeds`,
    integers by the rule of ``tensors``, the inputs by name), in signature order."""
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
    from tflkit.ir.feeds import integer_range, random_array

    rng = np.random.default_rng(seed)
    out = []
    for s in specs:
        dtype = np.dtype(s["dtype"])
        tensor = (tensors or {}).get(s["name"])
        span = integer_range(dtype, tensor) if dtype.kind in "biu" else None
        out.append(random_array(s["shape"], dtype, rng, span))
    return out


def _run(
    cm: Any, arrays: list[np.ndarray], outputs: list[dict[str, Any]], signature_index: int = 0
) -> tuple[list[np.ndarray | None], dict[str, str], float]:
    """One inference; the time covers writing the inputs, running and reading the outputs."""
    ins = cm.create_input_buffers(signature_index)
    outs = cm.create_output_buffers(signature_index)
    start = time.perf_counter()
    for buf, arr in zip(ins, arrays, strict=True):
        write_buffer(buf, arr)
    cm.run_by_index(signature_index, ins, outs)
    values: list[np.ndarray | None] = []
    unreadable: dict[str, str] = {}
    for buf, spec in zip(outs, outputs, strict=True):
        try:
            values.append(read_buffer(buf, spec["shape"], spec["dtype"]))
        except BindingRefused as exc:
            values.append(None)
            unreadable[spec["name"]] = f"TensorBuffer.read cannot read {spec['dtype']}: " + (
                _one_line(exc)
            )
    return values, unreadable, time.perf_counter() - start


def _load_sets(path: Path) -> list[Path]:
    """Split an ``s{k}_in_{i}`` npz into one ``in_{i}`` npz per input set (for _make_inputs)."""
    with np.load(path, allow_pickle=False) as npz:
        keys = npz.files
        count = 1 + max(int(k.split("_", 1)[0][1:]) for k in keys) if keys else 0
        paths = []
        for k in range(count):
            one = path.with_name(f".set{k}.npz")
            prefix = f"s{k}_"
            np.savez(
                one, **{key[len(prefix) :]: npz[key] for key in keys if key.startswith(prefix)}
            )
            paths.append(one)
    return paths


def _save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    with atomic_output(path, "wb", durable=False) as f:
        np.savez(f, **arrays)


def _options(enforce_f32: bool) -> Any:
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator
    from ai_edge_litert.options import GpuOptions, Options

    return Options(
        hardware_accelerators=HardwareAccelerator.GPU | HardwareAccelerator.CPU,
        gpu_options=GpuOptions(enforce_f32=enforce_f32),
    )


JOB_MARKER = "tflkit-probe: job "


def run_jobs(jobs_path: Path, result_path: Path, start_at: int, enforce_f32: bool) -> int:
    """Batch mode: compile each job's model and, when the job has inputs, run it once on them.

    ``jobs_path`` is a JSON list of ``{"model", "inputs"?, "outputs"?, "names"?}`` paths. Each
    job's log starts with a ``JOB_MARKER`` line on stderr, and its record holds the fields of the
    single-model state (compiled, fully_accelerated, signature, specs, timings, error). Before
    each job the state names it in ``current``, so a crash is pinned on the job that caused it.
    """
    from ai_edge_litert.compiled_model import CompiledModel

    jobs = json.loads(jobs_path.read_text())
    state: dict[str, Any] = {"protocol": PROTOCOL, "pid": os.getpid(), "stage": "jobs", "jobs": {}}
    options = _options(enforce_f32)
    for index in range(start_at, len(jobs)):
        job = jobs[index]
        state["current"] = index
        write_result(result_path, state)
        print(f"{JOB_MARKER}{index}", file=sys.stderr, flush=True)
        data = Path(job["model"]).read_bytes()
        record: dict[str, Any] = {
            "protocol": PROTOCOL,
            "pid": os.getpid(),
            "stage": "done",
            "compiled": False,
            "num_ops": _main_op_count(data),
        }
        start = time.perf_counter()
        try:
            cm = CompiledModel.from_buffer(data, options=options)
        except Exception as exc:
            record.update(compile_seconds=time.perf_counter() - start, error=_one_line(exc))
            print(f"tflkit-probe: compile failed: {record['error']}", file=sys.stderr, flush=True)
            state["jobs"][str(index)] = record
            continue
        record["compile_seconds"] = time.perf_counter() - start
        record["compiled"] = True
        record["fully_accelerated"] = bool(cm.is_fully_accelerated())
        try:
            record["signature"], record["inputs"], record["outputs"] = _signature(cm)
            if job.get("inputs") is not None:
                arrays = _make_inputs(record["inputs"], Path(job["inputs"]), job.get("names"), 0)
                values, unreadable, seconds = _run(cm, arrays, record["outputs"])
                record.update(ran=True, run_seconds=seconds, unreadable=unreadable)
                _save_npz(
                    Path(job["outputs"]),
                    {f"out_{i}": v for i, v in enumerate(values) if v is not None},
                )
        except Exception as exc:
            record.update(run_error=_one_line(exc), binding_refused=isinstance(exc, BindingRefused))
            print(f"tflkit-probe: run failed: {record['run_error']}", file=sys.stderr, flush=True)
        del cm
        gc.collect()
        state["jobs"][str(index)] = record
    state.pop("current", None)
    state["stage"] = "done"
    write_result(result_path, state)
    return 0


def _parser() -> argparse.ArgumentParser:
    """The worker's command line (spoken by ``tflkit.gpu.spawn`` and ``tflkit.gpu.jobs``)."""
    parser = argparse.ArgumentParser(prog="tflkit.gpu._probe_worker")
    parser.add_argument("--model", type=Path)
    parser.add_argument("--result", type=Path, required=True)
    parser.add_argument("--outputs", type=Path)
    parser.add_argument("--inputs", type=Path)
    parser.add_argument("--input-sets", type=Path, help="npz of s{k}_in_{i}: several input sets")
    parser.add_argument("--input-names", help="JSON list naming the arrays in --inputs")
    parser.add_argument("--signature", help="signature key (default: the first)")
    parser.add_argument("--enforce-f32", action="store_true")
    parser.add_argument("--run", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=Path, help="batch mode: JSON list of jobs")
    parser.add_argument("--start", type=int, default=0, help="batch mode: first job to run")
    return parser


def _run_inference(
    cm: Any, args: argparse.Namespace, data: bytes, state: dict[str, Any], sig_index: int
) -> tuple[dict[str, np.ndarray], dict[str, str], float]:
    """Run the compiled model once (or once per input set): the arrays to save, the outputs it
    could not read back, the seconds it took. Records the input sets' count and times in
    ``state``."""
    names = json.loads(args.input_names) if args.input_names else None
    arrays_out: dict[str, np.ndarray] = {}
    if args.input_sets is not None:
        set_files = _load_sets(args.input_sets)
        each: list[float] = []
        unreadable: dict[str, str] = {}
        for k, one in enumerate(set_files):
            arrays = _make_inputs(state["inputs"], one, names, args.seed)
            values, unreadable, seconds = _run(cm, arrays, state["outputs"], sig_index)
            each.append(seconds)
            arrays_out.update({f"s{k}_out_{i}": v for i, v in enumerate(values) if v is not None})
        state.update(sets=len(set_files), run_seconds_each=each)
        seconds = sum(each)
    else:
        tensors = _input_tensors(data, state["signature"]) if args.inputs is None else {}
        arrays = _make_inputs(state["inputs"], args.inputs, names, args.seed, tensors)
        values, unreadable, seconds = _run(cm, arrays, state["outputs"], sig_index)
        arrays_out = {f"in_{i}": a for i, a in enumerate(arrays)}
        arrays_out.update({f"out_{i}": v for i, v in enumerate(values) if v is not None})
    return arrays_out, unreadable, seconds


def main(argv: list[str] | None = None) -> int:
    """Compile (and optionally run) the model; always exit 0 unless the runtime kills us."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.jobs is not None:
        return run_jobs(args.jobs, args.result, args.start, args.enforce_f32)
    if args.model is None:
        parser.error("--model is required")

    state: dict[str, Any] = {"protocol": PROTOCOL, "pid": os.getpid(), "stage": "load"}
    write_result(args.result, state)
    data = args.model.read_bytes()
    state["num_ops"] = _main_op_count(data)

    from ai_edge_litert.compiled_model import CompiledModel

    options = _options(args.enforce_f32)
    state["stage"] = "compile"
    write_result(args.result, state)
    print("tflkit-probe: compiling", file=sys.stderr, flush=True)
    start = time.perf_counter()
    try:
        cm = CompiledModel.from_buffer(data, options=options)
    except Exception as exc:
        state["compile_seconds"] = time.perf_counter() - start
        state.update(stage="done", compiled=False, error=_one_line(exc))
        print(f"tflkit-probe: compile failed: {state['error']}", file=sys.stderr, flush=True)
        write_result(args.result, state)
        return 0
    state["compile_seconds"] = time.perf_counter() - start
    state["compiled"] = True
    state["fully_accelerated"] = bool(cm.is_fully_accelerated())
    try:
        state["signature"], state["inputs"], state["outputs"] = _signature(cm, args.signature)
    except ValueError as exc:
        state.update(stage="done", run_error=_one_line(exc))
        write_result(args.result, state)
        return 0
    sig_index = cm.get_signature_index(state["signature"]) if args.signature else 0
    print("tflkit-probe: compiled", file=sys.stderr, flush=True)

    if args.run:
        state["stage"] = "run"
        write_result(args.result, state)
        try:
            arrays_out, unreadable, seconds = _run_inference(cm, args, data, state, sig_index)
        except Exception as exc:
            refused = isinstance(exc, BindingRefused)
            state.update(stage="done", run_error=_one_line(exc), binding_refused=refused)
            print(f"tflkit-probe: run failed: {state['run_error']}", file=sys.stderr, flush=True)
            write_result(args.result, state)
            return 0
        state.update(ran=True, run_seconds=seconds, unreadable=unreadable)
        if args.outputs is not None:
            _save_npz(args.outputs, arrays_out)
    state["stage"] = "done"
    write_result(args.result, state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
