"""The extras say what they bring: each installs on its own (a venv with the core and that one
extra has its modules), and a command whose extra is missing says which one, in one line, exit 2
(run from the wheel in a venv with no extra at all)."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import pytest

from tests import package_env
from tests.package_fixtures import venv_python
from tflkit.errors import EXTRAS

pytestmark = pytest.mark.usefixtures("built")

MISSING = "import json; from tflkit.errors import EXTRAS, missing_modules as m; " \
    "print(json.dumps({e: m(e) for e in EXTRAS}))"  # fmt: skip


def _missing(python: Path, cwd: Path) -> dict[str, list[str]]:
    import json

    done = subprocess.run(
        [str(python), "-c", MISSING], cwd=cwd, capture_output=True, text=True, check=True,
        env=package_env.isolated_env(python.parent.parent),
    )  # fmt: skip
    return json.loads(done.stdout)


def test_the_table_names_every_extra_of_pyproject():
    project = tomllib.loads((package_env.ROOT / "pyproject.toml").read_text())["project"]
    assert set(project["optional-dependencies"]) - {"test", "all"} == set(EXTRAS)


def test_the_wheel_declares_every_extra(built):
    assert package_env.extras_of(built.wheel) >= set(EXTRAS)


def test_without_extras_each_one_is_missing(tmp_path_factory, tmp_path):
    missing = _missing(venv_python(tmp_path_factory), tmp_path)
    assert all(missing[extra] for extra in EXTRAS), missing


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_each_extra_installs_on_its_own(extra, tmp_path_factory, tmp_path):
    missing = _missing(venv_python(tmp_path_factory, extras=(extra,)), tmp_path)
    assert missing[extra] == []
    assert all(missing[other] for other in EXTRAS if other != extra), missing


def test_all_brings_every_extra(tmp_path_factory, tmp_path):
    missing = _missing(venv_python(tmp_path_factory, extras=("all",)), tmp_path)
    assert missing == {extra: [] for extra in EXTRAS}


def _one_line(python: Path, args: list[str], cwd: Path) -> str:
    done = subprocess.run(
        [str(python.parent / "tflkit"), *args], cwd=cwd, capture_output=True, text=True,
        timeout=300, env=package_env.isolated_env(python.parent.parent),
    )  # fmt: skip
    assert done.returncode == 2, (args, done.stdout[-800:], done.stderr[-800:])
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tflkit: error: "), done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    return lines[0]


def test_a_command_without_its_extra_names_the_one_to_install(tmp_path_factory, tmp_path):
    python = venv_python(tmp_path_factory)
    example = package_env.example_path(python, tmp_path)
    keras = tmp_path / "model.keras"
    keras.write_bytes(b"not opened: the extra is checked first")
    for args, extra in (
        (["convert", str(keras), "-o", str(tmp_path / "out.tflite")], "convert"),
        (["validate", str(example), "--reference", str(keras)], "convert"),
        (["validate", str(example), "--runner", "cpu", "--runner", "webgpu-fp32"], "browser"),
        (["device", "validate", str(example), "--device", "browser"], "browser"),
    ):
        line = _one_line(python, args, tmp_path)
        assert line.endswith(f"pip install 'tflkit[{extra}]'"), (args, line)
    assert not (tmp_path / "out.tflite").exists()
