"""``check --probe --probe-browser``: LiteRT.js in headless Chromium beside the native accelerator.

Real Chromium, real LiteRT.js (fetched into the test cache with npm) and the real GPU accelerator
on the software GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tflkit.rewriter.browser_probe import op_type_differences

from .test_browser_harness import browser_cache, litertjs  # noqa: F401  (pytest fixtures)

TINY = Path(__file__).resolve().parents[1] / "tflkit" / "examples" / "tiny_classifier.tflite"


@pytest.mark.gpu
def test_browser_and_native_accelerator_leave_the_same_ops(gpu, litertjs, browser_cache):  # noqa: F811
    env = {**os.environ, "TFLKIT_BROWSER_DIR": str(browser_cache)}
    command = [sys.executable, "-m", "tflkit", "check", str(TINY), "--probe", "--json"]
    done = subprocess.run(
        [*command, "--probe-browser", "swiftshader"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    browser = report["browser"]
    assert browser["status"] == "ok", browser
    assert (browser["ops_delegated"], browser["ops_total"]) == (5, 7)
    assert browser["fully_accelerated"] is False
    # each (op, reason) once, though LiteRT.js prints its block at every compile
    assert sorted(f["op"] for f in browser["cpu_fallback"]) == ["ARG_MAX", "LOG_SOFTMAX"]
    native = {op["type"] for op in report["ops"] if op["probe_on_gpu"] is False}
    assert native == {"ARG_MAX", "LOG_SOFTMAX"}
    assert browser["differences"] == []


def test_an_op_only_one_runtime_leaves_is_named():
    """The sentences, one per op type on the CPU in one runtime only, in a stable order."""
    lines = op_type_differences({"ARG_MAX", "LOG_SOFTMAX"}, {"ARG_MAX", "CAST"})
    assert lines == [
        "LOG_SOFTMAX: the native accelerator leaves it to the CPU, LiteRT.js in the browser "
        "takes it",
        "CAST: LiteRT.js in the browser leaves it to the CPU, the native accelerator takes it",
    ]
    assert op_type_differences({"ARG_MAX"}, {"ARG_MAX"}) == []


def test_unknown_adapter_is_a_usage_error(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "tflkit", "check", str(TINY), "--probe-browser", "metal"],
        capture_output=True,
        text=True,
        env={**os.environ, "TFLKIT_BROWSER_DIR": str(tmp_path)},
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "tflkit: error: unknown browser adapter 'metal'; choose from ['lavapipe', 'swiftshader']"
    ]
