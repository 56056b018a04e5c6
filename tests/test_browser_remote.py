"""The browser harness in a browser tflkit does not launch here, for real: ``--device adb:SERIAL
--via browser`` and ``--device url``.

The adb "device" is this machine behind Debian's adbd on loopback (no ``getprop``: a Linux
device), so ``--via browser`` starts its Chromium through ``adb shell`` and the page reaches the
job's server through a real ``adb reverse``. ``--device url`` is opened by a Chromium this test
drives with Playwright. Nothing is mocked. Without adb/adbd, Chromium, Playwright or LiteRT.js the
tests fail in CI and skip elsewhere (``tests/needs.py``).
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.needs import unavailable
from tests.test_device_transports import Adbd, _free_port, _stop, adbd_on_loopback
from tflkit.cli.main import main
from tflkit.delegates.browser.chromium import CHROMIUM, Chromium, processes_tagged
from tflkit.delegates.browser.job import BrowserOptions, write_browser_job
from tflkit.delegates.device_protocol import read_result
from tflkit.harness.adb import AdbDevice
from tflkit.harness.browser.remote import REMOTE_MARKER, AdbBrowserDevice, adb_device, print_qr
from tflkit.harness.transport import DeviceError
from tflkit.proc.child_env import project_root

TINY = project_root() / "tflkit" / "examples" / "tiny_classifier.tflite"
PY = sys.executable
REVERSE = re.compile(r"adb reverse tcp:(\d+) tcp:(\d+)")


# -- what the tests need ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser_env() -> Iterator[Path]:
    """Chromium, Playwright and LiteRT.js (in the test cache, fetched with npm once); the CLI
    finds LiteRT.js there through ``TFLKIT_BROWSER_DIR``."""
    from tflkit.delegates.browser.errors import ProvisionError
    from tflkit.delegates.browser.provision import ensure_litertjs, find_litertjs

    from .conftest_corpus import cache_root

    if not os.access(CHROMIUM, os.X_OK):
        unavailable(f"Chromium is not installed at {CHROMIUM} (install-system-packages.sh)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        unavailable("Playwright is not installed (the test extra pins it)")
    cache = cache_root() / "browser"
    if find_litertjs(cache) is None and shutil.which("npm") is None:
        unavailable("npm is not installed, so LiteRT.js cannot be fetched")
    try:
        ensure_litertjs(cache, progress=lambda line: None)
    except ProvisionError as exc:
        unavailable(f"LiteRT.js could not be fetched: {exc}")
    old = os.environ.get("TFLKIT_BROWSER_DIR")
    os.environ["TFLKIT_BROWSER_DIR"] = str(cache)
    try:
        yield cache
    finally:
        if old is None:
            os.environ.pop("TFLKIT_BROWSER_DIR", None)
        else:
            os.environ["TFLKIT_BROWSER_DIR"] = old


@pytest.fixture(scope="module")
def adbd(tmp_path_factory: pytest.TempPathFactory, browser_env: Path) -> Iterator[Adbd]:
    """adbd on loopback with an adb server of our own (the browser cache set first)."""
    with adbd_on_loopback(tmp_path_factory.mktemp("adbd")) as daemon:
        yield daemon


def _reverses(serial: str) -> str:
    done = subprocess.run(
        ["adb", "-s", serial, "reverse", "--list"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _adb_shells(serial: str) -> list[int]:
    """Host processes running ``adb -s SERIAL shell ...`` (the adb server excluded)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[:4] == [b"adb", b"-s", serial.encode(), b"shell"]:
            found.append(int(entry))
    return found


def _assert_nothing_left(serial: str, parent: Path) -> None:
    """No browser process, no remote folder, no adb shell, no server thread, no reverse forward,
    nothing half-written next to the result."""
    deadline = time.monotonic() + 5  # a killed process may take a moment to leave /proc
    while processes_tagged(REMOTE_MARKER) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_tagged(REMOTE_MARKER) == []
    assert not list(Path("/tmp").glob("tflkit-remote-browser-*"))
    assert _adb_shells(serial) == []
    assert not [t for t in threading.enumerate() if t.name == "tflkit-browser-server"]
    assert _reverses(serial) == ""
    assert not parent.exists() or list(parent.iterdir()) == []


def _feeds(count: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [{"image": rng.random((1, 32, 32, 3), dtype=np.float32)} for _ in range(count)]


def _job(tmp: Path, *, sets: int = 2, repeats: int = 3) -> Path:
    return write_browser_job(
        tmp / "job",
        TINY.read_bytes(),
        _feeds(sets),
        backends=("webgpu_fp32", "wasm"),
        browser=BrowserOptions(repeats=repeats),
    )


def _cpu(feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_content=TINY.read_bytes())
    runner = interpreter.get_signature_runner(next(iter(interpreter.get_signature_list())))
    return {k: np.array(v) for k, v in runner(**feed).items()}


def _run(job: Path, out: Path) -> list[str]:
    """`tflkit device run JOB -o OUT` in a child process (options follow)."""
    return [PY, "-m", "tflkit", "device", "run", str(job), "-o", str(out)]


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("tflkit: error:")]


# -- adb:SERIAL --via browser ---------------------------------------------------------------------


def test_validate_via_browser_over_adb(
    adbd: Adbd, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`device validate --via browser`: served here, reversed, run by the device's Chromium,
    compared like any device; the forward is gone afterwards."""
    keep = tmp_path / "keep"
    code = main(
        [
            *("device", "validate", str(TINY), "--device", f"adb:{adbd.serial}"),
            *("--via", "browser", "--num-inputs", "2", "--keep", str(keep), "--json"),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    forward = REVERSE.search(err)
    assert forward is not None, err
    device_port, host_port = (int(p) for p in forward.groups())
    # the device's browser was given the device-side port: only the reverse led to the server
    assert device_port != host_port
    report = json.loads(out)
    runners = {r["runner"]: r["status"] for r in report["runners"]}
    spec = f"adb:{adbd.serial}"
    assert runners == {
        "cpu": "ok",
        f"webgpu-fp32@{spec}": "ok",
        f"webgpu-fp16@{spec}": "ok",
        f"wasm@{spec}": "ok",
    }
    compared = {(c["actual"], c["expected"]): c["verdict"] for c in report["comparisons"]}
    assert compared[(f"wasm@{spec}", "cpu")] == "pass"
    assert compared[(f"webgpu-fp32@{spec}", "cpu")] == "pass"
    result = read_result(keep / f"adb_{adbd.serial.replace(':', '_')}")
    assert result.harness["kind"] == "browser"
    assert result.device["cross_origin_isolated"] is True
    assert "HeadlessChrome" in result.device["user_agent"]
    _assert_nothing_left(adbd.serial, tmp_path / "nothing")


def test_run_via_browser_writes_the_protocol_result(adbd: Adbd, tmp_path: Path) -> None:
    """`device run --via browser`: the protocol's result folder, outputs equal to LiteRT's CPU;
    without --via a Linux device behind adbd keeps the Linux harness."""
    assert isinstance(adb_device(adbd.serial), AdbDevice)
    assert isinstance(adb_device(adbd.serial, via="browser"), AdbBrowserDevice)
    job = _job(tmp_path)
    out = tmp_path / "out" / "result"
    done = subprocess.run(
        [*_run(job, out), "--device", f"adb:{adbd.serial}", "--via", "browser", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = read_result(out)
    feeds = _feeds(2)
    for backend in ("webgpu_fp32", "wasm"):
        record = result.backends[backend]
        assert record.status == "ok", record.error
        for s, feed in enumerate(feeds):
            want = _cpu(feed)
            got = record.outputs[s]
            np.testing.assert_allclose(got["log_probs"], want["log_probs"], atol=1e-5)
            np.testing.assert_array_equal(got["label"], want["label"])
    assert sorted(p.name for p in out.parent.iterdir()) == ["result"]
    _assert_nothing_left(adbd.serial, tmp_path / "nothing")


def test_backend_timeout_runs_the_rest_in_a_fresh_browser(adbd: Adbd, tmp_path: Path) -> None:
    """A backend past the job's timeout_seconds is `timeout`; the rest run in a second session
    (a new reverse forward and a new device Chromium); every forward is removed."""
    job = write_browser_job(
        tmp_path / "job",
        TINY.read_bytes(),
        _feeds(30),
        backends=("webgpu_fp32", "wasm"),
        browser=BrowserOptions(repeats=30),  # 900 runs: far more than a second on any machine
        timeout_seconds=1.0,
    )
    lines: list[str] = []
    result = AdbBrowserDevice(AdbDevice(adbd.serial)).run_job(
        job, tmp_path / "out" / "result", timeout=120.0, progress=lines.append
    )
    assert result.backends["webgpu_fp32"].status == "timeout"
    assert result.backends["wasm"].status in ("ok", "timeout")
    forwards = [REVERSE.search(line) for line in lines]
    assert len([f for f in forwards if f]) == 2, lines
    assert sum("started the device's Chromium" in line for line in lines) == 2
    _assert_nothing_left(adbd.serial, tmp_path / "nothing")


class _WrongUrl(AdbBrowserDevice):
    """The device's browser is sent to the job's server with a wrong token: a 404 page."""

    def device_url(self, server_url: str, device_port: int) -> str:
        return re.sub(r"/[^/]+/$", "/not-the-token/", super().device_url(server_url, device_port))


def test_page_that_never_reports(adbd: Adbd, tmp_path: Path) -> None:
    device = _WrongUrl(AdbDevice(adbd.serial))
    dest = tmp_path / "out" / "result"
    started = time.monotonic()
    with pytest.raises(DeviceError) as caught:
        device.run_job(_job(tmp_path), dest, timeout=12.0)
    assert time.monotonic() - started < 60
    message = str(caught.value)
    assert caught.value.exit_code == 4
    assert "\n" not in message
    assert message.startswith(f"adb:{adbd.serial}: ") and "did not report within" in message
    assert not dest.exists()
    _assert_nothing_left(adbd.serial, dest.parent)


def _start_run(adbd: Adbd, tmp_path: Path) -> tuple[subprocess.Popen, Path, list[str]]:
    """`device run --via browser` in the background, returned once the device's Chromium runs."""
    job = _job(tmp_path, sets=30, repeats=30)  # runs far longer than the test takes to act
    out = tmp_path / "out" / "result"
    proc = subprocess.Popen(
        [*_run(job, out), "--timeout", "120", "--device", f"adb:{adbd.serial}", "--via", "browser"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stderr is not None
    seen: list[str] = []
    for line in proc.stderr:
        seen.append(line)
        if "started the device's Chromium" in line:
            return proc, out, seen
    _stop(proc)
    pytest.fail("the device's Chromium never started: " + "".join(seen))


def _finish(proc: subprocess.Popen, seen: list[str]) -> str:
    try:
        _, rest = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            _stop(proc)
    return "".join(seen) + rest


def test_device_browser_killed_mid_job(adbd: Adbd, tmp_path: Path) -> None:
    proc, out, seen = _start_run(adbd, tmp_path)
    try:
        main_pids = []
        deadline = time.monotonic() + 30
        while not main_pids and time.monotonic() < deadline:
            main_pids = [
                pid
                for pid in processes_tagged(REMOTE_MARKER)
                if b"--type=" not in Path(f"/proc/{pid}/cmdline").read_bytes()
                and b"chromium" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
            ]
            time.sleep(0.1)
        assert main_pids, "the device's Chromium is not running"
        kill = ["adb", "-s", adbd.serial, "shell", f"kill -9 {main_pids[0]}"]
        subprocess.run(kill, check=True, capture_output=True, timeout=30)
    finally:
        stderr = _finish(proc, seen)
    assert proc.returncode == 4, stderr
    lines = _errors(stderr)
    assert len(lines) == 1 and "the device's browser exited during the job" in lines[0], stderr
    assert "Traceback" not in stderr
    assert not out.exists()
    _assert_nothing_left(adbd.serial, out.parent)


@pytest.mark.parametrize("how", ["removed", "retargeted"])
def test_port_forward_closed_mid_job(adbd: Adbd, tmp_path: Path, how: str) -> None:
    """The reverse forward disappears, or points at a port nothing listens on."""
    proc, out, seen = _start_run(adbd, tmp_path)
    try:
        forward = REVERSE.search("".join(seen))
        assert forward is not None
        device_port = forward[1]
        adb = ["adb", "-s", adbd.serial, "reverse"]
        if how == "removed":
            subprocess.run([*adb, "--remove-all"], check=True, capture_output=True, timeout=30)
        else:
            closed = f"tcp:{_free_port()}"
            cmd = [*adb, f"tcp:{device_port}", closed]
            subprocess.run(cmd, check=True, capture_output=True, timeout=30)
    finally:
        stderr = _finish(proc, seen)
    assert proc.returncode == 4, stderr
    lines = _errors(stderr)
    assert len(lines) == 1 and "the port forward the page needs is gone" in lines[0], stderr
    assert ("absent" if how == "removed" else "points at tcp:") in lines[0]
    assert "Traceback" not in stderr
    assert not out.exists()
    _assert_nothing_left(adbd.serial, out.parent)


# -- --device url ---------------------------------------------------------------------------------


def test_url_opened_by_a_browser(browser_env: Path, tmp_path: Path) -> None:
    """`--device url`: the URL is printed, a browser (Playwright's Chromium here) opens it, the
    result folder is the protocol's; stdout (a pipe) gets no QR code."""
    job = _job(tmp_path)
    out = tmp_path / "out" / "result"
    proc = subprocess.Popen(
        [*_run(job, out), "--device", "url", "--timeout", "120"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stderr is not None
    seen: list[str] = []
    url = None
    for line in proc.stderr:
        seen.append(line)
        match = re.search(r"url: open (http://\S+) in a browser", line)
        if match:
            url = match[1]
            break
    try:
        assert url is not None and url.startswith("http://127.0.0.1:"), "".join(seen)
        with Chromium("swiftshader") as browser:
            browser.open(url)
            deadline = time.monotonic() + 120
            while proc.poll() is None and time.monotonic() < deadline:
                browser.wait(0.2)
        stdout, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            _stop(proc)
    stderr = "".join(seen) + rest
    assert proc.returncode == 0, stderr
    assert "\u2588" not in stdout and "\u2580" not in stdout
    result = read_result(out)
    assert [result.backends[b].status for b in ("webgpu_fp32", "wasm")] == ["ok", "ok"]
    assert result.device["webgpu_adapter_mode"] == "browser"
    np.testing.assert_allclose(
        result.backends["wasm"].outputs[0]["log_probs"], _cpu(_feeds(1)[0])["log_probs"], atol=1e-5
    )


def test_url_nobody_opens_on_the_network(browser_env: Path, tmp_path: Path) -> None:
    """`--device url --host 0.0.0.0`: one warning that the model is reachable, then one error
    line when nobody opens the URL within the job's time; nothing written."""
    out = tmp_path / "out" / "result"
    done = subprocess.run(
        [*_run(_job(tmp_path), out), "--device", "url", "--host", "0.0.0.0", "--timeout", "4"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 4, done.stderr
    warnings = [ln for ln in done.stderr.splitlines() if "reachable from the network" in ln]
    assert len(warnings) == 1
    shown = re.search(r"url: open (http://\S+) in a browser", done.stderr)
    assert shown is not None and not shown[1].startswith("http://127.0.0.1:"), done.stderr
    lines = _errors(done.stderr)
    assert len(lines) == 1 and lines[0].startswith("tflkit: error: url: "), done.stderr
    assert "did not report within the job's 4 s" in lines[0]
    assert not out.exists() and list(out.parent.iterdir()) == []
    assert "Traceback" not in done.stderr


def test_url_qr_code_on_a_terminal(browser_env: Path, tmp_path: Path) -> None:
    """stdout a terminal (a pty here): the URL and its QR code in half blocks go there too."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*_run(_job(tmp_path), tmp_path / "out"), "--device", "url", "--timeout", "3"],
        stdout=slave,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(slave)
    shown = b""
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(master)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 4, stderr
    url = re.search(r"url: open (http://\S+) in a browser", stderr)
    assert url is not None
    text = shown.decode()
    assert url[1] in text
    blocks = [line for line in text.splitlines() if set(line.strip()) <= set("\u2580\u2584\u2588 ")]
    assert len([line for line in blocks if "\u2588" in line]) >= 10, text


def test_qr_code_in_half_blocks() -> None:
    """The terminal QR code holds exactly segno's modules (light ones drawn, two rows a line)."""
    segno = pytest.importorskip("segno")
    url = "http://127.0.0.1:41234/abcdefghijklmnopqrstuvwxyz012345/"
    text = io.StringIO()
    print_qr(url, text)
    lines = text.getvalue().splitlines()
    light = {" ": (False, False), "\u2580": (True, False), "\u2584": (False, True)}
    light["\u2588"] = (True, True)
    rows: list[list[bool]] = [[], []]
    decoded: list[list[bool]] = []
    for line in lines:
        rows = [[], []]
        for char in line:
            top, bottom = light[char]
            rows[0].append(not top)  # a light module is drawn: dark is blank
            rows[1].append(not bottom)
        decoded += rows
    want = [[bool(v) for v in row] for row in segno.make(url, error="l").matrix_iter(border=4)]
    assert decoded[: len(want)] == want
    assert all(not any(row) for row in decoded[len(want) :])  # the padding row, if any


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--device", "local", "--via", "browser"], "--via is for --device adb:SERIAL"),
        (["--device", "local", "--host", "0.0.0.0"], "--host is for --device url"),
        (["--device", "adb:SERIAL", "--via", "phone"], "--via takes browser or app"),
    ],
)
def test_options_out_of_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    """--via and --host are refused where they mean nothing: one line, exit 2, nothing run."""
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "job.json").write_text("{}")
    code = main(["device", "run", str(tmp_path / "job"), "-o", str(tmp_path / "out"), *args])
    err = capsys.readouterr().err
    assert code == 2
    lines = _errors(err)
    assert len(lines) == 1 and lines[0].startswith(f"tflkit: error: {says}"), err
    assert not (tmp_path / "out").exists()
