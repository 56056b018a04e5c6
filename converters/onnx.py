"""ONNX to ``.tflite`` through onnx2tf, in its own environment (the ``onnx`` route).

onnx2tf 1.29 pins numpy 1.26, TensorFlow 2.19 and ai-edge-litert 2.1, which clash with tflkit's
environment, so it runs as a script under ``ConvertOptions.python`` (an interpreter of a venv
where onnx2tf is installed). The reference is ONNX Runtime's float32 output, computed there.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from tflkit import ir
from tflkit.delegates.tf_reference import match_outputs, save_bundle
from tflkit.inputs import entry_point, make_input_sets
from tflkit.report.convert_report import ConvertReport
from tflkit.rewriter.shapes import dynamic_inputs, fix_input_shapes

from ._runner import run_worker
from .base import ConvertOptions, MissingExtraError
from .foreign import has_module
from .provenance import finalize, tool_version
from .tf_common import _raise_for, scratch_dir

__all__ = ["INSTALL_HINT", "convert_onnx"]

INSTALL_HINT = (
    "python -m venv .venv-onnx2tf && .venv-onnx2tf/bin/pip install onnx2tf==1.29.24, then pass "
    "--python .venv-onnx2tf/bin/python"
)
_SCRIPT = Path(__file__).with_name("_onnx_worker.py")


def _step(python: str, step: str, source: Path, options: ConvertOptions, work: Path) -> dict:
    job = {
        "step": step,
        "source": str(source.resolve()),
        "options": options.to_json(),
        "workdir": str(work),
    }
    (work / "job.json").write_text(json.dumps(job))
    (work / "result.json").unlink(missing_ok=True)
    outcome = run_worker(
        [python, str(_SCRIPT), str(work / "job.json")], work, timeout=options.timeout
    )
    _raise_for(outcome)
    return outcome.state


def _cpu_vs_reference(
    data: bytes, feeds: list[dict[str, np.ndarray]], refs: list[dict[str, np.ndarray]]
) -> dict[str, float]:
    """Max |.tflite on the CPU - ONNX Runtime| per output over the reference sets."""
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_content=data).get_signature_runner()
    worst: dict[str, float] = {}
    for feed, ref in zip(feeds, refs, strict=True):
        for name, value in runner(**feed).items():
            diff = float(np.abs(value.astype(np.float64) - ref[name]).max())
            worst[name] = max(worst.get(name, 0.0), diff)
    return worst


def convert_onnx(
    source: Path, output: Path, options: ConvertOptions, report: ConvertReport
) -> ConvertReport:
    python = str(options.python or sys.executable)
    for module in ("onnx2tf", "onnxruntime"):
        if not has_module(python, module):
            raise MissingExtraError(f"ONNX conversion needs {module} in {python}: {INSTALL_HINT}")
    with scratch_dir(output) as tmp:
        work = Path(tmp).resolve()
        state = _step(python, "convert", source, options, work)
        data = (work / "model.tflite").read_bytes()
        model = ir.load(data)
        dynamic = {t.name: t.shape for t in dynamic_inputs(model)}
        if dynamic:  # onnx2tf keeps a -1 batch in shape_signature even with static input shapes
            fix_input_shapes(model, dynamic)
            data = ir.dumps(model)
            model = ir.load(data)
        _, _, ins, outs = entry_point(model)
        sets = make_input_sets(model, count=options.reference_sets, seed=options.seed)
        arrays = {f"s{k}_in_{i}": f[n] for k, f in enumerate(sets.feeds) for i, n in enumerate(ins)}
        np.savez(work / "feeds.npz", sets=np.array(len(sets.feeds)), **arrays)
        ref = _step(python, "reference", source, options, work)
        wanted = {n: t.shape for n, t in outs.items()}
        refs = []
        with np.load(work / "outputs.npz") as npz:
            for k in range(len(sets.feeds)):
                produced = {n: npz[f"s{k}_out_{j}"] for j, n in enumerate(ref["output_names"])}
                refs.append(match_outputs(produced, wanted)[0])
        save_bundle(
            work / "reference.npz",
            sets.feeds,
            refs,
            source=str(source),
            framework=f"onnxruntime {ref.get('onnxruntime')}",
        )
        report.converter = f"onnx2tf {state.get('onnx2tf')}"
        report.versions.update(
            onnx2tf=str(state.get("onnx2tf")),
            tensorflow=str(state.get("tensorflow")),
            onnxruntime=str(ref.get("onnxruntime")),
            framework=f"onnxruntime {ref.get('onnxruntime')}",
        )
        report.versions["ai-edge-litert"] = tool_version("ai-edge-litert") or "unknown"
        report.inputs = [
            {**spec.to_json(), "source_shape": src["onnx_shape"]}
            for spec, src in zip(sets.specs, state.get("inputs", []), strict=False)
        ]
        report.outputs = list(outs)
        report.convert_seconds = state.get("convert_seconds")
        report.cpu_vs_reference_max_abs = _cpu_vs_reference(data, sets.feeds, refs)
        finalize(data, report, output, bundle_tmp=work / "reference.npz")
    return report
