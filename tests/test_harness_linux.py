"""The Linux harness survives what the runtime does: an accelerator abort, a backend that hangs.

Each backend runs in its own child process with the job's timeout; a crash or a timeout is that
backend's status, and the other backends still run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tflkit import ir
from tflkit.delegates.device_protocol import JobOptions, read_result, write_job
from tflkit.harness.transport import harness_source
from tflkit.ir.builder import OpBuilder

from .test_harness_protocol import PROTOCOL_DIR


def _pack_twice() -> bytes:
    """PACK taking the same tensor twice: the GPU accelerator aborts its process compiling it."""
    model = ir.Model(description="tflkit harness crash test")
    g = model.add_subgraph("main")
    x = g.new_tensor("x", (1, 4), np.float32)
    options = ir.schema.fb.PackOptionsT(valuesCount=2, axis=0)
    y = OpBuilder(g, prefix="pack").PACK(x, x, options=options, shape=(2, 1, 4))
    g.inputs, g.outputs = [x], [y]
    model.signatures.append(ir.SignatureDef("serving_default", g, {"x": x}, {"y": y}))
    return ir.dumps(model)


def _run(job: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(harness_source()), "run", str(job), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.gpu
def test_accelerator_abort_is_a_status(tmp_path: Path) -> None:
    import jsonschema  # part of the test extra: never skipped

    feed = {"x": np.arange(4, dtype=np.float32).reshape(1, 4)}
    options = JobOptions(backends=("gpu_fp16", "cpu"))
    job = write_job(tmp_path / "job", _pack_twice(), [feed], options)
    done = _run(job, tmp_path / "r")
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "r" / "result.json").read_text())
    jsonschema.validate(document, json.loads((PROTOCOL_DIR / "result.schema.json").read_text()))
    result = read_result(tmp_path / "r")
    gpu = result.backends["gpu_fp16"]
    assert gpu.status == "crashed" and gpu.outputs == []
    assert "during compile" in gpu.error and "Check failed" in gpu.error
    assert "Check failed" in gpu.record["delegate_log"]
    cpu = result.backends["cpu"]  # the next backend still ran
    assert cpu.status == "ok"
    np.testing.assert_array_equal(cpu.outputs[0]["y"], np.stack([feed["x"], feed["x"]]))
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["outputs", "result.json"]


def test_backend_timeout_is_a_status(tmp_path: Path) -> None:
    feed = {"x": np.ones((1, 4), np.float32)}
    options = JobOptions(backends=("cpu",), timed_runs=10_000_000, timeout_seconds=3)
    job = write_job(tmp_path / "job", _pack_twice(), [feed], options)
    done = _run(job, tmp_path / "r")
    assert done.returncode == 0, done.stderr
    cpu = read_result(tmp_path / "r").backends["cpu"]
    assert cpu.status == "timeout" and "no result within 3 s (stage run)" in cpu.error
    assert "cpu running (" in done.stdout  # the heartbeat the host relies on


def test_device_python_without_numpy_is_one_line(tmp_path: Path, capsys) -> None:
    """A device Python without numpy (here: this one without site-packages) is named plainly."""
    from tflkit.cli.main import main

    bare = tmp_path / "bare-python"
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    bare.chmod(0o755)
    job = write_job(tmp_path / "job", _pack_twice(), [{"x": np.ones((1, 4), np.float32)}])
    code = main(["device", "run", str(job), "--device", "local", "--device-python", str(bare)])
    err = capsys.readouterr().err
    assert code == 4 and err.count("\n") == 1, err
    assert "has no numpy" in err and "--device-python" in err
    assert not (tmp_path / "job.result").exists()


def test_device_job_then_run_locally(tmp_path: Path, capsys) -> None:
    """`device job` writes a job the schema accepts; `device run --device local` runs it."""
    import jsonschema  # part of the test extra: never skipped

    from tflkit.cli.main import main
    from tflkit.proc.child_env import project_root

    example = project_root() / "tflkit" / "examples" / "tiny_classifier.tflite"
    job = tmp_path / "job"
    args = ["device", "job", str(example), "-o", str(job), "--raw", "-b", "cpu", "-n", "2"]
    assert main(args) == 0, capsys.readouterr().err
    document = json.loads((job / "job.json").read_text())
    jsonschema.validate(document, json.loads((PROTOCOL_DIR / "job.schema.json").read_text()))
    assert document["input_format"] == "raw" and len(document["input_sets"]) == 2
    assert main(args) == 2 and "already exists" in capsys.readouterr().err
    out = tmp_path / "out"
    code = main(["device", "run", str(job), "--device", "local", "-o", str(out), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads(captured.out)
    result = report["results"][0]["result"]
    assert result["backends"][0]["status"] == "ok" and result["job_id"] == document["id"]
    assert (out / "result.json").is_file()
    # the speed split, as validate gives it: compile, first inference, steady state
    (row,) = report["speed"]["rows"]
    record = result["backends"][0]
    assert row["compile_s"] == record["compile_seconds"] > 0
    timed = [t for each in record["run_seconds"] for t in each]
    warm = record.get("warmup_seconds") or []
    first, steady = (warm[0], timed) if warm else (timed[0], timed[1:])
    assert row["first_s"] == first and row["runs"] == len(steady) > 0
    assert min(steady) <= row["p50_s"] <= max(steady)
    code = main(["device", "run", str(job), "--device", "local", "-o", str(tmp_path / "again")])
    text = capsys.readouterr().out
    assert code == 0 and "speed" in text and "p50" in text and "first" in text, text
