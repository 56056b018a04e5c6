"""Calibrated verdicts (tflkit.compare.comparator + sensitivity) on the false alarms the issue
measured, rebuilt as arrays, and on the faults they must still catch."""

from __future__ import annotations

import numpy as np

from tflkit.compare.comparator import OutputInfo, compare_output
from tflkit.compare.sensitivity import EPS, OutputNoise, measure, perturb
from tflkit.compare.tolerances import NOISE_FACTOR, tolerance_for


def _noise(precision: str, max_abs: float) -> OutputNoise:
    return OutputNoise(precision, EPS[precision], rms=max_abs / 2, max_abs=max_abs)


def test_a_mask_that_is_zero_on_these_inputs_is_not_meaningful_not_a_failure():
    # The issue: a segmentation mask ~0 on random inputs "failed" on cosine 0.000 while the
    # largest difference was 6e-7.
    rng = np.random.default_rng(0)
    expected = (rng.random((1, 1, 64, 64, 2)) * 1e-7).astype(np.float32)
    actual = (rng.random((1, 1, 64, 64, 2)) * 6e-7).astype(np.float32)
    info = OutputInfo("mask", "float32", (1, 64, 64, 2), kind="probabilities")
    out = compare_output(
        info, expected, actual, tolerance_for("gpu-fp32", "cpu"), _noise("fp32", 1e-9)
    )
    assert out.metrics.cosine < 0.9 and out.verdict == "not-meaningful"
    assert "not meaningful on these inputs" in out.reasons[0] and "--inputs" in out.reasons[1]
    # ... but a NaN where the CPU has a number is a failure whatever the reference looks like
    actual[0, 0, 0, 0, 0] = np.nan
    broken = compare_output(
        info, expected, actual, tolerance_for("gpu-fp32", "cpu"), _noise("fp32", 1e-9)
    )
    assert broken.verdict == "fail"


def test_one_element_off_in_a_330_op_model_passes_when_the_model_moves_that_much_itself():
    # The issue: 2.95 on one element of a 1,630 range, cosine 0.999999997, failed GPU fp32.
    rng = np.random.default_rng(1)
    expected = rng.uniform(-1630, 1630, (1, 2304, 16))
    actual = expected.copy()
    actual[0, 7, 3] += 2.95
    info = OutputInfo("regressors", "float32", (1, 2304, 16))
    tolerance = tolerance_for("gpu-fp32", "cpu")
    # its own noise: the CPU paths and a 2^-24 input perturbation moved it by 0.25
    out = compare_output(info, expected, actual, tolerance, _noise("fp32", 0.25))
    assert out.verdict == "pass" and out.bound == NOISE_FACTOR["fp32"] * 0.25
    # the fixed fp32 bound (no measurement) is what cried wolf
    assert compare_output(info, expected, actual, tolerance).verdict == "fail"
    # an error far beyond the model's own noise still fails
    actual[0, 8, 3] += 100.0
    assert compare_output(info, expected, actual, tolerance, _noise("fp32", 0.25)).verdict == "fail"


def test_quantized_outputs_are_judged_in_steps_for_fp32_and_fp16_alike():
    # The issue: a uint8 EfficientNet failed GPU fp32 at 3 quantization steps, fp16 passed.
    rng = np.random.default_rng(2)
    expected = rng.integers(0, 40, (2, 1, 1000)).astype(np.uint8)
    expected[:, 0, 7] = 200
    actual = np.clip(expected.astype(int) + rng.integers(-3, 4, expected.shape), 0, 255)
    actual = actual.astype(np.uint8)
    info = OutputInfo("Softmax", "uint8", (1, 1000), 1 / 256, 0, kind="probabilities")
    noise = _noise("int8", 1.0)  # one input step moves it by one output step
    for runner in ("gpu-fp32", "gpu-fp16"):
        out = compare_output(info, expected, actual, tolerance_for(runner, "cpu"), noise)
        assert out.verdict == "pass", (runner, out.reasons)
        assert out.steps == 3 and out.bound_steps == NOISE_FACTOR["int8"]
        assert out.class_agreement == 1.0  # top-1 shown for quantized outputs too
    wrong = actual.copy()
    wrong[:, 0, 7] = 20  # the top class lost 180 steps
    out = compare_output(info, expected, wrong, tolerance_for("gpu-fp32", "cpu"), noise)
    assert out.verdict == "fail" and any("argmax differs" in r for r in out.reasons)


def test_class_flips_between_near_ties_are_noise_confident_flips_are_errors():
    expected = np.array([[[0.50, 0.4995, 0.0005]], [[0.9, 0.05, 0.05]]], np.float32)
    near_tie = np.array([[[0.4996, 0.4999, 0.0005]], [[0.9, 0.05, 0.05]]], np.float32)
    info = OutputInfo("probs", "float32", (1, 3), kind="probabilities")
    tolerance = tolerance_for("gpu-fp16", "cpu")
    noise = _noise("fp16", 1e-5)
    out = compare_output(info, expected, near_tie, tolerance, noise)
    assert out.verdict == "pass" and out.class_agreement == 0.5
    confident = np.array([[[0.5, 0.4995, 0.0005]], [[0.05, 0.9, 0.05]]], np.float32)
    assert compare_output(info, expected, confident, tolerance, noise).verdict == "fail"


def test_noise_is_measured_per_element_and_steps_for_quantized_outputs():
    base = [{"y": np.array([1.0, 2.0, 3.0], np.float32), "q": np.array([10, 20], np.int8)}]
    moved = [[{"y": np.array([1.0, 2.5, 3.0], np.float32), "q": np.array([11, 20], np.int8)}]]
    spread = [{"y": np.array([1.1, 2.0, 3.0], np.float32), "q": np.array([10, 18], np.int8)}]
    fp32 = measure(base, moved, "fp32", spread=spread)
    assert set(fp32) == {"y"} and fp32["y"].max_abs == 0.5
    assert np.allclose(fp32["y"].elements, [[0.1, 0.5, 0.0]], atol=1e-6)
    int8 = measure(base, moved, "int8", spread=spread, dequantize={"q": (0.5, 0)})
    assert int8["q"].max_abs == 2.0  # steps, from the XNNPACK/reference spread


def test_perturbation_is_relative_for_floats_one_step_for_quantized_and_none_for_indices():
    feed = {
        "x": np.full((1000,), 2.0, np.float32),
        "q": np.zeros((1000,), np.int8),
        "ids": np.arange(1000, dtype=np.int32),
    }
    (fp16,) = perturb([feed], EPS["fp16"], seed=0, quant={"q": (0.1, 0)})
    rel = np.abs(fp16["x"] / 2.0 - 1.0)
    assert rel.max() <= EPS["fp16"] * 1.01 and rel.max() > EPS["fp16"] / 2
    assert np.array_equal(fp16["q"], feed["q"])  # quantized inputs move only on the 8-bit grid
    (int8,) = perturb([feed], EPS["int8"], seed=0, quant={"q": (0.1, 0)})
    assert set(np.unique(int8["q"])) == {-1, 0, 1}
    assert np.array_equal(int8["ids"], feed["ids"])
