"""``device validate --device browser[:ADAPTER]`` and ``validate --runner webgpu-*|wasm``, for real.

LiteRT.js 2.5.3 in Debian's headless Chromium on both WebGPU adapters of a machine without a GPU
(SwiftShader, core WebGPU; Mesa's lavapipe through ANGLE, compatibility mode: marked ``gpu``),
compared by ``validate``'s own machinery (same inputs, calibration, tolerances, verdicts) with
LiteRT's CPU in this process. One browser job per model per adapter, with all three backends;
without Chromium, npm or Playwright these fail in CI and skip elsewhere (``tests.needs``).

Measured here (2 cores): a browser job of a small model takes 2 to 4 s on either adapter;
openWakeWord's embedding model 4 s on SwiftShader and about 30 s on lavapipe (shader
compilation).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tflkit.cli.main import main
from tflkit.harness.browser.device import BrowserDevice, device_from_spec
from tflkit.harness.device_validate import DeviceValidateOptions, device_validate
from tflkit.harness.transport import LocalDevice
from tflkit.report.validate_report import ValidateReport

from .test_browser_harness import (  # noqa: F401  (pytest fixtures)
    ADAPTERS,
    TINY,
    _no_browser_left,
    browser_cache,
    litertjs,
)

BACKENDS = ("webgpu_fp32", "webgpu_fp16", "wasm")
RUNNERS = ("webgpu-fp32", "webgpu-fp16", "wasm")


@pytest.fixture(scope="module", params=ADAPTERS)
def adapter(request: pytest.FixtureRequest, litertjs: Any) -> str:  # noqa: F811
    if request.param == "lavapipe":
        request.getfixturevalue("gpu")  # Mesa's lavapipe works (fail in CI, skip elsewhere)
    return request.param


def _spec(adapter: str) -> str:
    return "browser" if adapter == "swiftshader" else f"browser:{adapter}"


def _validate(path: Path, adapter: str, cache: Path, **options: Any) -> ValidateReport:
    device = BrowserDevice(adapter, cache_dir=cache)
    return device_validate(path, [device], DeviceValidateOptions(num_inputs=2, **options))


def _browser_runs(report: ValidateReport, adapter: str) -> dict[str, Any]:
    """The three browser runners of a report (by backend), each checked for what every browser
    run must say: the adapter it ran on, >= 3 runs of every input set, no drift."""
    spec = _spec(adapter)
    assert [r.runner for r in report.runners] == ["cpu"] + [f"{n}@{spec}" for n in RUNNERS]
    runs = {}
    for backend, name in zip(BACKENDS, RUNNERS, strict=True):
        run = report.runner(f"{name}@{spec}")
        ex = run.executed
        assert run.status == "ok", (run.runner, run.error)
        assert ex["harness"] == "browser" and ex["webgpu_adapter_mode"] == adapter
        assert min(ex["repeats"]["runs"]) >= 3 and ex["repeats"]["stable"] is True
        assert len(ex["repeats"]["runs"]) == len(run.outputs) == 2
        assert ex["webgpu_errors"] == []
        if backend.startswith("webgpu"):
            assert ex["adapter"]["adapter_mode"] == adapter and ex["adapter"]["software"] is True
            level = "core" if adapter == "swiftshader" else "compatibility"
            assert ex["adapter"]["feature_level"] == level
            assert ex["precision"] == ("fp16" if backend == "webgpu_fp16" else "fp32")
        else:
            assert ex["ops_delegated"] == 0 and "adapter" not in ex
        runs[backend] = run
    # every browser runner is compared with the host CPU, at its own precision class
    for name in RUNNERS:
        pair = report.pair(f"{name}@{spec}:cpu")
        assert pair.verdict == "pass", [(o.name, o.reasons) for o in pair.outputs]
    return runs


def _precision(report: ValidateReport, adapter: str, runner: str) -> set[str]:
    pair = report.pair(f"{runner}@{_spec(adapter)}:cpu")
    return {o.tolerance.precision for o in pair.outputs if o.kind not in ("index", "bool")}


def _cli_report(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(list(args))
    return code, json.loads(capsys.readouterr().out)


@pytest.fixture
def cli_cache(
    litertjs: Any,  # noqa: F811
    browser_cache: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    """The CLI (and the browser runners' child process) find LiteRT.js where the tests keep it."""
    monkeypatch.setenv("TFLKIT_BROWSER_DIR", str(browser_cache))
    return browser_cache


# -- the corpus on both adapters ---------------------------------------------------------------


def test_float_model(adapter: str, browser_cache: Path, corpus: Any) -> None:  # noqa: F811
    """conv_dense (float32 CONV_2D + FULLY_CONNECTED): all on the GPU, public API, passes."""
    report = _validate(corpus.path("conv_dense"), adapter, browser_cache)
    assert report.verdict == "pass", report.findings
    runs = _browser_runs(report, adapter)
    for backend in ("webgpu_fp32", "webgpu_fp16"):
        ex = runs[backend].executed
        assert ex["fully_accelerated"] is True and ex["ops_delegated"] == ex["ops_total"] == 3
        assert ex["io_path"] == "api" and ex["api_error"] is None
    assert _precision(report, adapter, "webgpu-fp16") == {"fp16"}
    assert _precision(report, adapter, "webgpu-fp32") == _precision(report, adapter, "wasm")
    assert _precision(report, adapter, "wasm") == {"fp32"}


def test_fp16_weights_model(adapter: str, browser_cache: Path, corpus: Any) -> None:  # noqa: F811
    """fp16 weights with DEQUANTIZE: the GPU takes every op, each backend passes."""
    report = _validate(corpus.path("fp16_weights"), adapter, browser_cache)
    assert report.verdict == "pass", report.findings
    runs = _browser_runs(report, adapter)
    gpu = runs["webgpu_fp32"].executed
    assert gpu["fully_accelerated"] is True and gpu["ops_delegated"] == gpu["ops_total"] == 7


def test_full_int8_model(adapter: str, browser_cache: Path, corpus: Any) -> None:  # noqa: F811
    """Full int8 with int8 I/O: the public JS API refuses int8 tensors, which is a warning on
    every backend (a web app cannot feed it), not a failure; held to the int8 contract."""
    report = _validate(corpus.path("full_int8"), adapter, browser_cache)
    assert report.verdict == "pass", report.findings
    for run in _browser_runs(report, adapter).values():
        assert run.executed["io_path"] == "bindings"
        assert run.executed["api_error"] == "Element type INT8 is not supported."
        assert any(n.startswith("warning: LiteRT.js's public API refuses") for n in run.notes)
    assert _precision(report, adapter, "webgpu-fp16") == {"int8"}


def test_int64_io_model(adapter: str, browser_cache: Path, corpus: Any) -> None:  # noqa: F811
    """ARG_MAX with an int64 output: the API refuses it, the bindings read it, exact match."""
    report = _validate(corpus.path("int64_argmax"), adapter, browser_cache)
    assert report.verdict == "pass", report.findings
    for backend, run in _browser_runs(report, adapter).items():
        assert run.executed["api_error"] == "Element type INT64 is not supported.", backend
        assert all(out.dtype == np.int64 for feed in run.outputs for out in feed.values())


def test_bool_io_model(adapter: str, browser_cache: Path, corpus: Any) -> None:  # noqa: F811
    """GREATER -> SELECT with a bool output: the public API refuses bool (a warning); wasm reads
    it through the bindings and matches exactly; on WebGPU it stays in GPU memory, which
    LiteRT.js cannot read as bool: that output is unverified there, with the reason, not failed."""
    report = _validate(corpus.path("string_or_bool"), adapter, browser_cache)
    assert report.verdict == "pass", report.findings
    runs = _browser_runs(report, adapter)
    for run in runs.values():
        assert run.executed["api_error"] == "Element type BOOL is not supported."
    assert runs["wasm"].outputs[0]["mask"].dtype == np.bool_
    spec = _spec(adapter)
    assert report.pair(f"wasm@{spec}:cpu").outputs[0].verdict == "pass"
    for backend in ("webgpu_fp32", "webgpu_fp16"):
        run = runs[backend]
        assert "mask" not in run.outputs[0] and "y" in run.outputs[0]
        assert "not supported by LiteRT.js in GPU memory" in run.unreadable["mask"]
        verdicts = {o.name: o.verdict for o in report.pair(f"{run.runner}:cpu").outputs}
        assert verdicts == {"mask": "unverified", "y": "pass"}
    assert len(report.unverified) == 2


def test_partially_delegated_model_through_the_cli(
    adapter: str,
    cli_cache: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The bundled classifier (LOG_SOFTMAX and an int64 ARG_MAX stay on the CPU: 5 of 7 ops on
    the GPU) through ``tflkit device validate --device browser[:lavapipe] --json``."""
    code, report = _cli_report(
        capsys,
        "device",
        "validate",
        str(TINY),
        "--device",
        _spec(adapter),
        "--num-inputs",
        "2",
        "--json",
    )
    assert code == 0 and report["verdict"] == "pass", report["findings"]
    runners = {r["runner"].split("@")[0]: r for r in report["runners"]}
    assert set(runners) == {"cpu", *RUNNERS}
    for name in ("webgpu-fp32", "webgpu-fp16"):
        ex = runners[name]["executed"]
        assert ex["fully_accelerated"] is False
        assert (ex["ops_delegated"], ex["ops_total"]) == (5, 7)
        assert {f["op"] for f in ex["cpu_fallback"]} == {"ARG_MAX", "LOG_SOFTMAX"}
        assert any("not fully accelerated" in n for n in runners[name]["notes"])
    assert {c["pair"].split("@")[0] for c in report["comparisons"]} == set(RUNNERS)
    assert all(c["verdict"] == "pass" for c in report["comparisons"])


def test_real_model_through_the_cli(
    adapter: str,
    cli_cache: Path,
    real_models: list[Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A real model, openWakeWord's speech embedding model (64 ops, a -1 batch), all on WebGPU."""
    model = next(p for p in real_models if p.name == "embedding_model.tflite")
    code, report = _cli_report(
        capsys,
        "device",
        "validate",
        str(model),
        "--device",
        _spec(adapter),
        "--num-inputs",
        "2",
        "--json",
    )
    assert code == 0 and report["verdict"] == "pass", report["findings"]
    comparisons = {c["pair"].split("@")[0]: c for c in report["comparisons"]}
    assert set(comparisons) == set(RUNNERS)
    for name, comparison in comparisons.items():
        assert comparison["verdict"] == "pass"
        assert len(comparison["outputs"]) == 1, name
    for runner in report["runners"]:
        ex = runner["executed"]
        if runner["runner"].startswith("webgpu"):
            assert ex["fully_accelerated"] is True and ex["ops_delegated"] == ex["ops_total"] == 64


# -- findings: drift, the compatibility-mode trap, refusals ----------------------------------


def _random_model(path: Path) -> Path:
    """x + RANDOM_UNIFORM([1, 8]): LiteRT's kernel advances its Philox state on every run, so
    the same input gives a new output each time (on the CPU here and in LiteRT.js's Wasm)."""
    from tflkit import ir
    from tflkit.ir.builder import OpBuilder

    model = ir.Model()
    graph = model.add_subgraph("main")
    x = graph.new_tensor("x", (1, 8), np.float32)
    graph.inputs = [x]
    b = OpBuilder(graph)
    options = ir.schema.fb.RandomOptionsT()
    options.seed, options.seed2 = 1, 2
    noise = b.RANDOM_UNIFORM(
        np.array([1, 8], np.int32), options=options, shape=(1, 8), dtype=np.float32
    )
    graph.outputs = [b.ADD(x, noise, options=ir.schema.fb.AddOptionsT())]
    path.write_bytes(ir.dumps(model))
    return path


def test_run_to_run_drift_is_a_finding_of_its_own(
    litertjs: Any,  # noqa: F811
    browser_cache: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Repeated runs of one input set that differ make a failed check with its own line per
    backend (never averaged into the comparison), and the report says DRIFT."""
    model = _random_model(tmp_path / "random.tflite")
    report = _validate(model, "swiftshader", browser_cache, backends=("webgpu_fp32", "wasm"))
    assert report.verdict == "fail"
    for name in ("webgpu-fp32@browser", "wasm@browser"):
        run = report.runner(name)
        assert run.status == "ok"  # it ran; its answers moved
        repeats = run.executed["repeats"]
        assert repeats["stable"] is False and repeats["max_abs_diff"] > 0.01
        drift = [f for f in report.findings if f.startswith(f"{name} drift: ")]
        assert len(drift) == 1, report.findings
        assert "repeated runs of the same input set gave different outputs" in drift[0]
    from io import StringIO

    from rich.console import Console

    from tflkit.report.validate_report import render_terminal

    out = StringIO()
    render_terminal(report, Console(file=out, width=200, color_system=None))
    assert "DRIFT" in out.getvalue() and "finding: wasm@browser drift:" in out.getvalue()


@pytest.mark.gpu
def test_compatibility_mode_trap_fails_device_validate(
    gpu: str,
    litertjs: Any,  # noqa: F811
    browser_cache: Path,  # noqa: F811
) -> None:
    """lavapipe (WebGPU compatibility mode) with a device requested without the adapter's
    limits: LiteRT.js returns wrong numbers without an exception; ``device validate`` reports
    the WebGPU runners as run_error, unusable, and the verdict fails (wasm still passes)."""
    report = _validate(
        TINY,
        "lavapipe",
        browser_cache,
        browser={"webgpu_device": "default-limits"},
    )
    assert report.verdict == "fail"
    for name in ("webgpu-fp32", "webgpu-fp16"):
        run = report.runner(f"{name}@browser:lavapipe")
        assert run.status == "run_error" and run.outputs == []
        assert "exceeds the maximum allowed (128)" in run.error
        assert any(n.startswith("unusable: WebGPU refused work") for n in run.notes)
        assert any(f.startswith(f"{name}@browser:lavapipe run_error") for f in report.findings)
        assert report.pair(f"{name}@browser:lavapipe:cpu").verdict != "pass"
    assert report.runner("wasm@browser:lavapipe").status == "ok"
    assert report.pair("wasm@browser:lavapipe:cpu").verdict == "pass"


def test_public_api_refusal_is_a_per_backend_status(
    litertjs: Any,  # noqa: F811
    browser_cache: Path,  # noqa: F811
) -> None:
    """Without the Wasm bindings (``raw_io`` off, as a web app runs LiteRT.js) the int64 model
    gives each backend ``unavailable`` with LiteRT.js's reason; the job itself completes."""
    report = _validate(TINY, "swiftshader", browser_cache, browser={"raw_io": False})
    assert report.verdict == "fail"
    for name in RUNNERS:
        run = report.runner(f"{name}@browser")
        assert run.status == "unavailable"
        assert run.error == "Element type INT64 is not supported."
    assert report.runner("cpu").ok


def test_browser_and_local_devices_in_one_run(
    litertjs: Any,  # noqa: F811
    browser_cache: Path,  # noqa: F811
    corpus: Any,
) -> None:
    """A browser and this machine's Linux harness in one ``device validate``: each device runs
    its own backends (one job each, the same inputs), all compared with the host CPU."""
    report = device_validate(
        corpus.path("conv_dense"),
        [BrowserDevice(cache_dir=browser_cache), LocalDevice()],
        DeviceValidateOptions(num_inputs=2, backends=("cpu", "wasm")),
    )
    assert [r.runner for r in report.runners] == ["cpu", "wasm@browser", "cpu@local"]
    assert report.verdict == "pass", report.findings
    assert report.runner("wasm@browser").executed["harness"] == "browser"
    assert report.runner("cpu@local").executed["harness"] == "linux"


def test_device_job_and_run_in_the_browser(
    cli_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``device job -b wasm`` then ``device run --device browser``: the protocol's result folder
    (harness kind browser), valid against the 1.1 schemas; a ``cpu`` backend of the same job is
    ``unavailable`` there (the Linux harness's backend), not an error of the job."""
    import jsonschema

    from .test_harness_protocol import PROTOCOL_DIR

    job, out = tmp_path / "job", tmp_path / "out"
    code, made = _cli_report(
        capsys, "device", "job", str(TINY), "-o", str(job), "-b", "wasm", "-b", "cpu", "--json"
    )
    assert code == 0 and made["job"]["backends"] == ["wasm", "cpu"]
    jsonschema.validate(made["job"], json.loads((PROTOCOL_DIR / "job.schema.json").read_text()))
    code, ran = _cli_report(
        capsys, "device", "run", str(job), "--device", "browser", "-o", str(out), "--json"
    )
    assert code == 0
    [result] = ran["results"]
    document = result["result"]
    jsonschema.validate(document, json.loads((PROTOCOL_DIR / "result.schema.json").read_text()))
    assert document["harness"]["kind"] == "browser" and (out / "result.json").is_file()
    wasm, cpu = document["backends"]
    assert (wasm["backend"], wasm["status"], cpu["backend"], cpu["status"]) == (
        "wasm",
        "ok",
        "cpu",
        "unavailable",
    )
    assert wasm["repeats"]["stable"] is True and min(wasm["repeats"]["runs"]) >= 3


def test_device_specs() -> None:
    from tflkit.errors import UsageError

    assert device_from_spec("browser").adapter == "swiftshader"  # type: ignore[attr-defined]
    lavapipe = device_from_spec("browser:lavapipe")
    assert isinstance(lavapipe, BrowserDevice) and lavapipe.spec == "browser:lavapipe"
    assert device_from_spec("local").spec == "local"
    with pytest.raises(UsageError, match="browser\\[:swiftshader\\|lavapipe\\]"):
        device_from_spec("browser:metal")
    with pytest.raises(UsageError, match="runs none of the backends"):
        device_validate(TINY, [BrowserDevice()], DeviceValidateOptions(backends=("gpu_fp16",)))


# -- validate --runner webgpu-fp32 --runner wasm ----------------------------------------------


def test_validate_browser_runners_through_the_cli(
    cli_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``tflkit validate tiny --runner webgpu-fp32 --runner wasm``: one browser job for both
    runners, compared at fp32, passes; each runner says what executed."""
    code, report = _cli_report(
        capsys,
        "validate",
        str(TINY),
        "--runner",
        "webgpu-fp32",
        "--runner",
        "wasm",
        "--num-inputs",
        "2",
        "--json",
    )
    assert code == 0 and report["verdict"] == "pass", report["findings"]
    runners = {r["runner"]: r for r in report["runners"]}
    assert list(runners) == ["webgpu-fp32", "wasm"]
    gpu, wasm = runners["webgpu-fp32"]["executed"], runners["wasm"]["executed"]
    assert gpu["adapter"]["adapter_mode"] == "swiftshader" and gpu["fully_accelerated"] is False
    assert (gpu["ops_delegated"], gpu["ops_total"]) == (5, 7)
    assert gpu["repeats"]["stable"] is True and min(gpu["repeats"]["runs"]) >= 3
    assert wasm["device"].startswith("CPU (XNNPACK in Wasm)")
    # one Chromium ran both: the same browser job, so the same device facts
    assert gpu["device_info"]["user_agent"] == wasm["device_info"]["user_agent"]
    [pair] = report["comparisons"]
    assert pair["pair"] == "wasm:webgpu-fp32" and pair["verdict"] == "pass"
    assert {o["tolerance"]["precision"] for o in pair["outputs"] if o["kind"] != "index"} == {
        "fp32"
    }


def test_validate_browser_runners_against_the_cpu(adapter: str, cli_cache: Path) -> None:
    """The API with the CPU: webgpu-fp16 is judged as an fp16 runner, wasm and webgpu-fp32 as
    fp32 ones; ``browser_adapter`` picks the adapter."""
    from tflkit.validation.pipeline import ValidateOptions, validate

    report = validate(
        TINY,
        ValidateOptions(
            runners=["cpu", *RUNNERS], num_inputs=2, browser_adapter=adapter, calibrate=False
        ),
    )
    assert report.verdict == "pass", report.findings
    classes = {
        p.actual: {o.tolerance.precision for o in p.outputs if o.kind != "index"}
        for p in report.pairs
    }
    assert classes == {"webgpu-fp32": {"fp32"}, "webgpu-fp16": {"fp16"}, "wasm": {"fp32"}}
    modes = {report.runner(n).executed["webgpu_adapter_mode"] for n in RUNNERS}
    assert modes == {adapter}
