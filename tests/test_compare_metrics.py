"""tflkit.compare: metrics against hand-computed values, tolerances, the comparator's verdicts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tflkit.compare.comparator import OutputInfo, compare_pair, default_pairs
from tflkit.compare.metrics import compute, error_histogram, is_classifier_shaped
from tflkit.compare.tolerances import (
    DEFAULTS,
    NOISE_FACTOR,
    parse_overrides,
    precision_of,
    tolerance_for,
)
from tflkit.delegates.base import RunResult
from tflkit.errors import UsageError


def test_metrics_match_hand_computed_values():
    e = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    a = np.array([1.0, 2.0, 3.0, 5.0], np.float32)
    m = compute(e, a)
    assert m.max_abs == 1.0
    assert m.mean_abs == 0.25
    assert m.rmse == 0.5
    assert m.max_rel == pytest.approx(0.25)
    assert m.cosine == pytest.approx(34.0 / math.sqrt(30.0 * 39.0))
    assert m.snr_db == pytest.approx(10 * math.log10(30.0 / 1.0))
    assert m.psnr_db == pytest.approx(20 * math.log10(4.0 / 0.5))
    assert m.expected_peak == 4.0
    assert m.argmax_index == [3]
    assert (m.nan_actual, m.inf_actual, m.mismatched_nonfinite) == (0, 0, 0)


def test_identical_arrays_are_perfect():
    x = np.random.default_rng(0).standard_normal((3, 7)).astype(np.float32)
    m = compute(x, x.copy())
    assert (m.max_abs, m.rmse, m.cosine) == (0.0, 0.0, 1.0)
    assert math.isinf(m.snr_db) and math.isinf(m.psnr_db)
    assert m.to_json()["snr_db"] == "inf"


def test_relative_error_uses_a_floor_near_zero():
    e = np.array([0.0, 1000.0])
    a = np.array([0.5, 1000.0])
    # floor = 1e-3 * 1000 = 1: 0.5 / 1 rather than 0.5 / 0
    assert compute(e, a).max_rel == pytest.approx(0.5)


def test_nonfinite_values_are_counted_and_left_out():
    e = np.array([1.0, 2.0, np.nan, 4.0])
    a = np.array([1.0, np.inf, np.nan, 4.5])
    m = compute(e, a)
    assert (m.nan_expected, m.nan_actual, m.inf_actual, m.inf_expected) == (1, 1, 1, 0)
    assert m.mismatched_nonfinite == 1  # index 1; index 2 is NaN on both sides
    assert m.max_abs == 0.5  # finite pairs only: indices 0 and 3
    assert m.elements == 4


def test_topk_agreement_on_classifier_rows():
    rng = np.random.default_rng(1)
    e = rng.standard_normal((4, 10))
    a = e.copy()
    a[0, np.argmax(e[0])] -= 100  # row 0: top-1 changes and top-5 set changes
    order = np.argsort(-e[1])
    a[1, order[4]], a[1, order[3]] = e[1, order[3]], e[1, order[4]]  # row 1: swap ranks 4 and 5
    m = compute(e, a)
    assert is_classifier_shaped((4, 10))
    assert m.top1 == 0.75
    assert m.top5 == 0.75  # row 1 keeps the same top-5 set
    assert compute(e[:, :3], a[:, :3]).top5 is None
    assert compute(e.reshape(4, 10, 1), a.reshape(4, 10, 1)).top1 is None


def test_error_histogram_bins_log10_abs_difference():
    e = np.zeros(6)
    a = np.array([0.0, 1e-6, 2e-6, 0.5, np.inf, 1e-20])
    h = error_histogram(e, a)
    assert h.zeros == 1 and h.nonfinite == 1 and h.below == 1
    assert h.counts[h.edges.index(-6.0)] == 2
    assert h.counts[h.edges.index(-1.0)] == 1
    assert sum(h.counts) + h.zeros + h.below + h.above + h.nonfinite == 6


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="shapes differ"):
        compute(np.zeros(3), np.zeros(4))


def test_tolerances_depend_on_precision_and_can_be_overridden():
    assert precision_of("gpu-fp16") == "fp16" and precision_of("gpu-fp32") == "fp32"
    fp16, fp32 = tolerance_for("gpu-fp16", "cpu"), tolerance_for("gpu-fp32", "cpu")
    assert (fp16.rtol, fp16.precision, fp16.noise_factor) == (
        DEFAULTS["fp16"].rtol,
        "fp16",
        NOISE_FACTOR["fp16"],
    )
    assert (fp32.rtol, fp32.precision) == (DEFAULTS["fp32"].rtol, "fp32")
    assert tolerance_for("cpu", "reference").precision == "fp32"
    assert tolerance_for("cpu", "reference", quantized=True).precision == "int8"
    assert tolerance_for("gpu-fp32", "cpu", quantized=True).precision == "int8"
    assert tolerance_for("cpu-ref", "cpu", quantized=True).precision == "fp32"
    assert tolerance_for("cpu-fp16", "cpu").precision == "fp16"
    assert DEFAULTS["fp16"].rtol > 100 * DEFAULTS["fp32"].rtol
    overrides = parse_overrides(["gpu-fp16:cpu@rtol=0.5,cosine=0.9", "fp32@atol=1"])
    assert overrides == {"gpu-fp16:cpu": {"rtol": 0.5, "min_cosine": 0.9}, "fp32": {"atol": 1.0}}
    t = tolerance_for("gpu-fp16", "cpu", overrides=overrides)
    assert (t.rtol, t.min_cosine, t.atol) == (0.5, 0.9, DEFAULTS["fp16"].atol)
    assert t.noise_factor == 0.0  # an explicit bound replaces the calibrated one
    assert tolerance_for("gpu-fp32", "cpu", overrides=overrides).atol == 1.0
    with pytest.raises(UsageError):
        parse_overrides(["gpu-fp16:cpu@speed=3"])
    with pytest.raises(UsageError):
        parse_overrides(["rtol=abc"])


def test_default_pairs():
    assert default_pairs(["cpu", "gpu-fp16", "gpu-fp32", "reference"]) == [
        ("gpu-fp16", "cpu"),
        ("gpu-fp32", "cpu"),
        ("cpu", "reference"),
        ("gpu-fp16", "reference"),
        ("gpu-fp32", "reference"),
    ]
    assert default_pairs(["gpu-fp16", "gpu-fp32"]) == [("gpu-fp32", "gpu-fp16")]


def _result(name: str, outputs: list[dict[str, np.ndarray]], **kw) -> RunResult:
    return RunResult(name, "ok", outputs=outputs, **kw)


def test_comparator_verdicts_per_output_and_pair():
    rng = np.random.default_rng(2)
    y = rng.standard_normal((1, 10)).astype(np.float32)
    z = rng.standard_normal((1, 4)).astype(np.float32)
    idx = np.array([3], np.int64)
    cpu = _result("cpu", [{"y": y, "z": z, "idx": idx}])
    gpu = _result(
        "gpu-fp16",
        [{"y": y + 1e-3, "z": z * 2}],
        unreadable={"idx": "TensorBuffer.read cannot read int64"},
    )
    infos = [
        OutputInfo("y", "float32", (1, 10)),
        OutputInfo("z", "float32", (1, 4)),
        OutputInfo("idx", "int64", (1,)),
    ]
    pair = compare_pair(gpu, cpu, infos)
    verdicts = {o.name: o.verdict for o in pair.outputs}
    assert verdicts == {"y": "pass", "z": "fail", "idx": "unverified"}
    assert pair.verdict == "fail"
    y_out = pair.outputs[0]
    assert y_out.metrics.max_abs == pytest.approx(1e-3, rel=1e-3)
    assert y_out.bound == pytest.approx(DEFAULTS["fp16"].bound(float(np.abs(y).max())))
    assert "int64" in pair.outputs[2].reasons[0]


def test_comparator_dequantizes_and_compares_integers_exactly():
    q = np.array([[10, 20, 30]], np.int8)
    cpu = _result("cpu", [{"q": q, "n": np.array([1, 2])}])
    gpu = _result("gpu-fp32", [{"q": q + np.int8(1), "n": np.array([1, 3])}])
    infos = [
        OutputInfo("q", "int8", (1, 3), scale=0.5, zero_point=2),
        OutputInfo("n", "int32", (2,)),
    ]
    pair = compare_pair(gpu, cpu, infos)
    q_out, n_out = pair.outputs
    assert q_out.dequantized and q_out.metrics.max_abs == pytest.approx(0.5)
    assert q_out.verdict == "pass"  # one quantization step of slack
    assert n_out.verdict == "fail" and n_out.tolerance.rtol == 0.0


def test_comparator_skips_a_pair_when_a_runner_failed():
    cpu = _result("cpu", [{"y": np.zeros(2)}])
    crashed = RunResult("gpu-fp16", "crashed", error="Check failed: boom")
    pair = compare_pair(crashed, cpu, [OutputInfo("y", "float32", (2,))])
    assert pair.verdict == "skipped" and "crashed" in pair.reason and "boom" in pair.reason


def test_divergence_takes_a_mask_sentinel_overflowing_to_inf_as_agreeing():
    """float32's lowest value in an additive mask is -inf by intent: the GPU in fp16 gives -inf
    there (measured on the bundle corpus's decode graph: the mask ADD), which is no divergence;
    a real overflow (8e5 computed, inf on the GPU) still is."""
    from tflkit.compare.divergence import divergence

    mask = divergence(np.array([-3.4028235e38, 1.0, 2.0]), np.array([-np.inf, 1.0, 2.0]))
    assert mask.new_nonfinite == 0 and mask.score == 0.0
    overflow = divergence(np.array([8e5, 1.0]), np.array([np.inf, 1.0]))
    assert overflow.new_nonfinite == 1 and overflow.score == float("inf")
