"""The runtime matrix on real runtimes: ``regress record/check --runtime`` with ai-edge-litert
2.2.0 and 2.3.0, the nightly 2.4 and tflite-runtime 2.14, each in its own venv (built on first
use into the test cache, then reused), running the example classifier on the CPU and on the GPU
accelerator (lavapipe).

Measured facts the matrix must show: the nightly puts the classifier's int64 ARG_MAX on the GPU
and then fails the compile, where 2.3.0 leaves ARG_MAX to the CPU; tflite-runtime runs the CPU
runner and says the GPU runner needs a newer runtime (no crash, no regression).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cli import run_tflkit
from tests.conftest_corpus import cache_root
from tflkit.regress.runtimes import DIR_ENV, ensure_runtime

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "tflkit" / "examples" / "tiny_classifier.tflite"
OLD, NEW, NIGHTLY, TFLITE = (
    "ai-edge-litert==2.2.0",
    "ai-edge-litert==2.3.0",
    "ai-edge-litert-nightly",
    "tflite-runtime==2.14.0",
)


@pytest.fixture(scope="module")
def runtimes_dir() -> Path:
    """The test cache's runtime venvs, built once (about 45 s each the first time)."""
    root = cache_root() / "runtimes"
    for spec in (OLD, NEW, NIGHTLY, TFLITE):
        ensure_runtime(spec, root=root)
    return root


def tflkit(runtimes: Path, *args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_tflkit(*args, cwd=cwd, timeout=900, env={DIR_ENV: str(runtimes)})


@pytest.fixture(scope="module")
def baseline(runtimes_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runtimes")
    done = tflkit(
        runtimes_dir, "regress", "record", EXAMPLE, "-o", root / "base",
        "-r", "cpu", "-r", "gpu-fp16", "-n", "2", cwd=root,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return root / "base"


def _cases(model: dict, kind: str) -> dict[str, dict]:
    return {c["runner"]: c for c in model["cases"] if c["kind"] == kind}


def test_matrix_names_what_moved_and_where(runtimes_dir: Path, baseline: Path) -> None:
    root = baseline.parent
    runtimes = [a for spec in (OLD, NEW, NIGHTLY, TFLITE) for a in ("--runtime", spec)]
    reports = ["--junit", root / "r.xml", "--html", root / "r.html", "--markdown", root / "r.md"]
    done = tflkit(
        runtimes_dir, "regress", "check", EXAMPLE, "-b", baseline, *runtimes, *reports, "--json",
        cwd=root,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # the nightly no longer compiles the model
    report = json.loads(done.stdout)
    labels = [m["runtime"] for m in report["models"]]
    assert labels[:2] == [OLD, NEW] and labels[3] == TFLITE
    nightly_label = labels[2]
    assert nightly_label.startswith("ai-edge-litert-nightly==2.4"), labels
    new, nightly, tflite = report["models"][1:]

    # 2.3.0: ARG_MAX (int64) left to the CPU, the rest on the GPU, outputs as recorded
    gpu_new = _cases(new, "runtime")["gpu-fp16"]
    assert new["verdict"] == "pass", new
    assert "ARG_MAX" in gpu_new["details"]["cpu_fallback"] and gpu_new["details"]["ops_on_gpu"]
    # the nightly: ARG_MAX goes to the GPU, and the compile fails
    gpu_nightly = _cases(nightly, "runtime")["gpu-fp16"]
    assert nightly["verdict"] == "fail" and gpu_nightly["status"] == "fail"
    assert gpu_nightly["details"]["status"] == "compile_error"
    assert "ARG_MAX" not in gpu_nightly["details"]["cpu_fallback"]
    moves = [m for m in report["matrix"]["moves"] if m["to"] == nightly_label]
    whats = [m["what"] for m in moves]
    assert "gpu-fp16: ARG_MAX moved onto the GPU" in whats, report["matrix"]
    assert "gpu-fp16: 5/8 ops -> compile_error" in whats and all(m["from"] == NEW for m in moves)
    # tflite-runtime 2.14: the CPU runner runs; the GPU runner needs a newer runtime
    assert tflite["verdict"] == "pass", tflite
    cpu_case = _cases(tflite, "output")["cpu"]
    assert cpu_case["status"] == "pass" and cpu_case["details"]["metrics"]["max_abs"] < 1e-5
    skipped = [c for c in tflite["cases"] if c["runner"] == "gpu-fp16"]
    assert skipped and all(c["status"] == "skipped" for c in skipped)
    assert all("no GPU accelerator API" in c["message"] for c in skipped)

    # every report names the runtime: JUnit test suites, HTML, Markdown
    import junitparser

    names = {suite.name for suite in junitparser.JUnitXml.fromfile(str(root / "r.xml"))}
    assert names == {f"tiny_classifier.tflite [{label}]" for label in labels}
    html = (root / "r.html").read_text()
    assert 'id="runtime-matrix"' in html and "ARG_MAX moved onto the GPU" in html
    assert nightly_label in (root / "r.md").read_text()


def test_record_with_an_old_runtime_names_it(runtimes_dir: Path, baseline: Path) -> None:
    root = baseline.parent
    out = root / "tflite-base"
    done = tflkit(
        runtimes_dir, "regress", "record", EXAMPLE, "-o", out, "-r", "cpu", "-r", "gpu-fp16",
        "-n", "2", "--runtime", TFLITE, cwd=root,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["versions"]["runtime"] == TFLITE
    assert manifest["runners"]["cpu"]["status"] == "ok"
    assert manifest["runners"]["gpu-fp16"]["status"] == "unavailable"
    assert "needs" in done.stdout or "need ai-edge-litert" in done.stdout
    checked = tflkit(runtimes_dir, "regress", "check", EXAMPLE, "-b", out, "--runtime", NEW,
                     "--json", cwd=root)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    model = json.loads(checked.stdout)["models"][0]
    assert f"runtime {TFLITE} -> {NEW}" in model["changes"]
    bad = tflkit(runtimes_dir, "regress", "check", EXAMPLE, "-b", out, "--runtime", "tflite==1",
                 cwd=root)  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.startswith("tflkit: error: --runtime takes")


def test_suite_items_per_runtime(runtimes_dir: Path, baseline: Path) -> None:
    root = baseline.parent
    (root / "tflkit.toml").write_text(f"[[models]]\npath = '{EXAMPLE}'\nbaseline = '{baseline}'\n")
    done = tflkit(
        runtimes_dir, "regress", "check", "--suite", root / "tflkit.toml",
        "--runtime", NEW, "--runtime", NIGHTLY, "--results", root / "r.jsonl", "--json", cwd=root,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert [m["runtime"].split("==")[0] for m in report["models"]] == [
        "ai-edge-litert",
        "ai-edge-litert-nightly",
    ]
    assert [m["verdict"] for m in report["models"]] == ["pass", "fail"]
    items = json.loads((root / "r.jsonl").read_text().splitlines()[0])["items"]
    assert sorted((i["runtime"].split("==")[0], i["runner"]) for i in items) == [
        ("ai-edge-litert", "cpu"),
        ("ai-edge-litert", "gpu-fp16"),
        ("ai-edge-litert-nightly", "cpu"),
        ("ai-edge-litert-nightly", "gpu-fp16"),
    ]
    assert "ARG_MAX moved onto the GPU" in json.dumps(report["matrix"]["moves"])
    record = tflkit(runtimes_dir, "regress", "record", "--suite", root / "tflkit.toml",
                    "--runtime", NEW, cwd=root)  # fmt: skip
    assert record.returncode == 2 and "--runtime with --suite" in record.stderr


def test_device_validate_compares_runtimes(runtimes_dir: Path, tmp_path: Path) -> None:
    done = tflkit(
        runtimes_dir, "device", "validate", EXAMPLE, "--runtime", NEW, "--runtime", TFLITE,
        "-n", "2", "--json", cwd=tmp_path,
    )  # fmt: skip
    report = json.loads(done.stdout)
    pairs = {(c["actual"], c["expected"]): c["verdict"] for c in report["comparisons"]}
    new, old = f"runtime:{NEW}", f"runtime:{TFLITE}"
    assert pairs[(f"cpu@{old}", f"cpu@{new}")] == "pass"
    assert pairs[(f"gpu-fp16@{new}", "cpu")] == "pass"
    assert pairs[(f"gpu-fp16@{old}", f"gpu-fp16@{new}")] == "skipped"
    # the old runtime's GPU runners: said per runner, the reason named
    assert any("no GPU accelerator API" in f and f"gpu-fp16@{old}" in f for f in report["findings"])
    assert done.returncode == 1 and "Traceback" not in done.stderr
