"""Every worker starts from a function reference (``tflkit.proc.worker.spawn_python``), never
from a module-name string: the reference resolves in the child to that very function, and each
worker really starts through it (a real child process, its own arguments, its own exit)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tflkit.converters import _tf_worker as convert_worker
from tflkit.delegates import (
    _browser_worker,
    _delegate_worker,
    _engine_worker,
    _steps_worker,
    _tf_worker,
)
from tflkit.gpu import _probe_worker
from tflkit.proc import _cpu_smoke_worker, entry
from tflkit.proc.worker import python_command, spawn_python, target_of
from tflkit.regress import suite

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "tflkit" / "examples" / "tiny_classifier.tflite"

#: every worker tflkit starts
WORKERS = {
    "cpu smoke": _cpu_smoke_worker.main,
    "GPU probe": _probe_worker.main,
    "GPU steps": _steps_worker.main,
    "LiteRT-LM engine": _engine_worker.main,
    "TensorFlow reference": _tf_worker.main,
    "external delegate": _delegate_worker.main,
    "LiteRT.js browser job": _browser_worker.main,
    "TensorFlow converter": convert_worker.main,
    "regress suite model": suite.child_main,
}


@pytest.mark.parametrize("name", list(WORKERS))
def test_the_reference_names_the_function(name: str) -> None:
    function = WORKERS[name]
    cmd = python_command(function, "a", 1, Path("/b"))
    assert cmd[1:3] == ["-m", entry.__name__]
    module, _, attribute = cmd[3].partition(":")
    assert getattr(__import__(module, fromlist=["_"]), attribute) is function
    assert cmd[4:] == ["a", "1", "/b"]


def test_a_nested_function_is_refused() -> None:
    def inner(argv: list[str]) -> int:
        return 0

    with pytest.raises(ValueError, match="module-level function"):
        target_of(inner)


def _run(function, *args: object, cwd: Path):
    return spawn_python(function, *args, cwd=cwd, timeout=120)


def test_cpu_smoke_worker_runs_the_model(tmp_path: Path) -> None:
    done = _run(_cpu_smoke_worker.main, EXAMPLE, cwd=tmp_path)
    assert done.returncode == 0, done.output
    assert [ln for ln in done.output.splitlines() if ln.startswith("stage: ")]


@pytest.mark.parametrize(
    ("name", "flags"),
    [
        ("GPU probe", ["--model", "--result", "--outputs"]),
        ("TensorFlow reference", ["--source", "--inputs", "--names"]),
        ("external delegate", ["--model", "--delegate", "--option"]),
        ("LiteRT.js browser job", ["--backend", "--adapter", "--backend-timeout"]),
    ],
)
def test_argparse_workers_start_under_their_own_name(name: str, flags: list[str], tmp_path: Path):
    """``--help`` from the child: the worker's own parser, named after its module or its file (the
    argv a ``python -m`` start gave it), never after the entry."""
    function = WORKERS[name]
    done = _run(function, "--help", cwd=tmp_path)
    assert done.returncode == 0, done.output
    program = done.output.split()[1]
    assert program in (function.__module__, Path(function.__code__.co_filename).name), program
    for flag in flags:
        assert flag in done.output


@pytest.mark.parametrize(
    "name", ["GPU steps", "LiteRT-LM engine", "TensorFlow converter", "regress suite model"]
)
def test_folder_workers_start_and_fail_in_their_own_code(name: str, tmp_path: Path) -> None:
    """Given an empty folder (no plan, no job), each worker fails in its own module: the last
    frame of the child's traceback is the worker's file."""
    function = WORKERS[name]
    args = [tmp_path / "tflkit.toml", "{}"] if function is suite.child_main else [tmp_path]
    done = _run(function, *args, cwd=tmp_path)
    assert done.returncode == 1, done.output
    frames = re.findall(r'File "([^"]+)", line \d+, in (\S+)', done.output)
    files = [Path(f).resolve() for f, _ in frames if not f.startswith("<")]
    # the entry called the worker, which failed in its own code
    assert files[:2] == [Path(entry.__file__).resolve()] * 2, done.output
    assert files[2] == Path(function.__code__.co_filename).resolve(), done.output


def test_the_probe_worker_compiles_through_the_helper(tmp_path: Path) -> None:
    """The GPU probe's own start (``gpu/spawn.py``) is this helper: a real compile."""
    from tflkit.gpu.spawn import spawn_probe

    data = EXAMPLE.read_bytes()
    state, log, code, timed_out, _wall, _npz = spawn_probe(
        data, timeout=300, enforce_f32=False, run=False, inputs=None, seed=0, workdir=tmp_path
    )
    assert not timed_out and code == 0, log
    assert state.get("compiled") is True, json.dumps(state)


def test_no_worker_starts_from_a_module_name_string() -> None:
    """The source holds no ``"-m", "tflkit...."`` command: every child is named by reference."""
    pattern = re.compile(r"""["']-m["']\s*,\s*["']tflkit\.""")
    found = sorted(
        str(p.relative_to(REPO))
        for top in ("tflkit", "converters", "delegates")
        for p in (REPO / top).rglob("*.py")
        if pattern.search(p.read_text())
    )
    assert found == []
