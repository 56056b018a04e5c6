"""Child script: quantize a float ``.tflite`` with ai-edge-quantizer (ONNX and PyTorch sources).

Runs as a plain script (``python _quantize_worker.py JOB.json``) in the PyTorch route's
environment, which holds ai-edge-quantizer (litert-torch pulls it): it imports nothing from
tflkit but :mod:`tflkit.proc.result_file`. ``job["source"]`` is the float model; ``job["mode"]``
is ``dynamic`` (int8 weights, float activations: ``dynamic_wi8_afp32``) or ``int8`` (int8 weights
and activations, calibrated on ``calibration.npz``: ``static_wi8_ai8``). Writes
``quantized.tflite``.
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
from tflkit.proc.result_file import RESULT_FILE, write_result  # noqa: E402

RECIPES = {"dynamic": "dynamic_wi8_afp32", "int8": "static_wi8_ai8"}


def _calibration(path, signature):
    """``{signature: [feed, ...]}`` from ``calibration.npz`` (``s{k}__{input name}`` arrays)."""
    feeds = {}
    with np.load(path) as npz:
        for key in npz.files:
            index, _, name = key.partition("__")
            feeds.setdefault(int(index[1:]), {})[name] = npz[key]
    return {signature: [feeds[k] for k in sorted(feeds)]}


def quantize(job, state):
    from importlib.metadata import version

    from ai_edge_quantizer import quantizer, recipe

    work = Path(job["workdir"])
    name = RECIPES[job["mode"]]
    state["quantizer"] = f"ai-edge-quantizer {version('ai-edge-quantizer')} ({name})"
    state["versions"] = {"ai-edge-quantizer": version("ai-edge-quantizer")}
    start = time.perf_counter()
    qt = quantizer.Quantizer(job["source"], getattr(recipe, name)())
    calibration = None
    if qt.need_calibration:
        data = _calibration(work / "calibration.npz", job["signature"])
        calibration = qt.calibrate(data)
    qt.quantize(calibration).export_model(str(work / "quantized.tflite"), overwrite=True)
    state["quantize_seconds"] = time.perf_counter() - start


def main():
    job = json.loads(Path(sys.argv[1]).read_text())
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    state = {"stage": "quantize"}
    try:
        quantize(job, state)
        state["stage"] = "done"
    except Exception as exc:
        text = str(exc).strip().splitlines()[0][:500] if str(exc).strip() else ""
        state.update(error=f"{type(exc).__name__}: {text}", error_kind="quantize")
    write_result(Path(job["workdir"]) / RESULT_FILE, state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
