"""``tflkit device`` against real peers on loopback: Debian's adbd and a throw-away sshd.

The "device" is this machine running the Linux harness with this venv's Python and the software
GPU. Each daemon is started on a free port for this module and stopped afterwards; the adb client
uses its own server port so a user's adb server is never touched. Without adb/adbd/sshd (or as a
non-root user for sshd) the tests fail in CI and skip elsewhere.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.cli import default_sigint
from tests.needs import unavailable
from tflkit.cli.main import main
from tflkit.delegates.device_protocol import JobOptions, write_job
from tflkit.proc.child_env import project_root

EXAMPLE = project_root() / "tflkit" / "examples" / "tiny_classifier.tflite"
PY = sys.executable


def _need(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None and not Path(t).exists()]
    if missing:
        unavailable(
            f"{', '.join(missing)} not installed (install-system-packages.sh installs them)"
        )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {port}")


def _stop(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


class Adbd:
    """A running adbd on a free loopback port (restartable: the kill test stops it)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = _free_port()
        self.serial = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        env = dict(os.environ, ADBD_PORT=str(self.port))
        self.proc = subprocess.Popen(
            ["adbd"],
            cwd=self.workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        _wait_port(self.port, self.proc, "adbd")
        subprocess.run(["adb", "disconnect", self.serial], capture_output=True, timeout=30)
        subprocess.run(["adb", "connect", self.serial], capture_output=True, timeout=30)

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None


@contextlib.contextmanager
def adbd_on_loopback(folder: Path) -> Iterator[Adbd]:
    """adbd on a free loopback port and an adb server of our own (ANDROID_ADB_SERVER_PORT), so
    a user's adb server and its forwards are never touched; both stopped at the end."""
    _need("adb", "adbd")
    old = os.environ.get("ANDROID_ADB_SERVER_PORT")
    os.environ["ANDROID_ADB_SERVER_PORT"] = str(_free_port())
    daemon = Adbd(folder)
    try:
        daemon.start()
        yield daemon
    finally:
        daemon.stop()
        subprocess.run(["adb", "kill-server"], capture_output=True, timeout=30)
        if old is None:
            os.environ.pop("ANDROID_ADB_SERVER_PORT", None)
        else:
            os.environ["ANDROID_ADB_SERVER_PORT"] = old


@pytest.fixture(scope="module")
def adb_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Adbd]:
    with adbd_on_loopback(tmp_path_factory.mktemp("adbd")) as daemon:
        yield daemon


@contextlib.contextmanager
def _ssh_peer(d: Path) -> Iterator[tuple[dict[str, str], subprocess.Popen]]:
    """sshd on a free port with throw-away keys in ``d``: (device spec, identity, config), proc."""
    _need("/usr/sbin/sshd", "ssh", "ssh-keygen")
    if os.geteuid() != 0:
        unavailable("a throw-away sshd needs root (CI runs as root)")
    d.mkdir(parents=True, exist_ok=True)
    for key in ("host", "user"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / key)], check=True
        )
    shutil.copy(d / "user.pub", d / "authorized_keys")
    port = _free_port()
    Path("/run/sshd").mkdir(exist_ok=True)
    proc = subprocess.Popen(
        ["/usr/sbin/sshd", "-D", "-e", "-f", "/dev/null", "-h", str(d / "host"), "-p", str(port)]
        + [
            f"-o{o}"
            for o in (
                "ListenAddress=127.0.0.1",
                f"AuthorizedKeysFile={d / 'authorized_keys'}",
                "StrictModes=no",
                "PermitRootLogin=prohibit-password",
                "UsePAM=no",
                f"PidFile={d / 'sshd.pid'}",
            )
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=open(d / "sshd.log", "wb"),  # noqa: SIM115
        start_new_session=True,
    )
    try:
        _wait_port(port, proc, "sshd")
        host_key = (d / "host.pub").read_text().split()
        (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
        (d / "config").write_text(
            "Host 127.0.0.1\n  StrictHostKeyChecking yes\n"
            f"  UserKnownHostsFile {d / 'known_hosts'}\n"
        )
        peer = {
            "spec": f"ssh:{getpass.getuser()}@127.0.0.1:{port}",
            "identity": str(d / "user"),
            "config": str(d / "config"),
        }
        yield peer, proc
    finally:
        _kill_sshd(proc)


def _kill_sshd(proc: subprocess.Popen) -> None:
    """The listener and its per-connection processes (each in a session of its own)."""
    done = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True)
    for line in done.stdout.splitlines():
        pid, ppid = (int(x) for x in line.split())
        if ppid == proc.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    _stop(proc)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with _ssh_peer(tmp_path_factory.mktemp("sshd")) as (peer, _):
        yield peer


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _ssh_args(peer: dict[str, str]) -> list[str]:
    return [
        "--device",
        peer["spec"],
        "--identity",
        peer["identity"],
        "--ssh-config",
        peer["config"],
    ]


def _check_report(report: dict, device: str) -> None:
    runners = {r["runner"]: r for r in report["runners"]}
    for name in ("cpu", f"cpu@{device}", f"gpu-fp16@{device}", f"gpu-fp32@{device}"):
        assert runners[name]["status"] == "ok", runners[name]
    adapter = runners[f"gpu-fp16@{device}"]["executed"]["adapter"]
    assert adapter["software"] is True  # lavapipe on the "device"
    pairs = {p["pair"]: p for p in report["comparisons"]}
    assert pairs[f"cpu@{device}:cpu"]["verdict"] == "pass"
    # the example's log-probabilities barely move on generated inputs: validate's calibration
    # calls the fp16 pair not meaningful there, exactly as `tflkit validate` does
    assert pairs[f"gpu-fp16@{device}:cpu"]["verdict"] in ("pass", "not-meaningful")
    outputs = {o["name"]: o for o in pairs[f"gpu-fp32@{device}:cpu"]["outputs"]}
    assert outputs["log_probs"]["verdict"] == "pass"
    assert outputs["log_probs"]["tolerance"]["rtol"] <= 1e-4  # judged as fp32, not fp16
    assert outputs["label"]["verdict"] == "unverified"  # int64: TensorBuffer cannot read it


@pytest.mark.gpu
def test_validate_over_adb(adb_env: Adbd, capsys: pytest.CaptureFixture[str]) -> None:
    device = f"adb:{adb_env.serial}"
    code, out, err = _cli(
        capsys, "device", "validate", str(EXAMPLE), "--device", device,
        "--device-python", PY, "-n", "2", "--json",
    )  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    assert report["schema"] == "tflkit.validate/1" and report["verdict"] == "pass"
    _check_report(report, device)
    assert runners_harness(report, device) == "linux"  # adbd without getprop: the Linux harness
    assert f"{device}: gpu_fp16 ok" in err  # progress on stderr


def runners_harness(report: dict, device: str) -> str:
    return next(r for r in report["runners"] if r["runner"] == f"cpu@{device}")["executed"][
        "harness"
    ]


@pytest.mark.gpu
def test_validate_over_ssh_second_signature_with_html(
    sshd: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The protocol fixture's second signature ("add"), its outputs meaningful in fp16."""
    from .test_harness_protocol import FIXTURES

    model = FIXTURES / "jobs" / "add" / "model.tflite"
    html = tmp_path / "report.html"
    code, out, err = _cli(
        capsys, "device", "validate", str(model), "--signature", "add", *_ssh_args(sshd),
        "--device-python", PY, "-n", "2", "--html", str(html),
    )  # fmt: skip
    assert code == 0, err
    spec = sshd["spec"]
    for backend in ("cpu", "gpu-fp16", "gpu-fp32"):
        assert f"{backend}@{spec} vs cpu: pass" in out, out
    assert "verdict: pass" in out
    page = html.read_text()
    assert page.lstrip().lower().startswith("<!doctype html>") and f"gpu-fp16@{spec}" in page


@pytest.mark.gpu
def test_two_devices_at_once_compare_with_each_other(
    adb_env: Adbd, sshd: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    adb = f"adb:{adb_env.serial}"
    code, out, err = _cli(
        capsys, "device", "validate", str(EXAMPLE), "--device", adb, *_ssh_args(sshd),
        "--device-python", PY, "-n", "1", "-b", "cpu", "-b", "gpu_fp32", "--json",
        "--keep", str(tmp_path / "kept"),
    )  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    pairs = {p["pair"]: p["verdict"] for p in report["comparisons"]}
    assert pairs[f"gpu-fp32@{sshd['spec']}:gpu-fp32@{adb}"] == "pass"
    assert pairs[f"cpu@{sshd['spec']}:cpu@{adb}"] == "pass"
    kept = sorted(p.name for p in (tmp_path / "kept").iterdir())
    assert len(kept) == 2 and all((tmp_path / "kept" / k / "result.json").is_file() for k in kept)


def _example_feed() -> dict[str, np.ndarray]:
    from tflkit import ir
    from tflkit.ir.entry import entry_point

    _, _, inputs, _ = entry_point(ir.load(EXAMPLE))
    name, tensor = next(iter(inputs.items()))
    return {
        name: np.linspace(0, 1, int(np.prod(tensor.shape)), dtype=np.float32).reshape(tensor.shape)
    }


def _slow_job(tmp_path: Path, runs: int = 400_000) -> Path:
    """A CPU-only job that runs for several seconds (many timed runs of a tiny model)."""
    options = JobOptions(backends=("cpu",), timed_runs=runs, warmup_runs=0)
    return write_job(tmp_path / "slow.job", EXAMPLE.read_bytes(), [_example_feed()], options)


def _session_processes(sid: int) -> list[str]:
    done = subprocess.run(["ps", "-eo", "sid=,pid=,args="], capture_output=True, text=True)
    return [line for line in done.stdout.splitlines() if line.split()[0] == str(sid)]


def test_daemon_killed_mid_job(adb_env: Adbd, tmp_path: Path) -> None:
    """adbd dies while the harness runs: one line, exit 4, nothing written, nothing left."""
    job = _slow_job(tmp_path)
    out = tmp_path / "out" / "result"
    cmd = [PY, "-m", "tflkit", "device", "run", str(job), "-o", str(out)]
    cmd += ["--device", f"adb:{adb_env.serial}", "--device-python", PY]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if "cpu starting" in line:
                break
        adb_env.stop()
        _, rest = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            _stop(proc)
        adb_env.start()
    lines = [line for line in rest.splitlines() if line.startswith("tflkit: error:")]
    assert proc.returncode == 4, "".join(seen) + rest
    assert len(lines) == 1 and "disconnected during the job" in lines[0], rest
    assert "Traceback" not in rest
    assert not out.exists()
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    assert _session_processes(proc.pid) == []
    # the device side notices on its next heartbeat and stops its child
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _harness_running(job):
        time.sleep(0.5)
    assert not _harness_running(job)


def test_ssh_connection_dropped_mid_job(tmp_path: Path) -> None:
    """sshd and its connection die while the harness runs: one line, exit 4, nothing written."""
    with _ssh_peer(tmp_path / "peer") as (peer, daemon):
        job = _slow_job(tmp_path)
        out = tmp_path / "out" / "result"
        cmd = [PY, "-m", "tflkit", "device", "run", str(job), "-o", str(out)]
        cmd += [*_ssh_args(peer), "--device-python", PY]
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        try:
            assert proc.stderr is not None
            for line in proc.stderr:
                if "cpu starting" in line:
                    break
            _kill_sshd(daemon)
            _, rest = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                _stop(proc)
    errors = [line for line in rest.splitlines() if line.startswith("tflkit: error:")]
    assert proc.returncode == 4 and len(errors) == 1, rest
    assert "ssh failed" in errors[0] or "disconnected" in errors[0], errors
    assert "Traceback" not in rest and not out.exists()
    assert _session_processes(proc.pid) == []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _harness_running(job):
        time.sleep(0.5)
    assert not _harness_running(job)


def _harness_running(job: Path) -> bool:
    done = subprocess.run(["ps", "-eo", "args="], capture_output=True, text=True)
    return any(
        "linux_harness.py" in line and "_backend" in line for line in done.stdout.split("\n")
    )


def test_interrupt_leaves_no_process(adb_env: Adbd, tmp_path: Path) -> None:
    """Ctrl-C mid-job: tflkit stops its adb commands (each in a session of its own) and exits."""
    job = _slow_job(tmp_path, runs=4_000_000)  # a minute or more of work on the device
    cmd = [PY, "-m", "tflkit", "device", "run", str(job), "-o", str(tmp_path / "r")]
    cmd += ["--device", f"adb:{adb_env.serial}", "--device-python", PY]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "cpu starting" in line:
                break
        proc.send_signal(signal.SIGINT)
        start = time.monotonic()
        proc.wait(timeout=60)
        # tflkit's exit, not the pipes' end. (Cold runs started in the background took 44 s:
        # SIGINT was ignored, so the job ran to its end; default_sigint gives the child a
        # terminal's Ctrl-C.)
        assert time.monotonic() - start < 10  # it did not wait for the job
        _, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            _stop(proc)
    assert proc.returncode == 130 and "Traceback" not in rest, rest
    ps = subprocess.run(["ps", "-eo", "args="], capture_output=True, text=True).stdout
    assert f"adb -s {adb_env.serial} shell" not in ps
    assert not (tmp_path / "r").exists()
    deadline = time.monotonic() + 15  # the device side stops on its next heartbeat
    while time.monotonic() < deadline and _harness_running(job):
        time.sleep(0.5)
    assert not _harness_running(job)


def test_timeout_stops_everything(adb_env: Adbd, tmp_path: Path, capsys) -> None:
    job = _slow_job(tmp_path)
    out = tmp_path / "res"
    code, _, err = _cli(
        capsys, "device", "run", str(job), "-o", str(out), "--device", f"adb:{adb_env.serial}",
        "--device-python", PY, "--timeout", "3",
    )  # fmt: skip
    assert code == 4 and "did not finish within 3 s" in err, err
    assert not out.exists() and not list(tmp_path.glob(".res*"))


def test_unreachable_devices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _need("ssh")
    port = _free_port()  # nothing listens there
    code, _, err = _cli(
        capsys, "device", "validate", str(EXAMPLE), "--device", f"ssh:nobody@127.0.0.1:{port}",
        "-n", "1",
    )  # fmt: skip
    assert code == 4 and err.count("tflkit: error:") == 1 and "ssh failed" in err, err
    code, _, err = _cli(capsys, "device", "validate", str(EXAMPLE), "--device", "usb:1")
    assert code == 2 and "--device takes local, adb:SERIAL, ssh:" in err


def test_device_list_tells_linux_adb_devices(adb_env: Adbd, capsys) -> None:
    code, out, err = _cli(capsys, "device", "list", "--json")
    assert code == 0, err
    rows = {r["device"]: r for r in json.loads(out)["devices"]}
    assert rows[f"adb:{adb_env.serial}"]["kind"] == "linux"
    assert rows["local"]["kind"] == "linux"


def test_configured_device_by_name(
    adb_env: Adbd,  # device list asks adb: our own adb server, never the default one
    sshd: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A board named in devices.toml: its identity, ssh config and Python come from the file."""
    config = tmp_path / "config" / "tflkit" / "devices.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        f'[board]\ndevice = "{sshd["spec"]}"\nidentity = "{sshd["identity"]}"\n'
        f'ssh_config = "{sshd["config"]}"\npython = "{PY}"\nworkdir = "{tmp_path / "jobs"}"\n'
    )
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config.parent.parent))
    code, out, err = _cli(capsys, "device", "list", "--json")
    rows = {r["device"]: r for r in json.loads(out)["devices"]}
    assert code == 0 and rows["board"]["state"] == "configured", err
    job = write_job(
        tmp_path / "job", EXAMPLE.read_bytes(), [_example_feed()], JobOptions(backends=("cpu",))
    )
    code, out, err = _cli(
        capsys, "device", "run", str(job), "--device", "board", "-o", str(tmp_path / "r"),
        "--json",
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(out)["results"][0]
    assert result["device"] == sshd["spec"] and result["result"]["backends"][0]["status"] == "ok"
    assert not any((tmp_path / "jobs").iterdir())  # the job folder is removed from the device
    code, _, err = _cli(capsys, "device", "run", str(job), "--device", "nope")
    assert code == 2 and "board" in err
