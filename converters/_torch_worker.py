"""Child script: exported PyTorch program (``.pt2``) -> .tflite with litert-torch, and the
module's own float32 reference.

Runs as a plain script (``python _torch_worker.py JOB.json``) in the environment that has
litert-torch (its own venv): it imports nothing from tflkit but :mod:`tflkit.proc.result_file`
(standard library only). ``job["step"]`` is ``convert`` (writes ``model.tflite``) or
``reference`` (reads ``feeds.npz``, writes ``outputs.npz``).
"""

import json
import os
import sys
import time
from pathlib import Path

# Run as a script, this folder is sys.path[0]; its onnx.py / torch.py would shadow the packages.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

import numpy as np  # noqa: E402

# tflkit's root is on PYTHONPATH (child_env); result_file needs nothing but the standard library
from tflkit.proc.result_file import RESULT_FILE, load_sibling, write_result  # noqa: E402

_SHAPES = load_sibling(__file__, "_input_shapes")


def _samples(program, options):
    import torch

    args, kwargs = program.example_inputs
    if kwargs:
        raise ValueError("usage: keyword inputs of an exported program are not supported")
    given, _fill = _SHAPES.given_shapes(options)  # an exported program's shapes are static
    samples, inputs = [], []
    for i, arg in enumerate(args):
        name = f"args_{i}"
        shape = tuple(given.pop(name, tuple(arg.shape)))
        samples.append(torch.zeros(shape, dtype=arg.dtype))
        inputs.append({"name": name, "source_shape": list(arg.shape)})
    if given:
        raise ValueError(
            f"usage: --input-shape names {sorted(given)} are not inputs (args_0, args_1, ...)"
        )
    return samples, inputs


def convert(job, state):
    from importlib.metadata import version

    import litert_torch
    import torch

    state["versions"] = {"torch": torch.__version__, "litert-torch": version("litert-torch")}
    state["converter"] = f"litert-torch {version('litert-torch')}"
    program = torch.export.load(job["source"])
    samples, state["inputs"] = _samples(program, job["options"])
    start = time.perf_counter()
    module = program.module()
    # litert-torch 0.10 wrote one Linear's weights for another of the same shape in some runs
    # when weights were strided views (measured on onnx2torch's Gemm weights): copy them
    for tensor in [*module.parameters(), *module.buffers()]:
        if not tensor.is_contiguous():
            tensor.data = tensor.data.contiguous()
    edge = litert_torch.convert(module, tuple(samples))
    edge.export(str(Path(job["workdir"]) / "model.tflite"))
    state["convert_seconds"] = time.perf_counter() - start


def reference(job, state):
    import torch

    work = Path(job["workdir"])
    module = torch.export.load(job["source"]).module()
    state["framework"] = f"torch {torch.__version__}"
    arrays = {}
    with np.load(work / "feeds.npz") as npz, torch.no_grad():
        for k in range(int(npz["sets"])):
            count = len([n for n in npz.files if n.startswith(f"s{k}_in_")])
            args = [torch.from_numpy(np.array(npz[f"s{k}_in_{i}"])) for i in range(count)]
            result = module(*args)
            flat = list(result) if isinstance(result, list | tuple) else [result]
            for j, value in enumerate(flat):
                out = value.detach().numpy()
                arrays[f"s{k}_out_{j}"] = out.astype(np.float32) if out.dtype.kind == "f" else out
            state["output_names"] = [f"output_{j}" for j in range(len(flat))]
    np.savez(work / "outputs.npz", **arrays)


def main():
    job = json.loads(Path(sys.argv[1]).read_text())
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    state = {"stage": job["step"]}
    try:
        (convert if job["step"] == "convert" else reference)(job, state)
        state["stage"] = "done"
    except Exception as exc:
        text = str(exc).strip()
        usage = text.startswith("usage: ")
        line = text.removeprefix("usage: ") if usage else f"{type(exc).__name__}: {text}"
        state.update(error=line.splitlines()[0][:500], error_kind="usage" if usage else job["step"])
    write_result(Path(job["workdir"]) / RESULT_FILE, state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
