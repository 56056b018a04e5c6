"""What convert prints: in the ``--gpu-ready`` summary the validate stage's figures never put a
passing number beside "fail", ops that share a reason are one line with their count and types;
an environment build's progress shows steps, not pip's warnings; error text has no escape codes."""

from __future__ import annotations

import numpy as np

from tflkit.compare.comparator import compare_output
from tflkit.compare.records import OutputInfo, PairComparison
from tflkit.compare.tolerances import Tolerance
from tflkit.converters.pipeline import _validate_line
from tflkit.report.rewrite_report import still_groups
from tflkit.report.validate_report import ValidateReport

OUTSIDE = (
    "supported, but outside the partition the delegate takes (it delegates only the largest; "
    "fix the rejected ops between them)"
)


def _pair(actual: str, expected: str, offset: float) -> PairComparison:
    info = OutputInfo("logits", "float32", (1, 64))
    want = np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32)
    got = want + np.float32(offset)
    out = compare_output(info, want, got, Tolerance(rtol=1e-3, atol=1e-4, precision="fp32"))
    return PairComparison(actual, expected, out.verdict, [out])


def _report(*pairs: PairComparison) -> ValidateReport:
    verdict = "fail" if any(p.verdict == "fail" for p in pairs) else "pass"
    return ValidateReport("m.tflite", "", None, {}, [], [], list(pairs), verdict)


def test_a_failing_validation_shows_the_failing_comparison() -> None:
    passing, failing = _pair("cpu", "reference", 2e-5), _pair("gpu-fp32", "cpu", 0.5)
    assert (passing.verdict, failing.verdict) == ("pass", "fail")
    line = _validate_line(_report(passing, failing))
    assert line.startswith("gpu-fp32:cpu logits: max abs 0.5 over its bound")
    assert "cpu:reference" not in line and "2e-05" not in line
    assert _validate_line(_report(passing)) == "cpu:reference max abs 2e-05"


def test_ops_sharing_a_reason_are_one_line() -> None:
    lines = [f"FULLY_CONNECTED#{i}: {OUTSIDE}" for i in range(8)]
    lines += [f"MUL#{i}: {OUTSIDE}" for i in range(10, 14)]
    lines.append("GATHER#3: GATHER has tensor shapes the GPU delegate does not support.")
    grouped = still_groups(lines)
    assert grouped[0] == (
        f"12 ops (FULLY_CONNECTED x8, MUL x4: FULLY_CONNECTED#0, FULLY_CONNECTED#1 and 10 "
        f"more): {OUTSIDE}"
    )
    assert grouped[1].startswith("GATHER#3: GATHER has tensor shapes")
    assert len(grouped) == 2


def test_build_progress_shows_steps_not_pip_noise() -> None:
    """pip's lines, as a real ``pip install`` prints them into the build log."""
    from tflkit.converters._progress import pip_step, plain

    assert pip_step("Collecting onnx2tf==1.29.24") == "resolving onnx2tf==1.29.24"
    shown = pip_step("  Downloading onnx-1.19.1-cp311-cp311-manylinux_2_17_x86_64.whl (16.4 MB)")
    assert shown == "downloading onnx-1.19.1-cp311-cp311-manylinux_2_17_x86_64.whl"
    assert pip_step("Installing collected packages: a, b, c") == "installing 3 packages"
    for noise in (
        "WARNING: The script onnx2tf is installed in '/x/bin' which is not on PATH.",
        "Successfully installed onnx-1.19.1 onnx2tf-1.29.24",
        "Requirement already satisfied: numpy in ./lib/python3.11/site-packages",
        "[notice] A new release of pip is available: 24.0 -> 25.3",
        "DEPRECATION: Building 'x' using the legacy setup.py bdist_wheel mechanism",
    ):
        assert pip_step(noise) is None, noise
    assert pip_step("waiting for another tflkit process") == "waiting for another tflkit process"
    assert (
        plain("\x1b[31mERROR:\x1b[0m The \x1b[1mConv\x1b[0m op\nfailed")
        == "ERROR: The Conv op failed"
    )
