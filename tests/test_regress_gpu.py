"""Residency regressions on the real GPU accelerator: a rewrite undone is caught even though the
numbers hold, and ``assert_gpu_ready`` names every op that falls back and why."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tflkit.regress.baseline import write_baseline
from tflkit.regress.check import check
from tflkit.regress.pytest_plugin import Tflkit, TflkitAssertion
from tflkit.regress.record import RecordOptions, record

EXAMPLE = Path(__file__).resolve().parents[1] / "tflkit" / "examples" / "tiny_classifier.tflite"

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def rewritten(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rewrite") / "tiny_rewritten.tflite"
    done = subprocess.run(
        [sys.executable, "-m", "tflkit", "rewrite", str(EXAMPLE), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return out


def test_undone_rewrite_is_a_residency_regression(gpu: str, rewritten: Path, tmp_path: Path):
    options = RecordOptions(runners=["cpu", "gpu-fp16"], num_inputs=2)
    baseline = write_baseline(record(rewritten, options), tmp_path / "baseline")
    probe = check(rewritten, baseline)
    assert probe.verdict == "pass", [c.message for c in probe.failures]
    names = {c.name: c.status for c in probe.cases}
    assert names["residency (GPU probe)"] == "pass"
    assert names["gpu-fp16 / log_probs"] == "pass"

    undone = check(EXAMPLE, baseline)
    assert undone.verdict == "fail"
    failed = {c.name: c.message for c in undone.failures}
    assert set(failed) == {"residency (static)", "residency (GPU probe)"}  # numbers hold
    message = failed["residency (GPU probe)"]
    assert message.startswith("the accelerator runs 2 ops on the CPU (baseline 1)")
    assert "falls back: LOG_SOFTMAX (op 6): LOG_SOFTMAX: Operation is not supported" in message
    assert "falls back: ARG_MAX (op 5): ARG_MAX: Tensor type(INT64) is not supported" in message
    assert "now on the CPU: LOG_SOFTMAX (op 6): UNSUPPORTED_OP" in failed["residency (static)"]


def test_assert_gpu_ready_names_each_fallback(gpu: str) -> None:
    with pytest.raises(TflkitAssertion) as caught:
        Tflkit().assert_gpu_ready(EXAMPLE)
    message = str(caught.value)
    assert message.startswith("tiny_classifier.tflite is not GPU-ready: 2 of 7 ops fall back")
    assert "LOG_SOFTMAX (op 6): UNSUPPORTED_OP: LOG_SOFTMAX has no GPU kernel" in message
    assert "ARG_MAX (op 5): DTYPE:" in message
