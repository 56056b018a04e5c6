"""The fp16 emulation runner (``cpu-fp16``): rounding, hazards, what it cannot cut out, and its
agreement with the software GPU's fp16 run on a healthy real model."""

from __future__ import annotations

import numpy as np
import pytest

from tflkit import ir
from tflkit.delegates.base import execute
from tflkit.delegates.fp16_emulation import Fp16EmulationRunner, round_fp16
from tflkit.delegates.litert_cpu import LiteRTCpuRunner
from tflkit.ir.builder import OpBuilder
from tflkit.validation.inputs import make_input_sets
from tflkit.validation.pipeline import ValidateOptions, validate

fb = ir.schema.fb


def test_round_fp16_overflows_underflows_and_keeps_the_dtype():
    x = np.array([1.0, 65504.0, 65520.0, -1e6, 1e-8, 3.0e-5, np.nan], np.float32)
    y = round_fp16(x)
    assert y.dtype == np.float32
    assert y[0] == 1.0 and y[1] == 65504.0 and np.isinf(y[2]) and y[3] == -np.inf
    assert y[4] == 0.0  # below half the smallest subnormal (2^-25): flushed
    assert y[5] != np.float32(3.0e-5) and abs(y[5] - 3.0e-5) < 6e-8  # a subnormal: coarse
    assert np.isnan(y[6])
    ints = np.array([70000], np.int32)
    assert round_fp16(ints) is ints


def _scaled(path, factor: float = 1e4) -> bytes:
    """x (1, 64) -> *factor -> *1/factor: fine in fp32, inf in fp16 for |x| > 6.55."""
    model = ir.Model(description="merged multiply")
    graph = model.add_subgraph("main")
    x = graph.new_tensor("x", (1, 64), np.float32)
    b = OpBuilder(graph, prefix="s")
    up = b.MUL(x, np.array(factor, np.float32), options=fb.MulOptionsT(), name="up")
    down = b.MUL(up, np.array(1 / factor, np.float32), options=fb.MulOptionsT(), name="down")
    graph.inputs, graph.outputs = [x], [down]
    ir.save(model, path)
    return path.read_bytes()


def test_an_overflow_the_cpu_never_sees_is_predicted_and_located(tmp_path):
    data = _scaled(tmp_path / "scaled.tflite")
    feeds = [{"x": np.linspace(-10, 10, 64, dtype=np.float32).reshape(1, 64)}]
    cpu = execute(LiteRTCpuRunner(data), feeds)
    emulated = execute(Fp16EmulationRunner(data), feeds)
    assert cpu.ok and emulated.ok
    assert np.allclose(cpu.outputs[0]["s/down"], feeds[0]["x"], atol=1e-6)
    y = emulated.outputs[0]["s/down"]
    overflow = np.abs(feeds[0]["x"]) * 1e4 >= 65520  # the fp16 rounding boundary above 65504
    assert overflow.any() and np.array_equal(np.isinf(y), overflow)
    assert np.allclose(y[~overflow], feeds[0]["x"][~overflow], rtol=2e-3)
    (hazard,) = emulated.executed["fp16_hazards"]
    assert hazard["op_index"] == 0 and hazard["op_type"] == "MUL" and "overflows" in hazard["what"]
    assert "fp16 hazard at op #0 MUL" in emulated.notes[0]


@pytest.mark.parametrize("name", ["if_cond", "while_loop"])
def test_control_flow_is_followed_through_its_subgraphs(corpus, name):
    data = corpus.path(name).read_bytes()
    # both branches of the IF (sum > 0 doubles, else subtracts 1); five WHILE iterations
    x = np.linspace(-1.5, 2.0, 8, dtype=np.float32).reshape(1, 8)
    feeds = [{"x": x}, {"x": -x}]
    cpu = execute(LiteRTCpuRunner(data), feeds)
    emulated = execute(Fp16EmulationRunner(data), feeds)
    assert cpu.ok and emulated.ok, emulated.error
    for want, got in zip(cpu.outputs, emulated.outputs, strict=True):
        assert np.allclose(got["y"], round_fp16(want["y"]), atol=2e-3)
    assert "control flow followed" in emulated.notes[-1]


def test_variables_are_reported_not_emulated(corpus):
    result = execute(Fp16EmulationRunner(corpus.path("resource_variables").read_bytes()), [])
    assert result.status == "unavailable" and "VARIABLE" in result.error


def test_a_real_model_with_if_is_emulated_in_validate(world_models):
    model = world_models["openwakeword/hey_jarvis_v0.1"]  # an IF with two branch subgraphs
    report = validate(model, ValidateOptions(runners=["cpu", "cpu-fp16"], num_inputs=2))
    assert report.runner("cpu-fp16").status == "ok"
    assert report.pair("cpu-fp16:cpu").verdict in ("pass", "not-meaningful"), report.findings
    assert report.verdict in ("pass", "inconclusive"), report.findings


@pytest.mark.gpu
def test_emulation_agrees_with_the_software_gpu_on_a_healthy_model(world_models, gpu):
    model = world_models["simple-cv/deeplabv3"]
    report = validate(model, ValidateOptions(runners=["cpu", "cpu-fp16", "gpu-fp16"], num_inputs=2))
    assert report.verdict == "pass", report.findings
    emulated, real = report.pair("cpu-fp16:cpu"), report.pair("gpu-fp16:cpu")
    for e_out, g_out in zip(emulated.outputs, real.outputs, strict=True):
        assert e_out.verdict == g_out.verdict == "pass"
        # same order of magnitude: fp16 storage explains the GPU's error
        ratio = g_out.metrics.max_abs / e_out.metrics.max_abs
        assert 0.1 < ratio < 10, (e_out.name, ratio)
    assert not report.notes
    sets = make_input_sets(ir.load(model), count=1, kind="realistic")
    assert report.inputs["source"] == sets.source == "realistic"


def test_an_fp16_finding_names_the_ops_whose_storage_costs_it(world_models, tmp_path):
    # BirdNET's metadata model adds 90 to a latitude (180 to a longitude) and feeds SIN: near
    # (0, 0) fp16 storage of those sums loses far more than rounding the inputs does
    model = world_models["birdnet/BirdNET_GLOBAL_6K_V2.4_MData_Model_V2_FP16"]
    feeds = tmp_path / "near_origin.npz"
    np.savez(feeds, MNET_INPUT=np.array([[[0.64, 0.27, 0.04]], [[0.3, 0.8, 0.5]]], np.float32))
    report = validate(model, ValidateOptions(runners=["cpu", "cpu-fp16"], inputs=feeds))
    assert report.pair("cpu-fp16:cpu").verdict == "fail"
    (note,) = [n for n in report.notes if n.startswith("fp16 finding")]
    named = {f"op #{i}" for i in (20, 21, 24, 28, 29, 32)}  # the coordinate-encoding ADD/MUL
    assert any(op in note for op in named) and "fp32" in note, note
