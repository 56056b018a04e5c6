"""Starting the probe worker (:func:`tflkit.gpu._probe_worker.main`, through
:func:`tflkit.proc.worker.python_command`) in a child process: the model and inputs it reads, the
command line, and its last state read back."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.errors import ModelLoadError, UsageError
from tflkit.gpu import _probe_worker
from tflkit.proc.worker import python_command, run_worker

#: the line the batch worker prints before each job (tflkit.gpu._probe_worker.JOB_MARKER)
JOB_MARKER = "tflkit-probe: job "
FILE_IDENTIFIER = b"TFL3"

ModelInput = bytes | bytearray | memoryview | str | os.PathLike[str]
#: Inputs by name or in signature order.
Inputs = Mapping[str, np.ndarray] | Sequence[np.ndarray]
#: Inputs as the worker takes them: arrays in order, and their names when given by name.
Normalized = tuple[list[np.ndarray], list[str] | None]


class _Spawns:
    """Counts worker processes started by this process (lets tests see a cache hit)."""

    count = 0


def spawn_count() -> int:
    """How many probe worker processes this process has started."""
    return _Spawns.count


def read_model(model: ModelInput) -> bytes:
    if isinstance(model, bytes | bytearray | memoryview):
        data = bytes(model)
        where = "model bytes"
    else:
        path = Path(model)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ModelLoadError(f"cannot read model {path}: {exc.strerror or exc}") from exc
        where = str(path)
    if len(data) < 8 or data[4:8] != FILE_IDENTIFIER:
        raise ModelLoadError(f"{where} is not a TFLite model (no 'TFL3' flatbuffer identifier)")
    return data


def normalize_inputs(inputs: Inputs | None) -> Normalized | None:
    if inputs is None:
        return None
    if isinstance(inputs, Mapping):
        names = [str(k) for k in inputs]
        return [np.ascontiguousarray(inputs[k]) for k in inputs], names
    if isinstance(inputs, np.ndarray):
        raise UsageError("inputs must be a sequence or a name->array mapping, not one array")
    return [np.ascontiguousarray(a) for a in inputs], None


def spawn_probe(
    data: bytes,
    *,
    timeout: float,
    enforce_f32: bool,
    run: bool,
    inputs: Normalized | None,
    seed: int,
    workdir: Path,
    input_sets: list[Normalized] | None = None,
    signature: str | None = None,
) -> tuple[dict[str, Any], str, int | None, bool, float, Path]:
    """Run the worker; return (last state, merged log, return code, timed out, wall s, npz)."""
    model_path = workdir / "model.tflite"
    model_path.write_bytes(data)
    result_path = workdir / "result.json"
    npz_path = workdir / "outputs.npz"
    cmd = python_command(
        _probe_worker.main,
        "--model",
        model_path,
        "--result",
        result_path,
        "--outputs",
        npz_path,
        "--seed",
        seed,
    )
    if enforce_f32:
        cmd.append("--enforce-f32")
    if run:
        cmd.append("--run")
    if inputs is not None:
        arrays, names = inputs
        in_path = workdir / "inputs.npz"
        np.savez(in_path, **{f"in_{i}": a for i, a in enumerate(arrays)})
        cmd += ["--inputs", str(in_path)]
        if names is not None:
            cmd += ["--input-names", json.dumps(names)]
    if input_sets is not None:
        sets_path = workdir / "input_sets.npz"
        np.savez(
            sets_path,
            **{
                f"s{k}_in_{i}": a
                for k, (arrays, _) in enumerate(input_sets)
                for i, a in enumerate(arrays)
            },
        )
        cmd += ["--input-sets", str(sets_path)]
        if input_sets and input_sets[0][1] is not None:
            cmd += ["--input-names", json.dumps(input_sets[0][1])]
    if signature is not None:
        cmd += ["--signature", signature]
    return communicate(cmd, workdir, timeout, result_path, npz_path)


def communicate(
    cmd: list[str], workdir: Path, timeout: float, result_path: Path, npz_path: Path
) -> tuple[dict[str, Any], str, int | None, bool, float, Path]:
    """Start the worker in its own session, wait (killing it on timeout), read its state."""
    finished = run_worker(cmd, cwd=workdir, timeout=timeout)
    _Spawns.count += 1
    try:
        state = json.loads(result_path.read_text())
    except (OSError, ValueError):
        state = {}
    return (
        state,
        finished.output,
        finished.returncode,
        finished.timed_out,
        finished.seconds,
        npz_path,
    )
