"""The pytest plugin on a sample user project (pytester, in a subprocess): the ``tflkit``
fixture's assertions pass and fail with readable messages, and a ``tflkit.toml`` suite runs as
test items spread over two xdist workers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.test_regress import perturb_one_buffer
from tflkit.regress.baseline import write_baseline
from tflkit.regress.record import RecordOptions, record

EXAMPLE = Path(__file__).resolve().parents[1] / "tflkit" / "examples" / "tiny_classifier.tflite"

USER_TESTS = """
def test_segmenter_matches(tflkit):
    tflkit.assert_matches_baseline("models/segmenter.tflite", "baselines/segmenter")

def test_changed_segmenter_matches(tflkit):
    tflkit.assert_matches_baseline("models/segmenter_changed.tflite", "baselines/segmenter")

def test_tiny_is_gpu_ready(tflkit):
    tflkit.assert_gpu_ready("models/tiny.tflite", probe=False)

def test_segmenter_validates(tflkit):
    tflkit.assert_validates("models/segmenter.tflite", runners=["cpu", "cpu-ref"], num_inputs=2)
"""

SUITE = """
[defaults]
runners = ["cpu"]
probe = false

[[models]]
path = "models/segmenter.tflite"
baseline = "baselines/segmenter"

[[models]]
path = "models/segmenter_changed.tflite"
baseline = "baselines/segmenter"
"""


def test_plugin_on_a_user_project(pytester: pytest.Pytester, real_models: list[Path]) -> None:
    segmenter = next(p for p in real_models if p.name == "deeplabv3.tflite")
    models = pytester.mkdir("models")
    shutil.copy(segmenter, models / "segmenter.tflite")
    shutil.copy(EXAMPLE, models / "tiny.tflite")
    perturb_one_buffer(segmenter, models / "segmenter_changed.tflite")
    options = RecordOptions(runners=["cpu"], num_inputs=2, probe=False)
    write_baseline(record(segmenter, options), pytester.path / "baselines" / "segmenter")
    pytester.makepyfile(test_models=USER_TESTS)
    (pytester.path / "tflkit.toml").write_text(SUITE)

    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider", "-rf")
    result.assert_outcomes(passed=3, failed=3)
    out = result.stdout.str()
    assert "2 workers" in out
    for line in (
        "*segmenter_changed.tflite regressed against baselines/segmenter: 1 check(s) failed",
        "*cpu / ResizeBilinear_3: cpu output ResizeBilinear_3: max_abs * > bound * (*x the bound:*",
        "*tiny.tflite is not GPU-ready: 2 of 7 ops fall back to the CPU",
        "*LOG_SOFTMAX (op 6): UNSUPPORTED_OP: LOG_SOFTMAX has no GPU kernel*",
        "*ARG_MAX (op 5): DTYPE:*",
        "FAILED tflkit.toml::segmenter_changed*",
        "FAILED test_models.py::test_changed_segmenter_matches*",
        "FAILED test_models.py::test_tiny_is_gpu_ready*",
    ):
        result.stdout.fnmatch_lines([line])
    assert "Traceback" not in out


def test_plugin_imports_nothing_heavy() -> None:
    """It loads in every pytest run of every user: only pytest and the standard library."""
    import subprocess
    import sys

    code = (
        "import sys, tflkit.regress.pytest_plugin as p; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('numpy', 'rich', 'typer', 'ai_edge_litert', 'tensorflow') or m.startswith('tflkit.')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "['tflkit.regress', 'tflkit.regress.pytest_plugin']"
