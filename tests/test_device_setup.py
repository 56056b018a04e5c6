"""``tflkit device setup`` against the real adbd and sshd on loopback (the "device": this machine).

The wheels are downloaded once into the test cache (``cache_root()/device-wheels``, about 50 MB)
and reused by later runs. The venvs are built in temporary folders on the "device" with its own
``python3`` (Debian's), never with this venv's Python, so the job really runs in the new venv.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import test_device_transports as transports
from tests.conftest_corpus import cache_root
from tests.needs import unavailable
from tests.test_device_transports import (
    EXAMPLE,
    Adbd,
    _check_report,
    _cli,
    _example_feed,
    _ssh_args,
)
from tflkit.delegates.device_protocol import JobOptions, write_job
from tflkit.harness import config_write
from tflkit.harness import setup as device_setup

# the daemons, started for this module as test_device_transports starts them for its own
adb_env = transports.adb_env
sshd = transports.sshd

BOARD_PYTHON = "/usr/bin/python3"  # the "device's" own Python, not this venv's


@pytest.fixture(scope="module", autouse=True)
def wheel_cache() -> Iterator[Path]:
    """The host's wheel cache in the test cache (kept between runs)."""
    path = cache_root() / "device-wheels"
    old = os.environ.get(device_setup.WHEELS_ENV)
    os.environ[device_setup.WHEELS_ENV] = str(path)
    try:
        yield path
    finally:
        if old is None:
            os.environ.pop(device_setup.WHEELS_ENV, None)
        else:
            os.environ[device_setup.WHEELS_ENV] = old


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A devices.toml of the user's own, with a comment and an entry to keep."""
    path = tmp_path / "xdg" / "tflkit" / "devices.toml"
    path.parent.mkdir(parents=True)
    path.write_text('# my lab\n[phone]  # keep me\ndevice = "adb:R58M123"\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(path.parent.parent))
    return path


def _board_python() -> None:
    done = subprocess.run(
        [BOARD_PYTHON, "-c", "import venv, ensurepip"], capture_output=True, check=False
    )
    if done.returncode != 0:
        unavailable(f"{BOARD_PYTHON} with venv and ensurepip (apt install python3-venv)")


def _board_version() -> str:
    """The board Python's version: not this venv's, and it has no ai-edge-litert of its own."""
    done = subprocess.run(
        [BOARD_PYTHON, "-c", "import platform; print(platform.python_version())"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def _setup(capsys, *args: str) -> tuple[int, dict | None, str]:
    if "--device-python" not in args:  # the ssh login's python3 may be pyenv's: use Debian's
        args = (*args, "--device-python", BOARD_PYTHON)
    code, out, err = _cli(capsys, "device", "setup", *args, "--json")
    return code, (json.loads(out) if code == 0 else None), err


def _no_pip_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any pip download now fails: no index, no find-links, no config file."""
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", "/nonexistent")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)


@pytest.mark.gpu
def test_setup_over_ssh_then_validate_with_no_flag(
    sshd: dict[str, str], config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _board_python()
    before = config.read_text()
    board = tmp_path / "board"
    spec = sshd["spec"]
    ssh = _ssh_args(sshd)[2:]  # --identity, --ssh-config
    code, doc, err = _setup(capsys, spec, *ssh, "--workdir", str(board))
    assert code == 0, err
    assert doc is not None and doc["schema"] == "tflkit.device-setup/1"
    assert doc["python"] == f"{board}/venv/bin/python" and Path(doc["python"]).is_file()
    version = device_setup.litert_version(device_setup.requirements())
    assert doc["versions"]["ai-edge-litert"] == version
    assert doc["platform"]["arch"] == os.uname().machine
    assert "pushing" in err and "installing" in err  # progress lines on stderr
    # recorded: the user's text kept byte for byte, an entry named after the spec appended
    text = config.read_text()
    assert text.startswith(before) and doc["config"]["action"] == "added"
    from tflkit.harness.config import configured_devices

    entry = configured_devices()[spec]
    assert entry["device"] == spec and entry["python"] == doc["python"]
    assert not list(board.glob(".wheels-*"))  # the pushed wheels are removed
    # later jobs use the venv with no --device-python
    kept = tmp_path / "kept"
    code, out, err = _cli(
        capsys, "device", "validate", str(EXAMPLE), *_ssh_args(sshd), "-n", "2", "--json",
        "--keep", str(kept),
    )  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    assert report["verdict"] == "pass"
    _check_report(report, spec)
    (result,) = kept.glob("*/result.json")
    assert json.loads(result.read_text())["device"]["python"] == _board_version()
    # again: the venv is there already
    code, doc, err = _setup(capsys, spec, *ssh, "--workdir", str(board))
    assert code == 0 and doc is not None and doc["reused_venv"] is True, err
    assert doc["config"]["action"] == "unchanged"


def test_second_setup_over_adb_uses_the_wheel_cache(
    adb_env: Adbd,
    config: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A named adb device: the cached wheels (pip cannot download anything), python replaced."""
    _board_python()
    spec = f"adb:{adb_env.serial}"
    config.write_text(
        config.read_text()
        + f'\n[board]\ndevice = "{spec}"\npython = "/old/bin/python"  # set by hand\n'
    )
    before = config.read_text()
    # the wheels for this machine's python3 are in the cache (downloaded here if not yet)
    info = subprocess.run(
        [BOARD_PYTHON, "-c", device_setup._PROBE], capture_output=True, text=True, check=True
    ).stdout
    target = device_setup.target_of(spec, json.loads(info.split(device_setup._PROBE_TAG)[1]))
    device_setup.ensure_wheels(target, device_setup.requirements(), spec, lambda _m: None)
    _no_pip_index(monkeypatch)
    board = tmp_path / "adb-board"
    code, doc, err = _setup(capsys, "board", "--workdir", str(board))
    assert code == 0, err
    assert doc is not None and doc["wheels"]["cached"] is True and "using the cached wheels" in err
    assert doc["config"] == {"path": str(config), "entries": ["board"], "action": "updated"}
    python = f"{board}/venv/bin/python"
    assert config.read_text() == before.replace("/old/bin/python", python)  # comment kept
    job = write_job(
        tmp_path / "job", EXAMPLE.read_bytes(), [_example_feed()], JobOptions(backends=("cpu",))
    )
    for device in ("board", spec):  # by name, and by spec through the entry
        out = tmp_path / f"r-{device.replace(':', '_')}"
        code, _, err = _cli(capsys, "device", "run", str(job), "--device", device, "-o", str(out))
        assert code == 0, err
        result = json.loads((out / "result.json").read_text())
        assert result["backends"][0]["status"] == "ok"
        assert result["device"]["python"] == _board_version()  # the board's, in the venv


def test_download_failure_is_one_line(
    adb_env: Adbd,
    config: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No cached wheels and pip cannot download: one line, non-zero, nothing recorded."""
    _board_python()
    monkeypatch.setenv(device_setup.WHEELS_ENV, str(tmp_path / "empty-cache"))
    _no_pip_index(monkeypatch)
    before = config.read_text()
    code, _, err = _setup(capsys, f"adb:{adb_env.serial}", "--workdir", str(tmp_path / "b"))
    errors = [line for line in err.splitlines() if line.startswith("tflkit: error:")]
    assert code == 1 and len(errors) == 1 and "ai-edge-litert" in errors[0], err
    assert "PIP_NO_INDEX" in errors[0] and "linux " in errors[0], errors
    assert config.read_text() == before and not (tmp_path / "b" / "venv").exists()


def _fake_python(folder: Path, sitecustomize: str) -> Path:
    """A real ``python3`` on the "device": this machine's, with ``sitecustomize`` loaded first."""
    folder.mkdir(parents=True)
    (folder / "sitecustomize.py").write_text(sitecustomize)
    script = folder / "python3"
    script.write_text(f'#!/bin/sh\nPYTHONPATH={folder} exec {BOARD_PYTHON} "$@"\n')
    script.chmod(0o755)
    return script


ARMV7 = """\
import os
_uname = os.uname
def _armv7():
    u = _uname()
    return os.uname_result((u.sysname, u.nodename, u.release, u.version, "armv7l"))
os.uname = _armv7
"""

NO_ENSUREPIP = """\
import sys
class _NoEnsurepip:
    def find_spec(self, name, path=None, target=None):
        if name == "ensurepip":
            raise ModuleNotFoundError("No module named 'ensurepip'")
        return None
sys.meta_path.insert(0, _NoEnsurepip())
"""


def test_a_board_without_wheels_or_venv_is_one_line(
    sshd: dict[str, str], config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 32-bit ARM board (a python3 that reports armv7l) and one without ensurepip."""
    _board_python()
    before = config.read_text()
    ssh = _ssh_args(sshd)[2:]
    arm = _fake_python(tmp_path / "arm", ARMV7)
    probe = subprocess.run([str(arm), "-c", "import platform; print(platform.machine())"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    assert probe.stdout.strip() == "armv7l"
    workdir = str(tmp_path / "b")
    code, _, err = _setup(
        capsys, sshd["spec"], *ssh, "--device-python", str(arm), "--workdir", workdir
    )
    errors = [line for line in err.splitlines() if line.startswith("tflkit: error:")]
    assert code == 1 and len(errors) == 1, err
    assert "armv7l" in errors[0] and "no ai-edge-litert" in errors[0], errors
    bare = _fake_python(tmp_path / "bare", NO_ENSUREPIP)
    code, _, err = _setup(
        capsys, sshd["spec"], *ssh, "--device-python", str(bare), "--workdir", workdir
    )
    errors = [line for line in err.splitlines() if line.startswith("tflkit: error:")]
    assert code == 1 and len(errors) == 1, err
    assert "ensurepip" in errors[0] and "apt install python3-venv" in errors[0], errors
    code, _, err = _setup(capsys, sshd["spec"], *ssh, "--workdir", "relative/dir")
    assert code == 2 and "--workdir takes an absolute path" in err, err
    assert config.read_text() == before and not (tmp_path / "b").exists()


def test_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _setup(capsys, "local")
    assert code == 2 and "Linux devices" in err, err
    code, _, err = _setup(capsys, "ssh:root@127.0.0.1:1", "--workdir", "relative/dir")
    assert code == 4 and err.count("tflkit: error:") == 1 and "ssh failed" in err, err


def test_devices_toml_edits_keep_the_users_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Quoted names, inline comments and CRLF survive; what a line edit cannot do is refused."""
    from tflkit.harness.config import configured_devices

    path = tmp_path / "tflkit" / "devices.toml"
    path.parent.mkdir()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    text = (
        '# lab\r\n[ "rpi 5" ]  # the one on the left\r\ndevice = "ssh:pi@rpi5"\r\n'
        "python = '/usr/bin/python3'  # old\r\n\r\n[jetson]\r\ndevice = \"ssh:nv@jetson\"\r\n"
    )
    path.write_bytes(text.encode())
    done = config_write.record_python("ssh:pi@rpi5", "ssh:pi@rpi5", "/home/pi/v/bin/python")
    assert done["entries"] == ["rpi 5"] and done["action"] == "updated"
    assert path.read_bytes().decode() == text.replace(
        "'/usr/bin/python3'", '"/home/pi/v/bin/python"'
    )
    done = config_write.record_python("jetson", "ssh:nv@jetson", "/opt/v/bin/python")
    assert done["action"] == "updated"
    assert configured_devices()["jetson"]["python"] == "/opt/v/bin/python"
    assert configured_devices()["rpi 5"]["python"] == "/home/pi/v/bin/python"
    # an entry this edit cannot find as lines (an inline table): nothing written, one line
    path.write_text('board = { device = "adb:X", python = "a" }\n[other]\ndevice = "adb:Y"\n')
    before = path.read_text()
    with pytest.raises(device_setup.SetupError, match=r'add python = "/v/bin/python" to \[board\]'):
        config_write.record_python("board", "adb:X", "/v/bin/python")
    assert path.read_text() == before
