"""``tflkit convert some.onnx`` as a new user runs it: no converter environment yet.

One session fixture starts two ``tflkit convert`` processes at once on an EMPTY converter cache
(``TFLKIT_CONVERTERS_DIR`` in a temp dir; pip's own cache may be warm): one builds the onnx2tf
environment, the other waits on the lock, and both convert the bundled ONNX example from another
working directory with relative paths. The other conversion tests use the shared environment in
the test cache (``./dev.sh test`` builds it with ``tflkit converters install``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "tflkit" / "examples" / "tiny_classifier.onnx"
BUILD_TIMEOUT_S = 1800


def _tflkit(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tflkit", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=BUILD_TIMEOUT_S)
    return proc.returncode, out, err


@pytest.fixture(scope="session")
def first_use(tmp_path_factory):
    """Two concurrent converts from an empty cache, then a third that reuses the environment."""
    root = tmp_path_factory.mktemp("first-use")
    cache, src = root / "cache", root / "models"
    src.mkdir()
    shutil.copy(EXAMPLE, src / "tiny.onnx")
    env = {**os.environ, "TFLKIT_CONVERTERS_DIR": str(cache)}
    runs = []
    for name in ("a", "b"):
        (root / name).mkdir()
        args = ["convert", "../models/tiny.onnx", "-o", "out/tiny.tflite", "--json"]
        runs.append(_tflkit(*args, cwd=root / name, env=env))
    first = [_finish(proc) for proc in runs]
    again = _finish(
        _tflkit("convert", "../models/tiny.onnx", "-o", "out/again.tflite", cwd=root / "a", env=env)
    )
    return root, cache, first, again


def test_first_use_builds_once_and_converts(first_use):
    from tflkit.converters.envs import installed_envs

    root, cache, first, _ = first_use
    for (code, out, err), name in zip(first, "ab", strict=True):
        assert code == 0, err[-2000:]
        assert "tflkit: building the onnx converter environment (first use)" in err
        report = json.loads(out)
        assert report["schema"] == "tflkit.convert/1"
        assert report["converter"] == "onnx2tf 1.29.24"
        assert report["converter_env"]["packages"] == ["onnx2tf==1.29.24"]
        assert report["inputs"][0]["source_shape"] == [None, 3, 32, 32]
        assert max(report["cpu_vs_reference_max_abs"].values()) < 1e-5
        assert (root / name / "out" / "tiny.tflite").is_file()
        sidecar = json.loads((root / name / "out" / "tiny.provenance.json").read_text())
        assert sidecar["converter_env"] == report["converter_env"]
    assert (root / "models" / "tiny.onnx").read_bytes() == EXAMPLE.read_bytes()
    waited = [err for _, _, err in first if "waiting for another tflkit process" in err]
    assert len(waited) == 1, "the lock did not make one process wait for the other"
    (env,) = installed_envs(cache)
    log = (env.path.parent / f"{env.path.name}.log").read_text()
    assert log.count(" -m venv ") == 1, "the environment was built twice"
    assert env.record["install_seconds"] > 0 and env.record["size_bytes"] > 100e6


def test_later_runs_reuse_the_environment(first_use):
    root, _, _, (code, out, err) = first_use
    assert code == 0, err[-2000:]
    assert "building" not in err and "waiting" not in err
    assert "converter environment: onnx-py" in out
    assert (root / "a" / "out" / "again.tflite").is_file()


def test_unreachable_index_is_one_line(tmp_path):
    """pip pointed at a closed loopback port (one retry: pip names the connection error only
    when it retries): one line, exit 2, nothing half-built left."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    env.update(
        TFLKIT_CONVERTERS_DIR=str(tmp_path / "cache"),
        PIP_CONFIG_FILE=os.devnull,
        PIP_INDEX_URL="http://127.0.0.1:9/simple",
        PIP_RETRIES="1",
        PIP_DEFAULT_TIMEOUT="5",
        PIP_NO_CACHE_DIR="1",
    )
    code, _, err = _finish(_tflkit("converters", "install", "onnx", cwd=tmp_path, env=env))
    assert code == 2, err
    (line,) = [ln for ln in err.splitlines() if ln.startswith("tflkit: error:")]
    assert "cannot reach the package index to install onnx2tf==1.29.24" in line
    assert "Traceback" not in err
    left = [p for p in (tmp_path / "cache").iterdir() if p.is_dir()]
    assert not left, "a half-built environment was left"


def _alive_with(needle: str) -> list[str]:
    """Command lines of live processes whose environment holds ``needle`` (zombies excluded)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or needle.encode() not in (entry / "environ").read_bytes():
                continue
            if "\nState:\tZ" not in (entry / "status").read_text():
                found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return found


def test_interrupted_build_leaves_no_pip_and_nothing_half_built(tmp_path):
    """SIGTERM while pip waits on the index (a loopback server that accepts and never answers):
    tflkit exits 143 with one line, pip's whole session goes with it, no venv is left."""
    cache = tmp_path / "cache"
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    with socket.create_server(("127.0.0.1", 0)) as server:
        env.update(
            TFLKIT_CONVERTERS_DIR=str(cache),
            PIP_CONFIG_FILE=os.devnull,
            PIP_INDEX_URL=f"http://127.0.0.1:{server.getsockname()[1]}/simple",
            PIP_DEFAULT_TIMEOUT="300",
            PIP_NO_CACHE_DIR="1",
        )
        proc = _tflkit("converters", "install", "onnx", cwd=tmp_path, env=env)
        server.settimeout(300)
        connection, _ = server.accept()  # pip is asking the index: the build is under way
        with connection:
            assert any(" -m pip install " in cmd for cmd in _alive_with(str(cache)))
            proc.send_signal(signal.SIGTERM)
            code, _, err = _finish(proc)
    assert code == 128 + signal.SIGTERM, err
    assert "tflkit: error: interrupted (SIGTERM)" in err and "Traceback" not in err, err
    deadline = time.monotonic() + 5
    while (alive := _alive_with(str(cache))) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive, f"processes outlived tflkit: {alive}"
    assert not [p for p in cache.iterdir() if p.is_dir()], "a half-built environment was left"
