"""``tflkit doctor``: every line true, on this machine (the editable install with every extra) and
from the wheel in a venv without the extras; each line checked against what the test finds
itself (metadata, the probe, the caches, dpkg, the commands), never against a written value."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
from pathlib import Path

import pytest

import tflkit
from tests import package_env
from tests.conftest_corpus import REPO, cache_root
from tests.package_fixtures import venv_python
from tflkit.doctor.items import Item
from tflkit.doctor.system import deb_version
from tflkit.errors import EXTRAS, missing_modules

TFLKIT = [str(REPO / ".venv/bin/tflkit")]
DEVICES = '[rpi5]\ndevice = "ssh:pi@rpi5.local"\n\n[pixel]\ndevice = "adb:emulator-5554"\n'


def _env(tmp_path: Path, devices: str | None = DEVICES) -> dict[str, str]:
    env = dict(os.environ, XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp"))
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    if devices is not None:
        (tmp_path / "config" / "tflkit").mkdir(parents=True, exist_ok=True)
        (tmp_path / "config" / "tflkit" / "devices.toml").write_text(devices)
    # the caches the tests keep (./dev.sh test fills them): LiteRT.js and the converter envs
    env["TFLKIT_BROWSER_DIR"] = str(cache_root() / "browser")
    env["TFLKIT_CONVERTERS_DIR"] = str(cache_root() / "converters")
    return env


def _doctor(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[int, dict]:
    done = subprocess.run(
        [*cmd, "doctor", "--json"], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def _items(doc: dict) -> dict[tuple[str, str], dict]:
    return {(i["group"], i["name"]): i for i in doc["items"]}


def _every_gap_has_a_fix(doc: dict) -> None:
    for item in doc["items"]:
        assert item["state"] in ("ok", "missing", "failed", "info"), item
        if item["state"] in ("missing", "failed"):
            assert item["fix"], item
    assert doc["missing"] == [i for i in doc["items"] if i["state"] in ("missing", "failed")]


@pytest.mark.gpu
def test_every_line_is_true_here(gpu, tmp_path, monkeypatch):
    env = _env(tmp_path)
    code, doc = _doctor(TFLKIT, env, tmp_path)
    items = _items(doc)
    _every_gap_has_a_fix(doc)
    here = items["tflkit", "tflkit"]["detail"]
    assert here == f"{importlib.metadata.version('tflkit')} in {Path(tflkit.__file__).parent}"
    assert code == 0 and doc["gpu_ok"] is True
    assert gpu in items["gpu", "accelerator"]["detail"]  # the probe's own adapter line
    for label, dist in (("ai-edge-litert", "ai-edge-litert"), ("LiteRT-LM", "litert-lm-api"),
                        ("TensorFlow", "tensorflow-cpu")):  # fmt: skip
        assert items["runtime", label]["detail"].startswith(
            f"{dist} {importlib.metadata.version(dist)} "
        )
    mesa = deb_version("mesa-vulkan-drivers")
    assert (mesa is None) == (items["gpu", "Mesa"]["state"] == "info")
    if mesa:
        assert mesa in items["gpu", "Mesa"]["detail"]
    for key in ("TFLKIT_BROWSER_DIR", "TFLKIT_CONVERTERS_DIR"):
        monkeypatch.setenv(key, env[key])
    from tflkit.converters.envs import ROUTES, find_env
    from tflkit.delegates.browser.chromium import chromium_version
    from tflkit.delegates.browser.provision import find_litertjs

    assert (items["browser", "LiteRT.js"]["state"] == "ok") == (find_litertjs() is not None)
    for route in ROUTES:
        env_found = find_env(route)
        assert (items["converters", route]["state"] == "ok") == (env_found is not None)
        if env_found is not None:
            assert str(env_found.path) in items["converters", route]["detail"]
    version = chromium_version()
    assert (version or "no Chromium") in items["browser", "Chromium"]["detail"]
    for name, spec in (("rpi5", "ssh:pi@rpi5.local"), ("pixel", "adb:emulator-5554")):
        assert items["devices", name]["detail"].startswith(spec)
    for extra in EXTRAS:
        assert (items["extras", extra]["state"] == "ok") == (not missing_modules(extra))


@pytest.mark.gpu
def test_without_the_extras_every_line_is_true(gpu, tmp_path_factory, tmp_path):
    python = venv_python(tmp_path_factory)
    env = {**_env(tmp_path), **package_env.isolated_env(python.parent.parent)}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    code, doc = _doctor([str(python.parent / "tflkit")], env, tmp_path)
    items = _items(doc)
    _every_gap_has_a_fix(doc)
    assert Path(items["tflkit", "tflkit"]["detail"].split(" in ", 1)[1]).is_relative_to(
        python.parent.parent
    )
    assert code == 0 and doc["gpu_ok"] is True  # the GPU needs no extra
    for extra, (modules, _) in EXTRAS.items():
        present = subprocess.run(
            [str(python), "-c", f"import {modules[-1]}"], capture_output=True, env=env
        ).returncode == 0  # fmt: skip
        assert not present
        assert items["extras", extra]["state"] == "missing"
        assert items["extras", extra]["fix"] == f"pip install 'tflkit[{extra}]'"
    assert items["runtime", "LiteRT-LM"]["fix"] == "pip install 'tflkit[llm]'"
    assert items["runtime", "TensorFlow"]["fix"] == "pip install 'tflkit[convert]'"
    assert items["browser", "Playwright"]["fix"] == "pip install 'tflkit[browser]'"
    assert items["runtime", "ai-edge-litert"]["state"] == "ok"


def test_the_screen_lists_each_fix(tmp_path):
    env = _env(tmp_path, devices=None)
    done = subprocess.run(
        [*TFLKIT, "doctor"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )
    lines = done.stdout.splitlines()
    assert len(lines) <= 45, done.stdout  # one screen
    _, doc = _doctor(TFLKIT, env, tmp_path)
    for item in doc["missing"]:
        assert f"  {item['name']}: {item['fix']}" in done.stdout
    assert "no devices configured" in done.stdout
    assert lines[-1] == ("GPU accelerator works here" if doc["gpu_ok"] else
                         "GPU accelerator does not work here")  # fmt: skip


def test_a_malformed_devices_file_is_a_failed_line_not_a_crash(tmp_path):
    _, doc = _doctor(TFLKIT, _env(tmp_path, devices="[x]\nwhere = 1\n"), tmp_path)
    item = _items(doc)["devices", "devices.toml"]
    assert item["state"] == "failed" and "needs device" in item["detail"], item


def test_an_item_has_one_of_the_states():
    with pytest.raises(ValueError):
        Item("gpu", "x", "fine", "")
    assert Item("gpu", "x", "ok", "found").fix is None
