"""The browser harness, for real: LiteRT.js 2.5.3 in Debian's Chromium, driven by Playwright.

Nothing is mocked: the jobs run in headless Chromium on its two WebGPU adapters of a machine
without a GPU (SwiftShader, core WebGPU; Mesa lavapipe through ANGLE, compatibility mode, which
needs the same Mesa as the ``gpu`` marker's accelerator), and every output is compared with
LiteRT's CPU ``Interpreter`` in this process. LiteRT.js is fetched with npm into the test cache
(``$TFLKIT_TEST_CACHE/browser``, which CI keeps). Without Chromium, npm or Playwright the tests
fail in CI (``CI=true``) and are skipped elsewhere, like the ``gpu`` fixture does.

Numbers measured here (the bounds below leave room for other machines): on the tiny classifier,
wasm vs CPU 0 to 2.4e-7, WebGPU fp32 1.4e-6 on both adapters, WebGPU fp16 0.9e-3 to 1.5e-3 on
SwiftShader and 1.0e-2 to 1.2e-2 on lavapipe (log-probabilities around -5); on ``conv_dense``,
fp32 2.4e-6 and fp16 5e-3.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tflkit.delegates.browser.chromium import CHROMIUM, MARKER_SWITCH, processes_tagged
from tflkit.delegates.browser.errors import BrowserTimeoutError, ProvisionError
from tflkit.delegates.browser.job import BrowserOptions, run_browser_job, write_browser_job
from tflkit.delegates.browser.provision import (
    LITERTJS_VERSION,
    MARKER,
    LiteRtJs,
    ensure_litertjs,
    find_litertjs,
)
from tflkit.delegates.browser.server import JobServer
from tflkit.delegates.device_protocol import DeviceResult

from .conftest_corpus import cache_root, unavailable
from .test_harness_protocol import PROTOCOL_DIR

TINY = Path(__file__).resolve().parents[1] / "tflkit" / "examples" / "tiny_classifier.tflite"
ADAPTERS = [
    pytest.param("swiftshader", id="swiftshader"),
    pytest.param("lavapipe", marks=pytest.mark.gpu, id="lavapipe"),
]
BACKENDS = ("webgpu_fp32", "webgpu_fp16", "wasm")
#: max |browser - CPU| allowed, relative to max(1, max |CPU|)
BOUNDS = {"wasm": 1e-5, "webgpu_fp32": 1e-5, "webgpu_fp16": 1e-2}


# -- what the tests need ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def browser_cache() -> Path:
    """LiteRT.js's cache for the tests: inside the test cache, so CI keeps it between runs."""
    return cache_root() / "browser"


@pytest.fixture(scope="session")
def litertjs(browser_cache: Path) -> LiteRtJs:
    """Chromium, Playwright and LiteRT.js (fetched with npm once); fail in CI, skip elsewhere."""
    if not os.access(CHROMIUM, os.X_OK):
        unavailable(
            f"Chromium is not installed at {CHROMIUM} (./install-system-packages.sh "
            "--browser installs it)"
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        unavailable("Playwright is not installed (the test extra pins it)")
    if find_litertjs(browser_cache) is None and shutil.which("npm") is None:
        unavailable("npm is not installed, so LiteRT.js cannot be fetched")
    try:
        return ensure_litertjs(browser_cache, progress=lambda line: None)
    except ProvisionError as exc:
        unavailable(f"LiteRT.js could not be fetched: {exc}")


@pytest.fixture(scope="module", params=ADAPTERS)
def adapter(request: pytest.FixtureRequest, litertjs: LiteRtJs) -> str:
    if request.param == "lavapipe":
        request.getfixturevalue("gpu")  # Mesa's lavapipe works (fail in CI, skip elsewhere)
    return request.param


def _feeds(model: bytes, count: int = 2, seed: int = 0) -> list[dict[str, np.ndarray]]:
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_content=model)
    key = next(iter(interpreter.get_signature_list()))
    details = interpreter.get_signature_runner(key).get_input_details()
    rng = np.random.default_rng(seed)
    return [
        {name: rng.standard_normal(d["shape"]).astype(d["dtype"]) for name, d in details.items()}
        for _ in range(count)
    ]


def _cpu(model: bytes, feeds: list[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
    """LiteRT's CPU Interpreter (XNNPACK): the reference every browser backend is held to."""
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_content=model)
    runner = interpreter.get_signature_runner(next(iter(interpreter.get_signature_list())))
    return [{k: np.array(v) for k, v in runner(**feed).items()} for feed in feeds]


def _run(
    tmp: Path,
    model: bytes,
    feeds: list[dict[str, np.ndarray]],
    adapter: str,
    cache: Path,
    **kwargs: Any,
) -> DeviceResult:
    backends = kwargs.pop("backends", BACKENDS)
    browser = kwargs.pop("browser", None)
    timeout_seconds = kwargs.pop("timeout_seconds", 300.0)
    job = write_browser_job(
        tmp / "job",
        model,
        feeds,
        backends=backends,
        browser=browser,
        timeout_seconds=timeout_seconds,
    )
    return run_browser_job(
        job,
        tmp / "result",
        adapter=adapter,
        timeout=kwargs.pop("timeout", 300.0),
        cache_dir=cache,
        progress=lambda line: None,
        **kwargs,
    )


def _result_schema() -> dict[str, Any]:
    """The protocol's result schema (1.1: harness kind browser, its backends and fields)."""
    return json.loads((PROTOCOL_DIR / "result.schema.json").read_text())


def _check_folder(result: DeviceResult) -> None:
    """result.json plus outputs/<backend>/<set>/<k>.npy, nothing else; valid against 1.1."""
    import jsonschema  # part of the test extra: never skipped

    jsonschema.validate(result.document, _result_schema())
    folder = result.path
    files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    listed = {
        entry["file"]
        for record in result.document["backends"]
        for entries in record.get("outputs", [])
        for entry in entries
    }
    assert files == listed | {"result.json"}
    for rel in listed:
        parts = rel.split("/")
        assert parts[0] == "outputs" and parts[1] in BACKENDS and parts[3].endswith(".npy")


def _error(browser: np.ndarray, cpu: np.ndarray) -> float:
    assert browser.dtype == cpu.dtype and browser.shape == cpu.shape
    return float(np.max(np.abs(browser.astype(np.float64) - cpu.astype(np.float64))))


def _adapter_facts(result: DeviceResult, adapter: str) -> None:
    webgpu = result.device["webgpu"]
    assert result.harness["kind"] == "browser" and LITERTJS_VERSION in result.harness["runtime"]
    assert result.device["cross_origin_isolated"] is True  # COOP/COEP served
    assert "Chrome/" in result.device["user_agent"]
    assert webgpu["webgpu_device"] == "adapter-limits"
    if adapter == "swiftshader":
        assert webgpu["architecture"] == "swiftshader" and webgpu["is_fallback_adapter"] is True
        assert webgpu["feature_level"] == "core"
    else:
        assert "llvmpipe" in webgpu["description"] and webgpu["is_fallback_adapter"] is False
        assert webgpu["feature_level"] == "compatibility"
    # the device carries every limit of the adapter (the compatibility-mode trap avoided)
    assert webgpu["device_limits"] == webgpu["adapter_limits"]


# -- the runs the tests look at (one browser run per model and adapter) -------------------------


@pytest.fixture(scope="module")
def tiny_run(
    adapter: str, browser_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[DeviceResult, list[dict[str, np.ndarray]]]:
    model = TINY.read_bytes()
    feeds = _feeds(model)
    result = _run(tmp_path_factory.mktemp(f"tiny-{adapter}"), model, feeds, adapter, browser_cache)
    return result, _cpu(model, feeds)


@pytest.fixture(scope="module")
def float_run(
    adapter: str, browser_cache: Path, corpus: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[DeviceResult, list[dict[str, np.ndarray]]]:
    model = corpus.path("conv_dense").read_bytes()
    feeds = _feeds(model, seed=1)
    result = _run(tmp_path_factory.mktemp(f"conv-{adapter}"), model, feeds, adapter, browser_cache)
    return result, _cpu(model, feeds)


def test_tiny_classifier_matches_the_cpu(
    adapter: str, tiny_run: tuple[DeviceResult, list[dict[str, np.ndarray]]]
) -> None:
    """Every backend runs the bundled classifier, whose int64 ARG_MAX output the public JS API
    refuses: the backend still runs (through the Wasm bindings), says the API refused it, reads
    the int64 label from host memory, and matches the CPU within each precision's bound."""
    result, cpu = tiny_run
    _check_folder(result)
    _adapter_facts(result, adapter)
    assert list(result.backends) == list(BACKENDS)
    errors = {}
    for name, backend in result.backends.items():
        record = backend.record
        assert backend.status == "ok", (name, backend.error)
        assert record["io_path"] == "bindings"
        assert record["api_error"] == "Element type INT64 is not supported."
        assert record["unreadable"] == {} and record["webgpu_errors"] == []
        assert record["compile_seconds"] > 0
        # warm-up + 3 repeats on set 0, 3 on set 1; every run gave the same numbers
        assert record["repeats"]["runs"] == [4, 3] and record["repeats"]["stable"] is True
        assert [len(times) for times in record["run_seconds"]] == [3, 3]
        assert len(backend.outputs) == len(cpu)
        for got, want in zip(backend.outputs, cpu, strict=True):
            assert set(got) == {"log_probs", "label"}
            np.testing.assert_array_equal(got["label"], want["label"])
            scale = max(1.0, float(np.max(np.abs(want["log_probs"]))))
            error = _error(got["log_probs"], want["log_probs"])
            assert error <= BOUNDS[name] * scale, (name, error)
            errors[name] = max(errors.get(name, 0.0), error)
        if name.startswith("webgpu"):
            assert record["fully_accelerated"] is False
            assert (record["ops_total"], record["ops_delegated"]) == (7, 5)
            assert "ARG_MAX: Tensor type(INT64) is not supported" in record["delegate_log"]
            assert record["gpu"]["software"] is True
            assert record["gpu"]["adapter_mode"] == adapter
        else:
            assert record["ops_delegated"] == 0 and record["gpu"] is None
    # fp16 really ran at half precision, fp32 did not
    assert errors["webgpu_fp16"] > 10 * errors["webgpu_fp32"]


def test_float_model_matches_the_cpu(
    adapter: str, float_run: tuple[DeviceResult, list[dict[str, np.ndarray]]]
) -> None:
    """A float32 CONV_2D + FULLY_CONNECTED model goes through the public API
    (``loadAndCompile``, ``run``, ``data()``), wholly on the GPU, and matches the CPU."""
    result, cpu = float_run
    _check_folder(result)
    _adapter_facts(result, adapter)
    for name, backend in result.backends.items():
        record = backend.record
        assert backend.status == "ok", (name, backend.error)
        assert record["io_path"] == "api" and record["api_error"] is None
        assert record["repeats"]["stable"] is True
        for got, want in zip(backend.outputs, cpu, strict=True):
            assert set(got) == set(want)
            for key in want:
                scale = max(1.0, float(np.max(np.abs(want[key]))))
                assert _error(got[key], want[key]) <= BOUNDS[name] * scale, (name, key)
        if name.startswith("webgpu"):
            assert record["fully_accelerated"] is True
            assert record["ops_delegated"] == record["ops_total"] == 3
            assert "not supported by GPU delegate" not in record["delegate_log"]


@pytest.mark.gpu
def test_compatibility_mode_trap_is_a_failure(
    litertjs: LiteRtJs, browser_cache: Path, tmp_path: Path
) -> None:
    """In WebGPU compatibility mode (lavapipe), a device requested without the adapter's limits
    (``webgpu_device: default-limits``, test-only) makes LiteRT.js build pipelines of 256
    invocations the device caps at 128; it returns wrong numbers without an exception. tflkit
    reports the backend as run_error with WebGPU's line and keeps no outputs; never ok."""
    model = TINY.read_bytes()
    result = _run(
        tmp_path,
        model,
        _feeds(model, count=1),
        "lavapipe",
        browser_cache,
        backends=("webgpu_fp32", "wasm"),
        browser=BrowserOptions(webgpu_device="default-limits"),
    )
    _check_folder(result)
    gpu = result.backends["webgpu_fp32"]
    assert gpu.status == "run_error"
    assert "exceeds the maximum allowed (128)" in gpu.error
    assert gpu.outputs == [] and gpu.record["webgpu_errors"]
    assert gpu.record["gpu"]["max_compute_invocations_per_workgroup"] == 128
    assert gpu.record["gpu"]["adapter_max_compute_invocations_per_workgroup"] > 128
    assert result.backends["wasm"].status == "ok"  # the trap is WebGPU's only


def test_public_api_refusal_is_a_backend_status(
    litertjs: LiteRtJs, browser_cache: Path, tmp_path: Path
) -> None:
    """With the Wasm bindings off, the int64 output makes the backend unavailable with
    LiteRT.js's own reason; the job itself completes and reports it."""
    model = TINY.read_bytes()
    result = _run(
        tmp_path,
        model,
        _feeds(model, count=1),
        "swiftshader",
        browser_cache,
        backends=("webgpu_fp32", "wasm"),
        browser=BrowserOptions(raw_io=False),
    )
    _check_folder(result)
    for backend in result.backends.values():
        assert backend.status == "unavailable"
        assert backend.error == "Element type INT64 is not supported."
        assert backend.outputs == []


def test_lavapipe_missing_is_unavailable_not_swiftshader(
    litertjs: LiteRtJs, browser_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a Vulkan driver Chromium answers the compatibility request with SwiftShader;
    the WebGPU backends then say so instead of passing off SwiftShader as lavapipe."""
    # a machine without Mesa's Vulkan drivers (Chromium still has its own SwiftShader)
    monkeypatch.delenv("VK_DRIVER_FILES", raising=False)
    monkeypatch.setenv("VK_ICD_FILENAMES", str(tmp_path / "no-such-icd.json"))
    model = TINY.read_bytes()
    result = _run(
        tmp_path,
        model,
        _feeds(model, count=1),
        "lavapipe",
        browser_cache,
        backends=("webgpu_fp16", "wasm"),
    )
    gpu = result.backends["webgpu_fp16"]
    assert gpu.status == "unavailable" and gpu.outputs == []
    assert "asked for the lavapipe adapter" in gpu.error and "SwiftShader" in gpu.error
    assert result.device["webgpu"] is None
    assert result.backends["wasm"].status == "ok"


# -- serving, safely ------------------------------------------------------------------------------


def _request(
    server: JobServer, method: str, path: str, body: bytes | None = None
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request(method, path, body=body)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def test_server_refuses_requests_without_the_token(litertjs: LiteRtJs, tmp_path: Path) -> None:
    model = TINY.read_bytes()
    feeds = _feeds(model, count=1)
    job = write_browser_job(tmp_path / "job", model, feeds)
    document = json.loads((job / "job.json").read_text())
    work = tmp_path / "work"
    with JobServer(job, document, litertjs.path, work) as server:
        token = server.token
        assert len(token) >= 32 and server.url == f"http://127.0.0.1:{server.port}/{token}/"
        for path in (
            "/",
            "/index.html",
            "/job/model",
            f"/{token[:-1]}/index.html",
            f"/{token}",
            f"/x{token}/index.html",
            "/session.json",
        ):
            status, _, body = _request(server, "GET", path)
            assert status == 404 and model not in body, path
        status, _, _ = _request(server, "POST", "/event", b'{"type": "done"}')
        assert status == 404 and server.events.empty()
        assert len(server.refused) == 8
        # with the token: the page, the model, LiteRT.js, cross-origin isolated
        status, headers, body = _request(server, "GET", f"/{token}/")
        assert status == 200 and b"harness.js" in body
        assert headers["Cross-Origin-Opener-Policy"] == "same-origin"
        assert headers["Cross-Origin-Embedder-Policy"] == "require-corp"
        assert _request(server, "GET", f"/{token}/job/model")[2] == model
        raw = _request(server, "GET", f"/{token}/job/input/0/0")[2]
        assert raw == feeds[0]["image"].astype("<f4").tobytes()
        status, headers, _ = _request(
            server, "GET", f"/{token}/litertjs/core/wasm/litert_wasm_jspi_internal.wasm"
        )
        assert status == 200 and headers["Content-Type"] == "application/wasm"
        # nothing outside the served folders, even with the token
        for path in (
            "litertjs/core/../../../../../../etc/passwd",
            f"litertjs/core/%2e%2e/{MARKER}",
            "job/input/0/9",
            "job/../job/job.json",
        ):
            assert _request(server, "GET", f"/{token}/{path}")[0] == 404, path
        status, _, _ = _request(server, "POST", f"/{token}/event", b'{"type": "hello"}')
        assert status == 204 and server.events.get_nowait()["type"] == "hello"
        assert server._httpd.server_address[0] == "127.0.0.1"
    warned: list[str] = []
    with JobServer(job, document, litertjs.path, work, host="0.0.0.0", warn=warned.append) as other:
        assert other.url.startswith("http://127.0.0.1:")
        assert len(warned) == 1 and "reachable from the network" in warned[0]


# -- a page that never reports, a backend that hangs ----------------------------------------------


def _start_time(pid: int) -> str | None:
    """The process's start time (clock ticks after boot), None when it is gone or a zombie (dead,
    waiting for PID 1 to reap it: Chromium's children are re-parented there when it is killed)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def _group(pgid: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    if int(handle.read().rsplit(")", 1)[1].split()[2]) == pgid:
                        members.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return members


class _Watch:
    """Every process of the harness's browsers seen while a job runs: the tagged main process
    and everything in its process group (zygotes, GPU process, renderers), by pid and start time
    so a reused pid is not mistaken for a survivor."""

    def __init__(self) -> None:
        self.seen: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            for main in left_browsers():  # this test's, not another worker's
                for pid in {main, *_group(main)}:
                    started = _start_time(pid)
                    if started is not None:
                        self.seen.setdefault(pid, started)
            time.sleep(0.05)

    def __enter__(self) -> _Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def alive(self) -> list[int]:
        return [pid for pid, started in self.seen.items() if _start_time(pid) == started]


def _page(folder: Path, script: str) -> Path:
    folder.mkdir()
    (folder / "index.html").write_text(
        f'<!doctype html><html><body><script type="module">{script}</script></body></html>'
    )
    return folder


def test_silent_page_gives_one_error_and_no_process_left(
    litertjs: LiteRtJs, browser_cache: Path, tmp_path: Path
) -> None:
    """A page that never reports: one clear error line (exit code 4) within the job's timeout,
    no result folder, and not one Chromium process (nor the Playwright driver) left behind."""
    page = _page(tmp_path / "page", "/* never reports */")
    model = TINY.read_bytes()
    start = time.monotonic()
    with _Watch() as watch, pytest.raises(BrowserTimeoutError) as caught:
        _run(
            tmp_path,
            model,
            _feeds(model, count=1),
            "swiftshader",
            browser_cache,
            page_dir=page,
            timeout=8.0,
        )
    assert time.monotonic() - start < 60
    message = str(caught.value)
    assert "did not report within the job's 8 s" in message and "\n" not in message
    assert caught.value.exit_code == 4
    assert not (tmp_path / "result" / "result.json").exists()
    assert len(watch.seen) >= 3  # the browser, its zygote, GPU and renderer processes were seen
    assert watch.alive() == [], [(p, _cmd(p)) for p in watch.alive()]
    assert left_browsers() == []
    drivers = [pid for pid in processes_tagged("run-driver") if _parent(pid) == os.getpid()]
    assert drivers == []


def _cmd(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return ""


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


_HANGING = """
const session = await (await fetch('session.json')).json();
const post = (body) => fetch('event', {method: 'POST', body: JSON.stringify(body)});
await post({type: 'hello', session: session.session, user_agent: navigator.userAgent});
await post({type: 'ready', session: session.session, gpu: null});
await post({type: 'backend_start', session: session.session, backend: session.backends[0]});
/* ...and the backend never finishes */
"""


def test_hanging_backend_times_out_and_the_rest_still_run(
    litertjs: LiteRtJs, browser_cache: Path, tmp_path: Path
) -> None:
    """A backend past the job's ``timeout_seconds`` is ``timeout``; its browser is killed and a
    fresh one runs the next backend (which hangs too here); the result folder is still written."""
    page = _page(tmp_path / "page", _HANGING)
    model = TINY.read_bytes()
    with _Watch() as watch:
        result = _run(
            tmp_path,
            model,
            _feeds(model, count=1),
            "swiftshader",
            browser_cache,
            backends=("webgpu_fp32", "wasm"),
            timeout_seconds=3.0,
            page_dir=page,
            timeout=120.0,
        )
    _check_folder(result)
    for name in ("webgpu_fp32", "wasm"):
        backend = result.backends[name]
        assert backend.status == "timeout" and "3 s" in backend.error and backend.outputs == []
    assert watch.alive() == [] and left_browsers() == []


# -- provisioning ------------------------------------------------------------------------------


def test_litertjs_is_fetched_once_then_reused(litertjs: LiteRtJs, tmp_path: Path) -> None:
    """A fresh cache is filled by npm (pinned sha512, marker last); later calls never run npm."""
    lines: list[str] = []
    fresh = ensure_litertjs(tmp_path / "cache", progress=lines.append)
    assert fresh.path == tmp_path / "cache" / f"litertjs-{LITERTJS_VERSION}"
    assert any("fetching LiteRT.js with npm" in line for line in lines)
    record = json.loads((fresh.path / MARKER).read_text())
    assert set(record["packages"]) == {"@litertjs/core", "@litertjs/wasm-utils"}
    assert (fresh.core / "wasm" / "litert_wasm_jspi_internal.wasm").stat().st_size > 1 << 20
    assert [p.name for p in (tmp_path / "cache").iterdir() if not p.name.startswith(".")] == [
        fresh.path.name
    ]
    again = ensure_litertjs(tmp_path / "cache", npm="/nonexistent/npm", progress=lines.append)
    assert again.path == fresh.path and again.record == fresh.record


def test_unreachable_registry_is_one_error_line(tmp_path: Path) -> None:
    if shutil.which("npm") is None:
        unavailable("npm is not installed")
    with pytest.raises(ProvisionError) as caught:
        ensure_litertjs(tmp_path, registry="http://127.0.0.1:9/", progress=lambda line: None)
    message = str(caught.value)
    assert "npm could not fetch LiteRT.js" in message and "ECONNREFUSED" in message
    assert "\n" not in message and caught.value.exit_code == 4
    assert find_litertjs(tmp_path) is None
    assert [p for p in tmp_path.iterdir() if p.is_dir()] == []  # nothing half-fetched
    with pytest.raises(ProvisionError, match="npm is not installed"):
        ensure_litertjs(tmp_path, npm="/nonexistent/npm", progress=lambda line: None)


def ours_or_orphaned(pid: int) -> bool:
    """``pid`` descends from this test process, or was left behind (its parent is init): not a
    browser another pytest worker is running right now."""
    parent = _parent(pid)
    if parent == 1:
        return True
    while parent is not None and parent > 1:
        if parent == os.getpid():
            return True
        parent = _parent(parent)
    return False


def left_browsers() -> list[int]:
    """The harness's browsers still running that this test started or left behind."""
    return [pid for pid in processes_tagged(MARKER_SWITCH) if ours_or_orphaned(pid)]


@pytest.fixture(autouse=True)
def _no_browser_left() -> Iterator[None]:
    """After every test: none of the harness's browsers it started is still running."""
    yield
    assert left_browsers() == []
