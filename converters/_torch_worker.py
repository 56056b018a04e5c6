"""Child process: convert an exported PyTorch program (``.pt2``) with litert-torch.

Run as ``python -m tflkit.converters._torch_worker JOB.json`` by an interpreter that has the
``torch`` extra. Writes ``model.tflite``, ``reference.npz`` (seeded inputs and the module's own
float32 outputs) and ``result.json`` in the job's work dir.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.errors import UsageError


def _sample_args(program: Any, options: dict[str, Any]) -> tuple[list[Any], list[dict[str, Any]]]:
    import torch

    args, kwargs = program.example_inputs
    if kwargs:
        raise UsageError("keyword inputs of an exported program are not supported; use positional")
    given = {k: tuple(int(d) for d in v) for k, v in options["input_shapes"].items()}
    samples, inputs = [], []
    for i, arg in enumerate(args):
        name = f"args_{i}"
        shape = given.pop(name, tuple(arg.shape))
        samples.append(torch.zeros(shape, dtype=arg.dtype))
        inputs.append(
            {
                "name": name,
                "shape": list(shape),
                "dtype": str(arg.dtype).split(".")[-1],
                "source_shape": list(arg.shape),
            }
        )
    if given:
        raise UsageError(
            f"--input-shape names {sorted(given)} are not inputs (args_0, args_1, ...)"
        )
    return samples, inputs


def run(job: dict[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] = {"stage": "import"}
    work = Path(job["workdir"])
    options = job["options"]
    try:
        from importlib.metadata import version

        import litert_torch
        import torch

        state.update(torch=torch.__version__, litert_torch=version("litert-torch"))
        state["stage"] = "load"
        program = torch.export.load(job["source"])
        module = program.module()
        samples, state["inputs"] = _sample_args(program, options)
        state["framework"] = f"torch {torch.__version__}"
        state["stage"] = "convert"
        start = time.perf_counter()
        edge = litert_torch.convert(module, tuple(samples))
        edge.export(str(work / "model.tflite"))
        state["convert_seconds"] = time.perf_counter() - start
        state["stage"] = "reference"
        from tflkit import ir
        from tflkit.delegates.tf_reference import save_bundle
        from tflkit.inputs import entry_point, make_input_sets

        model = ir.load((work / "model.tflite").read_bytes())
        _, _, ins, outs = entry_point(model)
        sets = make_input_sets(
            model, count=int(options["reference_sets"]), seed=int(options["seed"])
        )
        refs = []
        with torch.no_grad():
            for feed in sets.feeds:
                args = [torch.from_numpy(np.array(feed[f"args_{i}"])) for i in range(len(ins))]
                result = module(*args)
                flat = list(result) if isinstance(result, list | tuple) else [result]
                refs.append(
                    {n: t.numpy().astype(np.float32) for n, t in zip(outs, flat, strict=True)}
                )
        save_bundle(
            work / "reference.npz",
            sets.feeds,
            refs,
            source=job["source"],
            framework=state["framework"],
        )
        state["output_names"] = list(outs)
        from ai_edge_litert.interpreter import Interpreter

        runner = Interpreter(
            model_content=(work / "model.tflite").read_bytes()
        ).get_signature_runner()
        worst: dict[str, float] = {}
        for feed, ref in zip(sets.feeds, refs, strict=True):
            for name, value in runner(**feed).items():
                worst[name] = max(worst.get(name, 0.0), float(np.abs(value - ref[name]).max()))
        state["cpu_vs_reference_max_abs"] = worst
        state["stage"] = "done"
    except UsageError as exc:
        state.update(error=str(exc), error_kind="usage")
    except Exception as exc:
        state.update(
            error=f"{type(exc).__name__}: {exc}".splitlines()[0][:2000], error_kind=state["stage"]
        )
    return state


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    job = json.loads(Path((sys.argv[1:] if argv is None else argv)[0]).read_text())
    state = run(job)
    result = Path(job["workdir"]) / "result.json"
    tmp = result.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, default=str))
    os.replace(tmp, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
