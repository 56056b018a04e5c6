"""The float32 framework reference: a Keras model, a SavedModel, or a saved reference file.

Keras and SavedModel sources run with TensorFlow in a child process (TensorFlow must never share
a process with the GPU accelerator). A *reference file* is one ``.npz`` holding the input sets
and the reference outputs recorded once, plus a JSON manifest (``__manifest__``, format
``tflkit.reference/1``), so a user without TensorFlow can still compare against the reference:

- ``s{k}_in_{i}``: input ``i`` (named ``manifest["inputs"][i]``) of set ``k``
- ``s{k}_out_{j}``: output ``j`` (named ``manifest["outputs"][j]``) of set ``k``
"""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.errors import UsageError
from tflkit.fsio import atomic_output
from tflkit.proc.worker import python_command, run_worker

from . import _tf_worker
from .child_files import read_output_sets, read_state, write_input_sets
from .protocol import Feed, RunnerUnavailable, RunResult

__all__ = [
    "REFERENCE_FORMAT",
    "ReferenceOutputs",
    "ReferenceRunner",
    "is_reference_file",
    "load_reference",
    "save_reference",
]

REFERENCE_FORMAT = "tflkit.reference/1"
_KERAS_SUFFIXES = (".keras", ".h5", ".hdf5")


@dataclass
class ReferenceOutputs:
    """Input sets and the reference outputs recorded for them (a reference file's content)."""

    feeds: list[dict[str, np.ndarray]]
    outputs: list[dict[str, np.ndarray]]
    manifest: dict[str, Any] = field(default_factory=dict)


def is_reference_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a reference file (``.npz``) rather than a framework model."""
    return Path(path).suffix == ".npz"


def save_reference(
    path: str | os.PathLike[str],
    feeds: Sequence[Feed],
    outputs: Sequence[Mapping[str, np.ndarray]],
    *,
    source: str,
    framework: str,
    inputs: Mapping[str, Any] | None = None,
) -> Path:
    """Write a reference file atomically; never overwrites ``source``. ``inputs``: what kind of data
    the input sets hold (``InputSets.summary()``), kept in the manifest as ``input_sets``."""
    target = Path(path)
    if target.exists() and target.resolve() == Path(source).resolve():
        raise UsageError(f"refusing to overwrite the reference source {source}")
    if not feeds or len(feeds) != len(outputs):
        raise UsageError("a reference file needs as many output sets as input sets (>= 1)")
    in_names = list(feeds[0])
    out_names = list(outputs[0])
    manifest = {
        "format": REFERENCE_FORMAT,
        "source": source,
        "framework": framework,
        "sets": len(feeds),
        "inputs": in_names,
        "outputs": out_names,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if inputs is not None:
        manifest["input_sets"] = dict(inputs)
    arrays: dict[str, np.ndarray] = {"__manifest__": np.array(json.dumps(manifest))}
    for k, (feed, out) in enumerate(zip(feeds, outputs, strict=True)):
        arrays.update({f"s{k}_in_{i}": np.asarray(feed[n]) for i, n in enumerate(in_names)})
        arrays.update({f"s{k}_out_{j}": np.asarray(out[n]) for j, n in enumerate(out_names)})
    with atomic_output(target) as f:
        np.savez(f, **arrays)
    return target


def load_reference(path: str | os.PathLike[str]) -> ReferenceOutputs:
    """Read a reference file; raises UsageError when it is not one."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            if "__manifest__" not in npz.files:
                raise UsageError(f"{path} is not a tflkit reference file (no __manifest__)")
            manifest = json.loads(str(npz["__manifest__"]))
            if manifest.get("format") != REFERENCE_FORMAT:
                found = manifest.get("format")
                raise UsageError(f"{path}: unknown reference file format {found!r}")
            feeds, outputs = [], []
            for k in range(int(manifest["sets"])):
                ins, outs = manifest["inputs"], manifest["outputs"]
                feeds.append({n: npz[f"s{k}_in_{i}"] for i, n in enumerate(ins)})
                outputs.append({n: npz[f"s{k}_out_{j}"] for j, n in enumerate(outs)})
    except (OSError, ValueError, KeyError) as exc:
        raise UsageError(f"cannot read reference file {path}: {exc}") from exc
    return ReferenceOutputs(feeds, outputs, manifest)


def match_outputs(
    produced: Mapping[str, np.ndarray], wanted: Mapping[str, tuple[int, ...]]
) -> tuple[dict[str, np.ndarray], str]:
    """Rename the framework's outputs to the ``.tflite`` output names; says how it matched.

    By name when every wanted name is produced; else by position when counts and shapes agree
    (the converter keeps Keras output order); else by shape when every shape is unique.
    """
    if set(wanted) <= set(produced):
        return {n: produced[n] for n in wanted}, "name"
    values = list(produced.values())
    if len(values) == len(wanted) and all(
        tuple(v.shape) == tuple(s) for v, s in zip(values, wanted.values(), strict=True)
    ):
        return dict(zip(wanted, values, strict=True)), "position"
    by_shape: dict[tuple[int, ...], list[np.ndarray]] = {}
    for v in values:
        by_shape.setdefault(tuple(v.shape), []).append(v)
    if all(len(by_shape.get(tuple(s), [])) == 1 for s in wanted.values()):
        return {n: by_shape[tuple(s)][0] for n, s in wanted.items()}, "shape"
    raise ValueError(
        f"cannot match the reference outputs {[tuple(v.shape) for v in values]} to the "
        f"model's outputs {dict(wanted)}"
    )


class ReferenceRunner:
    """The framework's own float32 outputs for the same inputs."""

    name = "reference"

    def __init__(
        self,
        source: str | os.PathLike[str],
        *,
        outputs: Mapping[str, tuple[int, ...]],
        signature: str | None = None,
        timeout: float = 600.0,
    ) -> None:
        self.source = Path(source)
        self.wanted = dict(outputs)
        self.signature = signature
        self.timeout = timeout
        self._recorded: ReferenceOutputs | None = None

    def activate(self) -> None:
        if not self.source.exists():
            raise RunnerUnavailable(f"reference {self.source} does not exist")
        if is_reference_file(self.source):
            self._recorded = load_reference(self.source)
            return
        if not (self.source.is_dir() or self.source.suffix in _KERAS_SUFFIXES):
            raise RunnerUnavailable(
                f"reference {self.source}: expected a SavedModel directory, a Keras file "
                f"({', '.join(_KERAS_SUFFIXES)}) or a reference file (.npz)"
            )
        if importlib.util.find_spec("tensorflow") is None:
            raise RunnerUnavailable(
                "TensorFlow is not installed (pip install 'tflkit[convert]'), or use a reference "
                "file (.npz) saved where TensorFlow is installed"
            )

    def deactivate(self) -> None:
        self._recorded = None

    def infer(self, feeds: Sequence[Feed]) -> RunResult:
        if self._recorded is not None:
            return self._from_file(feeds)
        return self._from_framework(feeds)

    def _from_file(self, feeds: Sequence[Feed]) -> RunResult:
        recorded = self._recorded
        assert recorded is not None
        if len(feeds) != len(recorded.feeds) or any(
            set(f) != set(b) or any(not np.array_equal(f[n], b[n]) for n in f)
            for f, b in zip(feeds, recorded.feeds, strict=False)
        ):
            raise ValueError("the inputs differ from the ones recorded in the reference file")
        outputs = [match_outputs(out, self.wanted)[0] for out in recorded.outputs]
        return RunResult(
            self.name,
            "ok",
            outputs=outputs,
            executed={
                "runtime": "reference file",
                "framework": recorded.manifest.get("framework"),
                "source": recorded.manifest.get("source"),
                "recorded": recorded.manifest.get("created"),
                "file": str(self.source),
            },
            compile_seconds=0.0,
            infer_seconds=[0.0] * len(outputs),
        )

    def _from_framework(self, feeds: Sequence[Feed]) -> RunResult:
        names = list(feeds[0]) if feeds else []
        with tempfile.TemporaryDirectory(prefix="tflkit-ref-") as tmp:
            work = Path(tmp)
            write_input_sets(work / "in.npz", feeds, names)
            (work / "names.json").write_text(json.dumps(names))
            cmd = python_command(_tf_worker.main, "--source", self.source.resolve())
            cmd += ["--inputs", str(work / "in.npz"), "--names", str(work / "names.json")]
            cmd += ["--result", str(work / "r.json"), "--outputs", str(work / "out.npz")]
            if self.signature:
                cmd += ["--signature", self.signature]
            finished = run_worker(cmd, cwd=work, timeout=self.timeout)
            if finished.timed_out:
                return RunResult(self.name, "timeout", error=f"no answer in {self.timeout:g} s")
            wall = finished.seconds
            state = read_state(work / "r.json")
            if state is None:
                last = finished.last_line or "no output"
                return RunResult(self.name, "crashed", error=f"{finished.how}: {last}")
            if state.get("stage") != "done":
                return RunResult(self.name, "run_error", error=state.get("error"))
            labels = state["output_names"]
            outputs, how = [], "name"
            for produced in read_output_sets(work / "out.npz", state["sets"], labels):
                matched, how = match_outputs(produced, self.wanted)
                outputs.append(matched)
        return RunResult(
            self.name,
            "ok",
            outputs=outputs,
            executed={
                "runtime": state.get("framework"),
                "device": "CPU",
                "precision": "fp32",
                "source": str(self.source),
                "outputs_matched_by": how,
            },
            compile_seconds=state.get("load_seconds"),
            infer_seconds=state.get("infer_seconds", []),
            notes=[f"TensorFlow child process wall time {wall:.1f} s (import included)"],
        )
