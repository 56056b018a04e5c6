"""A quantized model on a half-precision runner: the GPU computes it dequantized, in fp16, and
rounds every activation back onto its 8-bit grid, so any activation may be a step off. Its
verdict scales with how far one-step flips of quantized activations (with fp16's odds) move the
outputs (``tflkit.delegates.step_flips``), measured per model; fp32 pairs keep the input-step
noise."""

from __future__ import annotations

import numpy as np
import pytest

from tflkit.compare.comparator import OutputInfo, compare_pair
from tflkit.compare.sensitivity import EPS, FLIPS, OutputNoise
from tflkit.compare.tolerances import NOISE_FACTOR
from tflkit.delegates.base import RunResult, execute
from tflkit.delegates.fp16_emulation import reduction_length
from tflkit.delegates.litert_cpu import LiteRTCpuRunner
from tflkit.delegates.step_flips import StepFlipRunner
from tflkit.ir import load
from tflkit.validation.inputs import make_input_sets
from tflkit.validation.pipeline import ValidateOptions, validate

AUDIO = "mltk/audio_example1"  # int8 keyword model: GPU fp16 11 steps off on photographs


def test_flips_move_quantized_activations_only(world_models, corpus):
    data = world_models[AUDIO].read_bytes()
    sets = make_input_sets(load(data), count=2, kind="realistic")
    cpu = execute(LiteRTCpuRunner(data), sets.feeds)
    moved = []
    for seed in range(1, 5):  # validate's trials
        flips = execute(StepFlipRunner(data, seed=seed), sets.feeds)
        assert cpu.ok and flips.ok
        moved += [
            np.abs(a["Identity_int8"].astype(int) - b["Identity_int8"]).max()
            for a, b in zip(cpu.outputs, flips.outputs, strict=True)
        ]
    assert max(moved) > 1  # one-step flips inside the model add up at its output
    # a float model has nothing to flip: the runner is the CPU, op by op
    plain = corpus.path("conv_dense").read_bytes()
    feeds = make_input_sets(load(plain), count=1).feeds
    want, got = execute(LiteRTCpuRunner(plain), feeds), execute(StepFlipRunner(plain), feeds)
    for name, value in want.outputs[0].items():
        assert np.allclose(got.outputs[0][name], value, atol=1e-5)


def _result(runner: str, values: np.ndarray) -> RunResult:
    return RunResult(runner, "ok", outputs=[{"p": values.astype(np.int8)}])


def test_fp16_pairs_of_quantized_models_scale_with_the_flips_fp32_pairs_do_not():
    info = OutputInfo("p", "int8", (1, 6), scale=1 / 256, zero_point=-128, kind="probabilities")
    cpu = np.array([[-20, 60, -128, -100, -90, -128]])
    noise = {
        "int8": {"p": OutputNoise("int8", EPS["int8"], rms=0.0, max_abs=0.0)},
        FLIPS: {"p": OutputNoise(FLIPS, EPS[FLIPS], rms=5.0, max_abs=15.0)},
    }
    eleven = cpu + np.array([[0, -11, 0, 0, 11, 0]])
    fp16 = compare_pair(
        _result("gpu-fp16", eleven), _result("cpu", cpu), [info], noise=noise, quantized=True
    )
    assert fp16.verdict == "pass"
    assert fp16.outputs[0].bound_steps == NOISE_FACTOR[FLIPS] * 15
    fp32 = compare_pair(
        _result("gpu-fp32", eleven), _result("cpu", cpu), [info], noise=noise, quantized=True
    )
    assert fp32.verdict == "fail" and fp32.outputs[0].bound_steps == NOISE_FACTOR["int8"]
    # far beyond what one-step flips do: a broken quantization contract still fails in fp16
    broken = cpu.copy()
    broken[0, 1] = -128
    assert (
        compare_pair(
            _result("gpu-fp16", broken), _result("cpu", cpu), [info], noise=noise, quantized=True
        ).verdict
        == "fail"
    )


@pytest.mark.gpu
def test_a_healthy_int8_model_passes_on_the_gpu_in_fp16(world_models, gpu):
    report = validate(
        world_models[AUDIO],
        ValidateOptions(runners=["cpu", "gpu-fp16", "gpu-fp32"], num_inputs=2),
    )
    assert report.verdict == "pass", report.findings
    fp16 = report.pair("gpu-fp16:cpu").outputs[0]
    assert fp16.steps > 0 and "one-step flips" in fp16.basis
    assert report.pair("gpu-fp32:cpu").outputs[0].steps == 0


@pytest.fixture(scope="module")
def long_dense():
    """A full-int8 keyword-spotter-like net ending in a 4,000-long dense layer (built with
    TensorFlow by ``tests/truth_models.py``)."""
    from tests.truth_models import truth_models

    return truth_models() / "long_dense_int8.tflite"


def test_flip_odds_grow_with_the_length_of_the_sum(long_dense):
    """A 4,000-long dense layer: in fp16 its sums round ~sqrt(4000) times more than one value
    does, so one-step flips of its quantized activations move its softmax by many steps
    (measured: 4-15 over seeds 1-3; the GPU's fp16 run is 8 steps off, its fp32 run exact)."""
    model = load(long_dense)
    (dense,) = [op for op in model.main.ops if op.type == "FULLY_CONNECTED"]
    (conv,) = [op for op in model.main.ops if op.type == "CONV_2D"]
    assert reduction_length(dense) == 4000 and reduction_length(conv) == 10 * 8 * 1
    assert reduction_length(next(op for op in model.main.ops if op.type == "RESHAPE")) == 1
    data = long_dense.read_bytes()
    sets = make_input_sets(model, count=2, kind="realistic")
    cpu = execute(LiteRTCpuRunner(data), sets.feeds)
    assert cpu.ok, cpu.error
    moved = []
    for seed in range(1, 5):  # validate's trials
        flips = execute(StepFlipRunner(data, seed=seed), sets.feeds)
        assert flips.ok, flips.error
        moved += [
            np.abs(a[k].astype(int) - b[k]).max()
            for a, b in zip(cpu.outputs, flips.outputs, strict=True)
            for k in a
        ]
    assert max(moved) >= 8


@pytest.mark.gpu
def test_a_long_dense_layer_in_fp16_is_no_false_alarm(long_dense, gpu):
    report = validate(
        long_dense, ValidateOptions(runners=["cpu", "gpu-fp16", "gpu-fp32"], num_inputs=2)
    )
    assert report.verdict == "pass", report.findings
    fp16 = report.pair("gpu-fp16:cpu").outputs[0]
    assert fp16.steps is not None and fp16.bound_steps is not None
    assert 0 < fp16.steps <= fp16.bound_steps
    assert report.pair("gpu-fp32:cpu").outputs[0].steps == 0
