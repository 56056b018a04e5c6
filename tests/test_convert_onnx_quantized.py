"""ONNX models quantized by ONNX Runtime's own tools convert: the preparation turns their integer
and QDQ ops into float ops (``converters/_onnx_dequantize.py``), says what it did, and the first
route converts them; the reference stays ONNX Runtime on the quantized original, so the
conversion says what the round trip costs.

The models are built here with ``onnxruntime.quantization`` in the ONNX converter's environment:
one small float CNN (Conv, Relu, GlobalAveragePool, MatMul, Add), quantized three ways:
``quantize_dynamic`` (DynamicQuantizeLinear, ConvInteger, MatMulInteger; uint8 weights, since
ONNX Runtime's CPU has no ConvInteger for int8 weights), ``quantize_static`` in QDQ format and in
QOperator format (QLinearConv, QLinearMatMul, QLinearAdd, QLinearGlobalAveragePool).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest_corpus import cache_root
from tflkit import ir

BUILD = r"""
import sys
from pathlib import Path
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_dynamic, quantize_static)

out = Path(sys.argv[1])
rng = np.random.default_rng(0)
f32 = TensorProto.FLOAT
inits = [
    numpy_helper.from_array(rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32), "w1"),
    numpy_helper.from_array(rng.normal(0, 0.1, (8,)).astype(np.float32), "b1"),
    numpy_helper.from_array(rng.normal(0, 0.3, (8, 10)).astype(np.float32), "w2"),
    numpy_helper.from_array(rng.normal(0, 0.1, (10,)).astype(np.float32), "b2"),
]
nodes = [
    helper.make_node("Conv", ["x", "w1", "b1"], ["c"], pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c"], ["r"]),
    helper.make_node("GlobalAveragePool", ["r"], ["p"]),
    helper.make_node("Flatten", ["p"], ["f"]),
    helper.make_node("MatMul", ["f", "w2"], ["m"]),
    helper.make_node("Add", ["m", "b2"], ["logits"]),
]
inputs = [helper.make_tensor_value_info("x", f32, [1, 3, 16, 16])]
outputs = [helper.make_tensor_value_info("logits", f32, [1, 10])]
graph = helper.make_graph(nodes, "small", inputs, outputs, initializer=inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, out / "float.onnx")


class Reader(CalibrationDataReader):
    def __init__(self):
        shape = (1, 3, 16, 16)
        self.data = iter([{"x": rng.uniform(0, 1, shape).astype(np.float32)} for _ in range(8)])

    def get_next(self):
        return next(self.data, None)


quantize_dynamic(out / "float.onnx", out / "dynamic.onnx", op_types_to_quantize=["Conv", "MatMul"],
                 weight_type=QuantType.QUInt8)
# int8 weights: ONNX Runtime's CPU has no ConvInteger kernel for them, it cannot run this one
quantize_dynamic(out / "float.onnx", out / "dynamic_int8.onnx", op_types_to_quantize=["Conv"],
                 weight_type=QuantType.QInt8)
quantize_static(out / "float.onnx", out / "qdq.onnx", Reader(), quant_format=QuantFormat.QDQ)
quantize_static(out / "float.onnx", out / "qoperator.onnx", Reader(),
                quant_format=QuantFormat.QOperator)
"""

#: What the preparation says it turned into float ops, per model.
DEQUANTIZED = {
    "dynamic": ("ConvInteger x1", "MatMulInteger x1"),
    "qdq": ("DequantizeLinear (weights) x4", "QuantizeLinear/DequantizeLinear pair x6"),
    "qoperator": ("QLinearConv x1", "QLinearMatMul x1", "QLinearAdd x1"),
}
#: Round-trip cost bounds (max abs on the logits, peak about 1): measured 0.00127 (dynamic)
#: and 0.60 / 0.61 (static: the photographs tflkit feeds lie outside the [0, 1] calibration
#: range, where ONNX Runtime's own int8 model is 0.68 off its float original).
ROUND_TRIP = {"dynamic": 0.01, "qdq": 1.0, "qoperator": 1.0}


@pytest.fixture(scope="module")
def quantized(tmp_path_factory) -> Path:
    from tflkit.converters.envs import ensure_env

    env = ensure_env("onnx", root=cache_root() / "converters")
    out = tmp_path_factory.mktemp("quantized")
    made = subprocess.run(
        [str(env.python), "-c", BUILD, str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert made.returncode == 0, made.stderr[-2000:]
    return out


@pytest.mark.parametrize("name", list(DEQUANTIZED))
def test_ort_quantized_model_converts(quantized: Path, tmp_path: Path, name: str) -> None:
    out = tmp_path / f"{name}.tflite"
    done = subprocess.run(
        [sys.executable, "-m", "tflkit", "convert", str(quantized / f"{name}.onnx"), "-o",
         str(out), "--json"],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    (line,) = [s for s in report["preparation"] if s.startswith("dequantized ")]
    assert all(part in line for part in DEQUANTIZED[name]), line
    assert "--quantize dynamic or --quantize int8" in line  # tflkit's own quantization offered
    assert [a["route"] for a in report["attempts"]] == ["onnx2tf"]  # no second route needed
    assert report["attempts"][0]["error"] is None
    cost = report["cpu_vs_reference_max_abs"]["logits"]
    assert 0 < cost <= ROUND_TRIP[name]
    (note,) = [n for n in report["notes"] if n.startswith("round trip:")]
    assert f"logits {cost:.3g}" in note
    ops = {op.type for op in ir.load(out).main.ops}
    assert not ops & {"QUANTIZE", "DEQUANTIZE"}, ops  # float through and through


def test_a_quantized_model_ort_cannot_run_is_held_to_its_float_meaning(
    quantized: Path, tmp_path: Path
) -> None:
    """``quantize_dynamic`` with int8 weights writes a ConvInteger ONNX Runtime's CPU has no
    kernel for: the conversion says so, is held to the dequantized float model instead, and so
    is tflkit's own quantization of it (``--quantize dynamic``), whose reference file then
    validates."""
    source = quantized / "dynamic_int8.onnx"
    out = tmp_path / "dynamic_int8.tflite"
    done = subprocess.run(
        [sys.executable, "-m", "tflkit", "convert", str(source), "-o", str(out),
         "--quantize", "dynamic", "--json"],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    (note,) = [n for n in report["notes"] if n.startswith("ONNX Runtime cannot run")]
    assert "ConvInteger" in note and "the reference is the dequantized float model" in note
    assert 0 < report["cpu_vs_reference_max_abs"]["logits"] < 0.05
    reference = tmp_path / "dynamic_int8.reference.npz"
    checked = subprocess.run(
        [sys.executable, "-m", "tflkit", "validate", str(out), "-r", "cpu", "--reference",
         str(reference), "--json"],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    verdict = json.loads(checked.stdout)
    assert checked.returncode == 0, checked.stdout[-3000:]
    pairs = {(c["actual"], c["expected"]) for c in verdict["comparisons"]}
    assert ("cpu", "reference") in pairs, pairs
