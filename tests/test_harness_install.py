"""``tflkit harness install``/``list``: LiteRT.js fetched with the real npm once, then reused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from tests.needs import unavailable


def _tflkit(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tflkit", *args], capture_output=True, text=True, env=env
    )


def test_install_fetches_once_and_list_says_ready(tmp_path):
    npm = shutil.which("npm")
    if npm is None:
        unavailable("npm is not installed (install-system-packages.sh --browser installs it)")
    env = {**os.environ, "TFLKIT_BROWSER_DIR": str(tmp_path / "browser")}
    before = json.loads(_tflkit("harness", "list", "--json", env=env).stdout)
    assert before["parts"][0]["ready"] is False

    first = _tflkit("harness", "install", "browser", "--json", env=env)
    assert first.returncode == 0, first.stderr
    installed = json.loads(first.stdout)["installed"][0]
    assert (tmp_path / "browser" / f"litertjs-{installed['litertjs']}" / "core").is_dir()
    assert "fetching LiteRT.js with npm" in first.stderr

    # a second install finds the cache: no npm needed (none on PATH now), nothing fetched
    no_npm = {**env, "PATH": os.path.dirname(sys.executable)}
    again = _tflkit("harness", "install", env=no_npm)
    assert again.returncode == 0, again.stderr
    assert "fetching" not in again.stderr
    after = json.loads(_tflkit("harness", "list", "--json", env=no_npm).stdout)
    assert after["parts"][0]["ready"] is True


def test_unknown_target_is_a_usage_error(tmp_path):
    env = {**os.environ, "TFLKIT_BROWSER_DIR": str(tmp_path)}
    done = _tflkit("harness", "install", "android", env=env)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "tflkit: error: unknown harness target(s) ['android']; choose from ['browser']"
    ]
    assert not any(tmp_path.iterdir())
