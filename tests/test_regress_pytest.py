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
def test_face_matches(tflkit):
    tflkit.assert_matches_baseline("models/face.tflite", "baselines/face")

def test_changed_face_matches(tflkit):
    tflkit.assert_matches_baseline("models/face_changed.tflite", "baselines/face")

def test_tiny_is_gpu_ready(tflkit):
    tflkit.assert_gpu_ready("models/tiny.tflite", probe=False)

def test_face_validates(tflkit):
    tflkit.assert_validates("models/face.tflite", runners=["cpu", "cpu-ref"], num_inputs=2)
"""

SUITE = """
[defaults]
runners = ["cpu"]
probe = false

[[models]]
path = "models/face.tflite"
baseline = "baselines/face"

[[models]]
path = "models/face_changed.tflite"
baseline = "baselines/face"
"""


def test_plugin_on_a_user_project(pytester: pytest.Pytester, real_models: list[Path]) -> None:
    face = next(p for p in real_models if p.name == "face_detection_front.tflite")
    models = pytester.mkdir("models")
    shutil.copy(face, models / "face.tflite")
    shutil.copy(EXAMPLE, models / "tiny.tflite")
    perturb_one_buffer(face, models / "face_changed.tflite")
    options = RecordOptions(runners=["cpu"], num_inputs=2, probe=False)
    write_baseline(record(face, options), pytester.path / "baselines" / "face")
    pytester.makepyfile(test_models=USER_TESTS)
    (pytester.path / "tflkit.toml").write_text(SUITE)

    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider", "-rf")
    result.assert_outcomes(passed=3, failed=3)
    out = result.stdout.str()
    assert "2 workers" in out
    for line in (
        "*face_changed.tflite regressed against baselines/face: 2 check(s) failed",
        "*cpu / regressors: cpu output regressors: max_abs * > bound * (*x the bound:*",
        "*tiny.tflite is not GPU-ready: 2 of 7 ops fall back to the CPU",
        "*LOG_SOFTMAX (op 6): UNSUPPORTED_OP: LOG_SOFTMAX has no GPU kernel*",
        "*ARG_MAX (op 5): DTYPE:*",
        "FAILED tflkit.toml::face_changed*",
        "FAILED test_models.py::test_changed_face_matches*",
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
