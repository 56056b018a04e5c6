"""``--device webdriver:URL``, for real: Debian's ChromeDriver (``chromium-driver``) as the W3C
WebDriver server on loopback, driving Debian's Chromium with WebGPU (SwiftShader through
``--enable-unsafe-webgpu``); Appium 2 with its Chromium driver as a second kind of server.

Nothing is mocked: the servers are the real programs, the page is the browser harness's, the
numbers are LiteRT.js's. Without ChromeDriver, Chromium or LiteRT.js the tests fail in CI and skip
elsewhere (``tests/needs.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.cli import default_sigint
from tests.needs import unavailable
from tests.test_browser_harness import ours_or_orphaned
from tests.test_browser_remote import browser_env  # noqa: F401  (a pytest fixture)
from tests.test_device_transports import _free_port, _stop
from tflkit.cli.main import main
from tflkit.delegates.browser.chromium import CHROMIUM, processes_tagged
from tflkit.delegates.browser.job import BrowserOptions, write_browser_job
from tflkit.delegates.device_protocol import read_result
from tflkit.harness.browser.webdriver import new_session_body
from tflkit.harness.browser.webdriver_device import MARKER_SWITCH
from tflkit.proc.child_env import project_root

TINY = project_root() / "tflkit" / "examples" / "tiny_classifier.tflite"
CHROMEDRIVER = "/usr/bin/chromedriver"
PY = sys.executable
CHROME_OPTIONS = {
    "binary": CHROMIUM,
    "args": ["--headless=new", "--no-sandbox", "--enable-unsafe-webgpu"],
}


# -- the servers ----------------------------------------------------------------------------------


class Server:
    """A WebDriver server of our own on a free loopback port, in a process group of its own."""

    def __init__(self, argv: list[str], port: int, env: dict[str, str] | None = None) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
        deadline = time.monotonic() + 60
        while not self.ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                _stop(self.proc)
                raise RuntimeError(f"{argv[0]} did not start on port {port}")
            time.sleep(0.2)

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/status", timeout=2) as answer:
                return bool(json.loads(answer.read())["value"].get("ready"))
        except (OSError, ValueError, KeyError):
            return False

    def session_alive(self, session: str) -> bool:
        """Whether the server still has ``session`` (W3C: an unknown one is an error)."""
        try:
            with urllib.request.urlopen(f"{self.url}/session/{session}/url", timeout=10):
                return True
        except urllib.error.HTTPError:
            return False

    def stop(self) -> None:
        _stop(self.proc)


def chromedriver() -> Server:
    if not os.access(CHROMEDRIVER, os.X_OK):
        unavailable(f"ChromeDriver is not installed at {CHROMEDRIVER} (install-system-packages.sh)")
    port = _free_port()
    return Server([CHROMEDRIVER, f"--port={port}"], port)


@pytest.fixture(scope="module")
def driver(browser_env: Path) -> Iterator[Server]:  # noqa: F811
    server = chromedriver()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def caps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("caps") / "caps.json"
    path.write_text(json.dumps({"browserName": "chrome", "goog:chromeOptions": CHROME_OPTIONS}))
    return path


@pytest.fixture(autouse=True)
def _no_browser_left() -> Iterator[None]:
    yield
    deadline = time.monotonic() + 10
    while _left() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _left() == [], "a WebDriver session's browser was left"


def _left() -> list[int]:
    """This test's WebDriver browsers still running (not another pytest worker's)."""
    return [pid for pid in processes_tagged(MARKER_SWITCH) if ours_or_orphaned(pid)]


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    try:
        return code, json.loads(out), err
    except ValueError:
        return code, out, err


def _job(tmp: Path, *, sets: int = 2, repeats: int = 3) -> Path:
    rng = np.random.default_rng(0)
    feeds = [{"image": rng.random((1, 32, 32, 3), dtype=np.float32)} for _ in range(sets)]
    return write_browser_job(
        tmp / "job",
        TINY.read_bytes(),
        feeds,
        backends=("webgpu_fp32", "webgpu_fp16", "wasm"),
        browser=BrowserOptions(repeats=repeats),
    )


def _runners(report: dict[str, Any], device: str) -> dict[str, dict[str, Any]]:
    return {r["runner"]: r for r in report["runners"] if r["runner"].endswith(f"@{device}")}


# -- the protocol --------------------------------------------------------------------------------


def test_capabilities_are_merged_into_always_match() -> None:
    body = new_session_body({"browserName": "chromium", "goog:chromeOptions": CHROME_OPTIONS})
    always = body["capabilities"]["alwaysMatch"]
    assert always["browserName"] == "chromium"  # the user's win
    assert always["goog:chromeOptions"] == CHROME_OPTIONS
    assert always["timeouts"]["script"] >= 60_000  # the page's chunks get time
    whole = new_session_body(
        {"capabilities": {"alwaysMatch": {"platformName": "android"}, "firstMatch": [{}]}}
    )
    assert whole["capabilities"]["alwaysMatch"]["platformName"] == "android"
    assert whole["capabilities"]["firstMatch"] == [{}]


def test_bad_specs_and_files_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "caps.json"
    bad.write_text("[1, 2]")
    for args, words in (
        (["--device", "webdriver:nowhere"], "http(s) URL"),
        (["--device", "webdriver:http://127.0.0.1:9", "--capabilities", str(bad)], "JSON object"),
        (["--device", "local", "--public-url", "https://x.example"], "webdriver"),
        (
            ["--device", "webdriver:http://127.0.0.1:9", "--via", "carrier-pigeon"],
            "page or session",
        ),
    ):
        code = main(["device", "validate", str(TINY), *args])
        err = capsys.readouterr().err
        assert code == 2, err
        assert words in err and "Traceback" not in err


# -- one server ------------------------------------------------------------------------------------


def test_device_validate_through_chromedriver(
    driver: Server, caps: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The browser job through a WebDriver session: every backend ok, the speed split per
    backend, the phone (here: headless Chromium) named, the HTML's speed table."""
    spec = f"webdriver:{driver.url}"
    html = tmp_path / "report.html"
    code, report, err = _cli(
        capsys, "device", "validate", str(TINY), "--device", spec, "--capabilities", str(caps),
        "--html", str(html), "--json",
    )  # fmt: skip
    assert code == 0, err
    runners = _runners(report, spec)
    assert set(runners) == {f"{b}@{spec}" for b in ("webgpu-fp32", "webgpu-fp16", "wasm")}
    sets = report["inputs"]["count"]
    for name, runner in runners.items():
        assert runner["status"] == "ok", (name, runner["error"])
        speed = runner["speed"]
        assert speed["runs"] >= 3 * sets - 1, speed  # each input set 3+ times, the first apart
        assert 0 < speed["p50_s"] <= speed["p90_s"], speed
        assert speed["compile_s"] > 0 and speed["first_s"] > 0
        assert runner["inference_seconds"]["count"] == sets  # the old field stays
    gpu = runners[f"webgpu-fp32@{spec}"]
    assert gpu["executed"]["adapter"]["software"] is True  # SwiftShader, labelled
    rows = {r["runner"]: r for r in report["speed"]["rows"]}
    assert rows[f"webgpu-fp32@{spec}"]["gpu_speedup"] > 0  # over the same browser's wasm
    assert rows[f"webgpu-fp32@{spec}"]["software_gpu"] is True
    (device,) = report["speed"]["devices"]
    assert device["device"] == spec and "HeadlessChrome" in device["user_agent"]
    assert (device["gpu_vendor"], device["gpu_architecture"]) == ("google", "swiftshader")
    assert report["speed"]["fleet"] is None  # one device
    page = html.read_text()
    assert 'id="speed"' in page and 'data-metric="p50_s"' in page and "HeadlessChrome" in page
    assert "WebDriver session" in err  # the session was opened and (see the fixture) ended


@pytest.mark.parametrize("name", ["mask_portrait_saturated", "mask_landscape_saturated"])
def test_healthy_saturated_masks_pass_through_a_webdriver_session(
    driver: Server, caps: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """The held-out false alarm's family (a person mask behind a sigmoid whose background sits
    near 0; portrait and landscape) on a device reached over WebDriver: WebGPU fp32 and fp16 and
    wasm pass, each judged on values, none on log-probabilities (natively:
    ``tests/test_mask_log_domain.py``)."""
    from tests.truth_models import truth_models

    spec = f"webdriver:{driver.url}"
    code, report, err = _cli(
        capsys, "device", "validate", str(truth_models() / f"{name}.tflite"), "--device", spec,
        "--capabilities", str(caps), "--num-inputs", "2", "--json",
    )  # fmt: skip
    assert code == 0 and report["verdict"] == "pass", (err, report["findings"])
    comparisons = report["comparisons"]
    assert {c["pair"].split("@")[0] for c in comparisons} == {"webgpu-fp32", "webgpu-fp16", "wasm"}
    for comparison in comparisons:
        assert comparison["verdict"] == "pass", comparison
        assert [out["log_diff"] for out in comparison["outputs"]] == [None], comparison


def test_session_only_gives_the_same_outputs(
    driver: Server, caps: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The page, LiteRT.js, the model and the inputs pushed through the WebDriver session, the
    outputs pulled back in chunks: the same result folder as the page served from here."""
    job = _job(tmp_path)
    spec = f"webdriver:{driver.url}"
    outs = {}
    for via in ("page", "session"):
        out = tmp_path / via
        code = main(["device", "run", str(job), "-d", spec, "--capabilities", str(caps),
                     "--via", via, "-o", str(out)])  # fmt: skip
        err = capsys.readouterr().err
        assert code == 0, err
        outs[via] = read_result(out)
        webdriver = outs[via].document["device"]["webdriver"]
        assert webdriver["mode"] == via
        # the session-only page never asked this machine's job server for anything
        assert (webdriver["page_requests"] == 0) == (via == "session"), webdriver
    assert "pushed the page, LiteRT.js and the job through the session" in err
    page, session = outs["page"], outs["session"]
    for backend in ("webgpu_fp32", "webgpu_fp16", "wasm"):
        a, b = page.backends[backend], session.backends[backend]
        assert a.status == b.status == "ok", (a.error, b.error)
        assert len(a.outputs) == len(b.outputs) == 2
        for x, y in zip(a.outputs, b.outputs, strict=True):
            assert x.keys() == y.keys()
            for name in x:
                np.testing.assert_array_equal(x[name], y[name])
        assert b.record["repeats"]["stable"] is True
        assert len(b.record["run_seconds"]) == 2 and all(
            len(t) == 3 for t in b.record["run_seconds"]
        )


def test_public_url_on_a_lan_address(
    driver: Server, caps: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The job served on this machine's LAN address (``--host 0.0.0.0``) and opened by its
    ``--public-url``: plain http there is no secure context, so tflkit tells ChromeDriver's
    Chromium to treat that origin as secure, and WebGPU runs."""
    from tflkit.harness.browser.remote import _lan_address

    address = _lan_address()
    if address.startswith("127.") or not address[0].isdigit():
        unavailable(f"this machine has no LAN address to serve on (got {address})")
    port = _free_port()
    public = f"http://{address}:{port}"
    out = tmp_path / "out"
    code = main(["device", "run", str(_job(tmp_path)), "-d", f"webdriver:{driver.url}",
                 "--capabilities", str(caps), "--host", "0.0.0.0", "--public-url", public,
                 "-o", str(out)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0, err
    assert f"opens the job page ({public})" in err and "reachable from the network" in err
    result = read_result(out)
    assert result.document["device"]["webdriver"]["page_requests"] > 0
    for backend in ("webgpu_fp32", "webgpu_fp16", "wasm"):
        assert result.backends[backend].status == "ok", result.backends[backend].error


@pytest.mark.gpu
def test_the_browsers_own_adapter_in_compatibility_mode(
    gpu: str, driver: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A browser whose core adapter is a software fallback but whose compatibility-mode one is
    a GPU (here: Chromium with ANGLE over Mesa's lavapipe; on phones: GPUs without core WebGPU)
    runs the WebGPU backends on the compatibility-mode adapter, with its limits, and right."""
    from tflkit.delegates.browser.chromium import ADAPTERS

    caps = tmp_path / "lavapipe.json"
    args = ["--headless=new", "--no-sandbox", *ADAPTERS["lavapipe"].flags]
    options = {**CHROME_OPTIONS, "args": args}
    caps.write_text(json.dumps({"browserName": "chrome", "goog:chromeOptions": options}))
    out = tmp_path / "out"
    code = main(["device", "run", str(_job(tmp_path, sets=1)), "-d", f"webdriver:{driver.url}",
                 "--capabilities", str(caps), "-o", str(out)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    result = read_result(out)
    record = result.backends["webgpu_fp32"].record
    assert record["status"] == "ok", record["error"]
    assert "llvmpipe" in record["gpu"]["name"] and record["gpu"]["feature_level"] == "compatibility"
    assert record["gpu"]["software"] is True  # lavapipe is still the CPU
    gpu_out, wasm_out = result.backends["webgpu_fp32"].outputs, result.backends["wasm"].outputs
    for name, value in wasm_out[0].items():
        np.testing.assert_allclose(gpu_out[0][name], value, atol=1e-4)


# -- several servers -------------------------------------------------------------------------------


def test_two_servers_one_report(
    driver: Server,
    caps: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Two WebDriver servers at once (one named in devices.toml with its capabilities as a
    table): one report, each device against the host and against the other, a fleet table."""
    second = chromedriver()
    try:
        config = tmp_path / "config"
        (config / "tflkit").mkdir(parents=True)
        (config / "tflkit" / "devices.toml").write_text(
            f'[phone2]\ndevice = "webdriver:{second.url}"\n\n[phone2.capabilities]\n'
            f'browserName = "chrome"\n\n[phone2.capabilities."goog:chromeOptions"]\n'
            f"binary = {json.dumps(CHROMIUM)}\nargs = {json.dumps(CHROME_OPTIONS['args'])}\n"
        )
        monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
        first = f"webdriver:{driver.url}"
        start = time.monotonic()
        code, report, err = _cli(
            capsys, "device", "validate", str(TINY), "-d", first, "-d", "phone2",
            "--capabilities", str(caps), "--num-inputs", "2", "--json",
        )  # fmt: skip
        wall = time.monotonic() - start
    finally:
        second.stop()
    assert code == 0, err
    for device in (first, "phone2"):
        runners = _runners(report, device)
        assert len(runners) == 3 and all(r["status"] == "ok" for r in runners.values())
    pairs = {p["pair"]: p for p in report["comparisons"]}
    cross = f"webgpu-fp32@phone2:webgpu-fp32@{first}"
    assert pairs[cross]["verdict"] == "pass"
    assert pairs["wasm@phone2:cpu"]["verdict"] == "pass"
    fleet = report["speed"]["fleet"]
    assert [line["device"] for line in fleet["rows"]] == ["host", first, "phone2"]
    assert {d["device"] for d in report["speed"]["devices"]} == {first, "phone2"}
    # at once, not one after the other: each device alone takes most of this
    assert wall < 120, wall


def test_a_failing_device_does_not_stop_the_others(
    driver: Server, caps: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server that does not answer next to one that does; both URLs carry a farm-style
    ``user:key@`` (sent as basic auth, which ChromeDriver ignores), never shown."""
    port = _free_port()
    code, report, err = _cli(
        capsys, "device", "validate", str(TINY),
        "-d", f"webdriver:http://farmer:s3cret@127.0.0.1:{driver.port}",
        "-d", f"webdriver:http://farmer:s3cret@127.0.0.1:{port}",
        "--capabilities", str(caps), "--num-inputs", "2", "--json",
    )  # fmt: skip
    good, bad = (
        f"webdriver:http://farmer@127.0.0.1:{driver.port}",
        f"webdriver:http://farmer@127.0.0.1:{port}",
    )
    assert "s3cret" not in json.dumps(report) and "s3cret" not in err
    assert code == 1, err  # a runner failed: the verdict says so, the report is whole
    assert all(r["status"] == "ok" for r in _runners(report, good).values())
    failed = _runners(report, bad)
    assert len(failed) == 3
    for runner in failed.values():
        assert runner["status"] == "unavailable"
        assert "does not answer" in runner["error"] and "\n" not in runner["error"]
    assert report["verdict"] == "fail"


def test_device_run_keeps_the_devices_that_ran(
    driver: Server, caps: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good, bad = f"webdriver:{driver.url}", f"webdriver:http://127.0.0.1:{_free_port()}"
    out = tmp_path / "out"
    code, runs, err = _cli(
        capsys, "device", "run", str(_job(tmp_path)), "-d", good, "-d", bad,
        "--capabilities", str(caps), "-o", str(out), "--json",
    )  # fmt: skip
    assert code == 4, err
    ran, failed = runs["results"]
    assert ran["device"] == good and read_result(Path(ran["path"])).backends["wasm"].status == "ok"
    assert failed["device"] == bad and "does not answer" in failed["error"]
    assert [line for line in err.splitlines() if "tflkit: error:" in line] == [
        f"tflkit: error: {failed['error']}"
    ]


# -- the server killed, the user interrupting ------------------------------------------------------


def _long_run(job: Path, out: Path, url: str, caps: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [PY, "-m", "tflkit", "device", "run", str(job), "-d", f"webdriver:{url}",
         "--capabilities", str(caps), "-o", str(out)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp")),
        preexec_fn=default_sigint,
    )  # fmt: skip


def _wait_for(proc: subprocess.Popen, words: str, timeout: float = 120) -> list[str]:
    """stderr lines up to the first with ``words`` (the child keeps running)."""
    assert proc.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if words in line:
            return lines
    raise AssertionError(f"never saw {words!r}: {lines}")


def _finish(proc: subprocess.Popen, timeout: float) -> tuple[int, str, float]:
    start = time.monotonic()
    try:
        _, rest = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, rest, time.monotonic() - start


def test_server_killed_mid_job(browser_env: Path, caps: Path, tmp_path: Path) -> None:  # noqa: F811
    """ChromeDriver dies while the page runs: exit 4 with one line within a minute, no browser
    left (its processes carry the session's marker), nothing written."""
    server = chromedriver()
    job = _job(tmp_path, sets=4, repeats=400)  # long enough to be killed in the middle
    out = tmp_path / "out"
    proc = _long_run(job, out, server.url, caps)
    try:
        _wait_for(proc, "the browser opens the job page")
        time.sleep(3)  # the page is running
        assert processes_tagged(MARKER_SWITCH), "the session's browser carries no marker"
        os.kill(server.proc.pid, signal.SIGKILL)  # the server only: its browser stays behind
        code, rest, took = _finish(proc, 90)
    finally:
        server.stop()
    errors = [ln for ln in rest.splitlines() if ln.startswith("tflkit: error:")]
    assert code == 4, rest
    assert took < 60, took
    assert len(errors) == 1 and "does not answer" in errors[0], rest
    assert "Traceback" not in rest
    assert not out.exists() and list(tmp_path.glob(".out-partial-*")) == []


def test_ctrl_c_ends_the_session(driver: Server, caps: Path, tmp_path: Path) -> None:
    job = _job(tmp_path, sets=4, repeats=400)
    out = tmp_path / "out"
    proc = _long_run(job, out, driver.url, caps)
    lines = _wait_for(proc, "the browser opens the job page")
    time.sleep(3)  # the page is running
    session = next(ln for ln in lines if "WebDriver session " in ln).split("WebDriver session ")[1]
    session = session.split()[0]
    assert driver.session_alive(session)
    proc.send_signal(signal.SIGINT)
    code, rest, _ = _finish(proc, 60)
    assert code == 130, rest
    assert not driver.session_alive(session)  # DELETE /session was sent
    assert not out.exists() and list(tmp_path.glob(".out-partial-*")) == []


# -- Appium 2 -------------------------------------------------------------------------------------


APPIUM = ("appium@2", "appium-chromium-driver@1")


@pytest.fixture(scope="module")
def appium(browser_env: Path) -> Iterator[Server]:  # noqa: F811
    """Appium 2 with its Chromium driver (installed into the test cache with npm, once),
    pointed at Debian's ChromeDriver."""
    from .conftest_corpus import cache_root

    if not os.access(CHROMEDRIVER, os.X_OK):
        unavailable(f"ChromeDriver is not installed at {CHROMEDRIVER}")
    home = cache_root() / "appium"
    binary = home / "node_modules" / ".bin" / "appium"
    env = dict(os.environ, APPIUM_HOME=str(home / "home"))
    if not (home / "home" / "node_modules" / "appium-chromium-driver").is_dir():
        if shutil.which("npm") is None:
            unavailable("npm is not installed, so Appium cannot be fetched")
        home.mkdir(parents=True, exist_ok=True)
        steps = [
            ["npm", "install", "--prefix", str(home), "--no-audit", "--no-fund", APPIUM[0]],
            [str(binary), "driver", "install", "--source=npm", APPIUM[1]],
        ]
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, timeout=600, env=env)
            if done.returncode != 0:
                unavailable(f"{' '.join(step[:3])} failed: {done.stderr.strip()[-300:]}")
    port = _free_port()
    server = Server([str(binary), "--port", str(port), "--log-level", "warn"], port, env)
    try:
        yield server
    finally:
        server.stop()


def test_device_validate_through_appium(
    appium: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Appium's Chromium driver in front of ChromeDriver: the same job, the same report.
    ChromeDriver matches ``platformName`` case-sensitively: "linux", not "Linux" (which it
    refuses with "No matching capabilities found")."""
    caps = tmp_path / "appium.json"
    caps.write_text(
        json.dumps(
            {
                "platformName": "linux",
                "appium:automationName": "Chromium",
                "appium:executable": CHROMEDRIVER,
                "appium:autodownloadEnabled": False,
                "goog:chromeOptions": CHROME_OPTIONS,
            }
        )
    )
    spec = f"webdriver:{appium.url}"
    code, report, err = _cli(
        capsys, "device", "validate", str(TINY), "-d", spec, "--capabilities", str(caps),
        "--num-inputs", "2", "--json",
    )  # fmt: skip
    assert code == 0, err
    runners = _runners(report, spec)
    assert len(runners) == 3 and all(r["status"] == "ok" for r in runners.values()), runners
    assert runners[f"wasm@{spec}"]["speed"]["runs"] >= 5
