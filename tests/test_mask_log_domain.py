"""Sigmoid/softmax heads and masks (saturated and not, portrait and landscape, built with
TensorFlow): no false alarm on the GPU in fp32 or fp16, and a planted change of the logits
behind a saturated sigmoid still fails in the log domain against the original on the CPU.
Real runtime, real GPU accelerator (software GPU); figures: ``bench/false_alarms.py``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.truth_models import MASKS, truth_models
from tflkit import ir
from tflkit.compare.log_scope import judged_in_log_domain
from tflkit.validation.pipeline import ValidateOptions, validate


@pytest.fixture(scope="module")
def families():
    return truth_models()


def _plant_logit_shift(src: Path, dst: Path, shift: float) -> None:
    """A copy whose head's conv bias moved by ``shift`` (the logits, before the sigmoid)."""
    model = ir.load(src)
    head = next(op for op in model.main.ops if op.type == "LOGISTIC")
    conv = head.inputs[0].producer
    assert conv is not None and conv.type == "CONV_2D"
    bias = conv.inputs[2]
    bias.buffer = model.intern_buffer(np.array(bias.data) + np.float32(shift))
    ir.save(model, dst)


def test_only_pairs_on_the_cpus_arithmetic_are_judged_in_the_log_domain():
    assert judged_in_log_domain("cpu", "reference") and judged_in_log_domain("cpu-ref", "cpu")
    assert not judged_in_log_domain("gpu-fp32", "cpu")
    assert not judged_in_log_domain("webgpu-fp32", "wasm")
    assert not judged_in_log_domain("cpu@adb:SERIAL", "cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("name", [m[0] for m in MASKS])
def test_healthy_heads_and_masks_pass_on_the_gpu(families, gpu, name):
    report = validate(families / f"{name}.tflite", ValidateOptions(num_inputs=2))
    verdicts = {p.key: p.verdict for p in report.pairs}
    assert verdicts == {k: "pass" for k in ("cpu-fp16:cpu", "gpu-fp16:cpu", "gpu-fp32:cpu")}
    assert report.verdict == "pass", report.findings
    for out in report.pair("gpu-fp32:cpu").outputs:
        assert out.log_diff is None  # between devices the values are judged, not their logs


def test_a_planted_logit_shift_behind_a_saturated_sigmoid_still_fails(families, tmp_path):
    """Bias -20 -> -23: where the mask is ~0 its logarithm moves by 3 nats, its value by
    nothing; against the original on the CPU the log-domain rule names it."""
    original = families / "mask_portrait_saturated.tflite"
    shifted = tmp_path / "shifted.tflite"
    _plant_logit_shift(original, shifted, -3.0)
    report = validate(shifted, ValidateOptions(runners=["cpu"], reference=original, num_inputs=2))
    (out,) = report.pair("cpu:reference").outputs
    assert out.kind == "probabilities" and out.verdict == "fail", out.reasons
    assert out.log_diff is not None and out.log_bound is not None
    assert out.log_diff == pytest.approx(3.0, abs=0.05)
    assert any("log-probability differs" in r for r in out.reasons)
    same = validate(original, ValidateOptions(runners=["cpu"], reference=original, num_inputs=2))
    assert same.verdict == "pass", same.findings
