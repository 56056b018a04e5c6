"""Suites at a team's scale, on real models run for real (CPU runners, real child processes).

``--shard 1/2`` + ``--shard 2/2`` + ``regress merge`` give the report of an unsharded run; a
results file lets a re-run resume from what finished; Ctrl-C mid-suite exits 130, keeps every
finished result, leaves no process behind, and the next run reruns only what did not finish.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.cli import run_tflkit
from tests.test_interrupts import _check_interrupted, _child_running, _start, _survivors
from tests.test_regress import perturb_one_buffer
from tflkit.proc.worker import target_of
from tflkit.regress import suite

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "tflkit" / "examples" / "tiny_classifier.tflite"
SUITE_CHILD = target_of(suite.child_main)  # the argv of each item's worker


def tflkit(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_tflkit(*args, cwd=cwd, timeout=900)


def untimed(report: dict[str, Any]) -> dict[str, Any]:
    """A report without its timings (the only part two runs of the same items may differ in)."""
    for model in report["models"]:
        model.pop("wall_seconds")
        for case in model["cases"]:
            case.pop("seconds")
    return report


@pytest.fixture(scope="module")
def suite_dir(real_models: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five models (the example classifier, three real ones, the classifier with a perturbed
    weight), their baselines recorded by a parallel
    ``regress record --suite``."""
    root = tmp_path_factory.mktemp("suite")
    picked = [EXAMPLE, *real_models[2:5]]
    for path in picked:
        shutil.copy(path, root / path.name)
    models = "".join(
        f"[[models]]\npath = '{p.name}'\nbaseline = 'baselines/{p.stem}'\n" for p in picked
    )
    models += "[[models]]\nname = 'moved'\npath = 'moved.tflite'\nbaseline = 'baselines/moved'\n"
    (root / "tflkit.toml").write_text(
        f"[defaults]\njobs = 2\nrunners = ['cpu', 'cpu-ref']\nprobe = false\nnum_inputs = 2\n"
        f"{models}"
    )
    shutil.copy(EXAMPLE, root / "moved.tflite")
    done = tflkit("regress", "record", "--suite", "tflkit.toml", cwd=root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("baseline recorded") == 5, done.stdout
    perturb_one_buffer(EXAMPLE, root / "moved.tflite", factor=1.5)
    assert not (root / ".tflkit").exists(), "a complete run keeps no default results file"
    return root


def test_shards_merge_into_the_unsharded_report(suite_dir: Path) -> None:
    whole = tflkit("regress", "check", "--suite", "tflkit.toml", "--json", cwd=suite_dir)
    assert whole.returncode == 1, whole.stderr  # the perturbed model regressed
    expected = json.loads(whole.stdout)
    verdicts = {Path(m["model"]).name: m["verdict"] for m in expected["models"]}
    assert verdicts["moved.tflite"] == "fail" and list(verdicts.values()).count("pass") == 4

    shards = []
    for index in (1, 2):
        results = suite_dir / f"shard{index}.jsonl"
        done = tflkit(
            "regress", "check", "--suite", "tflkit.toml", "--shard", f"{index}/2",
            "--results", results, "--json", cwd=suite_dir,
        )  # fmt: skip
        assert done.returncode in (0, 1), done.stderr
        shards.append(results)
    finished = [
        {json.loads(line)["key"] for line in path.read_text().splitlines()[1:]} for path in shards
    ]
    assert finished[0] and finished[1] and not finished[0] & finished[1]

    merged = tflkit("regress", "merge", *shards, "--json", cwd=suite_dir)
    assert merged.returncode == 1, merged.stderr
    assert untimed(json.loads(merged.stdout)) == untimed(expected)

    partial = tflkit("regress", "merge", shards[0], cwd=suite_dir)
    assert partial.returncode == 2 and "Traceback" not in partial.stderr
    assert partial.stderr.strip().count("\n") == 0 and "give every shard" in partial.stderr
    bad = tflkit("regress", "check", "--suite", "tflkit.toml", "--shard", "3/2", cwd=suite_dir)
    assert bad.returncode == 2 and "--shard takes I/N" in bad.stderr


def _results(path: Path) -> dict[str, dict[str, Any]]:
    return {rec["key"]: rec["result"] for rec in map(json.loads, path.read_text().splitlines()[1:])}


def test_ctrl_c_keeps_finished_results_and_the_rerun_resumes(suite_dir: Path) -> None:
    results = suite_dir / "interrupted.jsonl"
    args = ["regress", "check", "--suite", str(suite_dir / "tflkit.toml"), "-j", "1"]
    tag = uuid.uuid4().hex
    proc = _start([*args, "--results", str(results)], tag)
    working = _child_running(SUITE_CHILD)
    deadline = time.monotonic() + 300
    while not (results.exists() and len(_results(results)) >= 2 and working(proc.pid, results)):
        assert proc.poll() is None and time.monotonic() < deadline, "the suite ended first"
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    _check_interrupted(proc.returncode, err.decode(), signal.SIGINT, _survivors(tag))
    kept = _results(results)
    header = json.loads(results.read_text().splitlines()[0])
    assert 2 <= len(kept) < len(header["items"]), "finished results kept, the rest not run"

    done = tflkit(*args, "--results", results, "--json", cwd=suite_dir)
    assert done.returncode == 1, done.stderr
    after = _results(results)
    assert len(after) == len(header["items"])
    assert all(after[key] == result for key, result in kept.items()), "a finished item reran"
