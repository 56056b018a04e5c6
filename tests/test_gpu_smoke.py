"""Issue acceptance: the real GPU accelerator runs a small model here, and its numbers hold up.

The model (CONV_2D + RELU, then FULLY_CONNECTED, constant weights) is built with the IR in this
process, without TensorFlow. The GPU runs in a child process (tflkit.gpu.probe); the CPU
reference is LiteRT's classic interpreter, run here on the same inputs.
"""

from __future__ import annotations

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter

from tflkit import ir
from tflkit.gpu.probe import probe
from tflkit.ir.builder import OpBuilder

pytestmark = pytest.mark.gpu

#: fp16 on the GPU, as a fraction of the output range: measured max-abs 2.5e-3 for a range of
#: 2.48 here (1e-3); an fp16 ulp at 1.0 is 9.8e-4.
FP16_TOL_OF_RANGE = 4e-3
FP32_TOL = 1e-5


def conv_dense_model() -> bytes:
    """x [1, 8, 8, 3] -> CONV_2D 3x3x4 (VALID, RELU) -> FULLY_CONNECTED 144 -> 5."""
    rng = np.random.default_rng(7)
    fb = ir.schema.fb
    model = ir.Model(description="tflkit smoke: conv + dense")
    graph = model.add_subgraph("main")
    x = graph.new_tensor("x", (1, 8, 8, 3), np.float32)
    build = OpBuilder(graph, prefix="smoke")
    conv = fb.Conv2DOptionsT()
    conv.padding, conv.strideH, conv.strideW = fb.Padding.VALID, 1, 1
    conv.dilationHFactor = conv.dilationWFactor = 1
    conv.fusedActivationFunction = fb.ActivationFunctionType.RELU
    kernel = (rng.standard_normal((4, 3, 3, 3)) / 3).astype(np.float32)
    h = build.CONV_2D(
        x, kernel, rng.standard_normal(4).astype(np.float32), options=conv, shape=(1, 6, 6, 4)
    )
    h = build.RESHAPE(h, np.array([1, 144], np.int32), shape=(1, 144), options=fb.ReshapeOptionsT())
    weights = (rng.standard_normal((5, 144)) / 12).astype(np.float32)
    y = build.FULLY_CONNECTED(
        h,
        weights,
        rng.standard_normal(5).astype(np.float32),
        options=fb.FullyConnectedOptionsT(),
        shape=(1, 5),
    )
    graph.inputs, graph.outputs = [x], [y]
    model.signatures.append(ir.SignatureDef("serving_default", graph, {"x": x}, {"y": y}))
    return ir.dumps(model)


def cpu_reference(data: bytes, x: np.ndarray) -> np.ndarray:
    interpreter = Interpreter(model_content=data)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"]).copy()


@pytest.fixture(scope="module")
def model_and_reference() -> tuple[bytes, np.ndarray, np.ndarray]:
    data = conv_dense_model()
    x = np.random.default_rng(0).standard_normal((1, 8, 8, 3)).astype(np.float32)
    return data, x, cpu_reference(data, x)


def test_gpu_fully_accelerates_and_matches_cpu_in_fp16(gpu, model_and_reference, tmp_path):
    data, x, expected = model_and_reference
    result = probe(data, run=True, inputs={"x": x}, cache_dir=tmp_path)

    assert result.status == "ok", result.log_text
    assert result.is_fully_accelerated
    assert result.log.rejections == []
    assert result.log.gpu_kernels >= 1
    adapter = result.adapter
    assert adapter is not None, result.log_text
    software_names = ("llvmpipe", "lavapipe", "swiftshader")
    assert adapter.is_software == any(n in adapter.name.lower() for n in software_names)
    np.testing.assert_array_equal(result.inputs["x"], x)
    got = result.outputs["y"]
    assert got.shape == expected.shape == (1, 5)
    assert np.abs(expected).max() > 0.1  # a real signal, not all zeros
    atol = FP16_TOL_OF_RANGE * max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(got, expected, rtol=0, atol=atol)
    assert result.compile_seconds is not None and result.compile_seconds > 0


def test_gpu_enforce_f32_matches_cpu_to_1e_5(gpu, model_and_reference, tmp_path):
    data, x, expected = model_and_reference
    result = probe(data, run=True, inputs=[x], enforce_f32=True, cache_dir=tmp_path)

    assert result.status == "ok", result.log_text
    assert result.is_fully_accelerated
    assert result.options["enforce_f32"] is True
    np.testing.assert_allclose(result.outputs["y"], expected, rtol=0, atol=FP32_TOL)


def test_this_environment_reports_a_software_gpu(gpu, tmp_path):
    """Here (CI, dev containers) the accelerator runs on Mesa lavapipe: say so."""
    result = probe(conv_dense_model(), cache_dir=tmp_path)
    adapter = result.adapter
    assert adapter is not None
    if "llvmpipe" not in adapter.name:
        pytest.skip(f"this machine has a hardware GPU adapter: {adapter.name}")
    assert adapter.is_software
    assert adapter.adapter_type == "CPU / Software"
    assert adapter.backend == "Vulkan"
    assert adapter.vendor == "mesa"
