"""The speed split (compile, first inference, p50 and p90 of the steady state, the GPU's speed-up
over the same device's CPU path) in ``validate`` and ``device validate``, on this machine's real
runners; the browser devices' split is in ``test_browser_webdriver.py``."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from tflkit.cli.main import main
from tflkit.delegates.base import RunResult
from tflkit.proc.child_env import project_root

TINY = project_root() / "tflkit" / "examples" / "tiny_classifier.tflite"
KEYS = ("compile_s", "first_s", "p50_s", "p90_s", "runs")


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main([*args, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_the_split_is_derived_from_the_runs() -> None:
    """The first inference stands apart (a warm-up run when there was one); p50 and p90 are
    those of every timed run after it; a runner that timed once per input set counts sets."""
    repeated = RunResult(
        "webgpu-fp16@x",
        "ok",
        compile_seconds=2.0,
        warmup_seconds=[7.0, 0.5],
        run_seconds=[0.1, 0.2, 0.3, 0.4, 0.5],
        infer_seconds=[0.2, 0.4],
    )
    speed = repeated.speed
    assert (speed.compile_s, speed.first_s, speed.runs, speed.warmup_runs) == (2.0, 7.0, 5, 1)
    assert speed.p50_s == pytest.approx(np.percentile([0.1, 0.2, 0.3, 0.4, 0.5], 50))
    assert speed.p90_s == pytest.approx(np.percentile([0.1, 0.2, 0.3, 0.4, 0.5], 90))
    cold = RunResult("cpu", "ok", run_seconds=[3.0, 1.0, 1.0])  # no warm-up: run 0 is first
    assert (cold.speed.first_s, cold.speed.p50_s, cold.speed.runs) == (3.0, 1.0, 2)
    per_set = RunResult("cpu", "ok", compile_seconds=0.1, infer_seconds=[0.9, 0.1, 0.3])
    assert (per_set.speed.first_s, per_set.speed.runs) == (0.9, 2)
    assert per_set.speed.p50_s == pytest.approx(0.2)
    once = RunResult("cpu", "ok", infer_seconds=[0.9])
    assert (once.speed.first_s, once.speed.p50_s, once.speed.runs) == (0.9, None, 0)
    failed = RunResult("gpu-fp16", "compile_error", compile_seconds=1.0)
    assert (failed.speed.first_s, failed.speed.p50_s, failed.speed.runs) == (None, None, 0)
    assert set(KEYS) <= set(repeated.to_json()["speed"])
    assert repeated.to_json()["inference_seconds"]["count"] == 2  # the old fields stay


def test_validate_reports_the_split(capsys: pytest.CaptureFixture[str]) -> None:
    report = _cli(capsys, "validate", str(TINY), "-r", "cpu", "-r", "cpu-ref", "-n", "4")
    for runner in report["runners"]:
        speed = runner["speed"]
        assert speed["runs"] == 3 and 0 < speed["p50_s"] <= speed["p90_s"], speed
        assert speed["compile_s"] > 0 and speed["first_s"] > 0
    rows = {r["runner"]: r for r in report["speed"]["rows"]}
    assert set(rows) == {"cpu", "cpu-ref"} and report["speed"]["fleet"] is None
    assert rows["cpu"]["device"] == "host" and rows["cpu"]["gpu_speedup"] is None


def test_device_validate_reports_the_split(capsys: pytest.CaptureFixture[str]) -> None:
    """The Linux harness on this machine: 1 warm-up run (the first inference), then 3 timed
    runs of each of 2 input sets."""
    report = _cli(
        capsys, "device", "validate", str(TINY), "-d", "local", "-b", "cpu", "-n", "2",
        "--runs", "3", "--warmup", "1",
    )  # fmt: skip
    speed = next(r for r in report["runners"] if r["runner"] == "cpu@local")["speed"]
    assert speed["runs"] == 6 and speed["warmup_runs"] == 0, speed
    assert 0 < speed["p50_s"] <= speed["p90_s"] and speed["first_s"] > 0


@pytest.mark.gpu
def test_gpu_speedup_over_the_cpu_is_labelled_software(
    gpu: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """On lavapipe the GPU's speed-up over XNNPACK is measured, and said to be a software
    GPU's (the CPU emulating it), never a phone's."""
    report = _cli(capsys, "validate", str(TINY), "-r", "cpu", "-r", "gpu-fp32", "-n", "3")
    rows = {r["runner"]: r for r in report["speed"]["rows"]}
    gpu_row = rows["gpu-fp32"]
    assert gpu_row["status"] == "ok" and gpu_row["software_gpu"] is True
    assert gpu_row["gpu_speedup"] == pytest.approx(rows["cpu"]["p50_s"] / gpu_row["p50_s"])
    assert gpu_row["compile_s"] > 0 and gpu_row["first_s"] > 0


def test_an_80_column_table_keeps_webdriver_devices_apart() -> None:
    """Two WebDriver devices differ only past the width an 80-column table gives a name: the
    names fold onto a second line instead of both ending ``webgpu-fp32@w...``."""
    import io

    from rich.console import Console

    from tflkit.report.speed_report import render_speed

    devices = ["webdriver:http://127.0.0.1:9515", "webdriver:http://127.0.0.1:9516"]
    runners = [
        RunResult(f"{backend}@{device}", "ok", compile_seconds=0.2, run_seconds=[0.02, 0.01, 0.011])
        for device in devices
        for backend in ("webgpu-fp32", "wasm")
    ]
    out = io.StringIO()
    render_speed(runners, Console(file=out, width=80, color_system=None))
    text = out.getvalue()
    assert "…" not in text and max(map(len, text.splitlines())) <= 80
    flat = "".join(line.split("│")[0].strip() for line in text.splitlines() if "│" in line)
    for device in devices:
        assert f"webgpu-fp32@{device}" in flat, text
