"""docs/api.md's examples run as they are, from the wheel in a venv without the extras, in a tmp
folder (no checkout on the path); and the facade's objects are the ones the CLI prints."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests import package_env
from tests.package_fixtures import venv_python

API = package_env.ROOT / "docs" / "api.md"


def examples() -> list[tuple[str, str]]:
    """(the section's title, the code) of every python block of docs/api.md."""
    found, title = [], ""
    for block in re.split(r"^(## .*)$", API.read_text(), flags=re.M):
        if block.startswith("## "):
            title = block[3:].strip()
            continue
        for code in re.findall(r"```python\n(.*?)```", block, flags=re.S):
            found.append((title, code))
    return found


def _run(python: Path, code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(python), "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300,
        env=package_env.isolated_env(python.parent.parent),
    )  # fmt: skip


def test_every_facade_function_has_an_example():
    import tflkit

    text = API.read_text()
    functions = [n for n in tflkit.__all__ if n[0].islower()]
    for name in functions:
        assert any(f"tflkit.{name}(" in code for _, code in examples()), name
    assert f"## `tflkit.{functions[0]}`" in text or "## `tflkit.load` and" in text


@pytest.mark.gpu
@pytest.mark.parametrize("title,code", examples(), ids=[t for t, _ in examples()])
def test_the_example_runs_from_the_wheel(title, code, gpu, tmp_path_factory, tmp_path):
    python = venv_python(tmp_path_factory)
    done = _run(python, code, tmp_path)
    assert done.returncode == 0, (title, done.stdout[-1500:], done.stderr[-3000:])
    assert done.stdout.strip(), title  # each example shows something


@pytest.mark.parametrize("command", ["inspect", "check"])
def test_the_facade_returns_what_the_cli_prints(command, tmp_path_factory, tmp_path):
    python = venv_python(tmp_path_factory)
    example = package_env.example_path(python, tmp_path)
    env = package_env.isolated_env(python.parent.parent)
    cli = subprocess.run(
        [str(python.parent / "tflkit"), command, "--json", str(example)], cwd=tmp_path,
        capture_output=True, text=True, check=True, env=env,
    )  # fmt: skip
    call = f"tflkit.{command}({str(example)!r})"
    api = _run(python, f"import tflkit, tflkit.jsonable as j; print(j.dumps({call}))", tmp_path)
    assert api.returncode == 0, api.stderr
    assert json.loads(api.stdout) == json.loads(cli.stdout)
