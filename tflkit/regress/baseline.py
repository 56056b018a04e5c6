"""A baseline on disk: ``manifest.json`` (sorted keys) + ``arrays.npz``, written atomically.

The layout is meant to be committed to a user's repository and diffed in review:

- ``manifest.json``: schema, model (file name, sha256, op histogram), inputs and outputs, per
  runner what executed and its tolerance, GPU residency (static and probed), versions. JSON with
  sorted keys and a trailing newline, so a re-record with nothing changed is byte-identical.
- ``arrays.npz``: ``inputs/<name>`` (the input sets stacked on a leading axis) and
  ``outputs/<runner>/<name>``; the zip entries carry a fixed date, so the same arrays give the
  same bytes.
- ``latency.json`` (only with ``--latency``): timings and the device they were measured on; it
  changes every run, so it lives apart from the deterministic files.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.errors import UsageError
from tflkit.fsio import dir_mode

__all__ = ["BASELINE_SCHEMA", "Baseline", "check_target", "read_baseline", "write_baseline"]

BASELINE_SCHEMA = "tflkit.baseline/1"
MANIFEST = "manifest.json"
ARRAYS = "arrays.npz"
LATENCY = "latency.json"
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


@dataclass
class Baseline:
    """A recorded baseline: the manifest, the arrays, and (optionally) latency."""

    manifest: dict[str, Any]
    inputs: list[dict[str, np.ndarray]]
    outputs: dict[str, dict[str, np.ndarray]]
    latency: dict[str, Any] | None = None
    path: Path | None = field(default=None, compare=False)

    @property
    def runners(self) -> list[str]:
        return list(self.manifest["runners"])

    def runner_output(self, runner: str, name: str) -> np.ndarray | None:
        """The stacked outputs ``name`` of ``runner`` (one row per input set), if recorded."""
        return self.outputs.get(runner, {}).get(name)


def check_target(output: Path, model: Path, *, force: bool) -> None:
    """A usage error, before anything runs, when recording ``model`` into ``output`` would
    replace a baseline without ``force`` or overwrite the model itself."""
    if (output / "manifest.json").is_file() and not force:
        raise UsageError(
            f"{output} already holds a baseline: use `tflkit regress update` or "
            "--force to replace it"
        )
    if output.resolve() == model.resolve():
        raise UsageError("refusing to overwrite the input model with a baseline")


def dumps_manifest(manifest: Mapping[str, Any]) -> bytes:
    """Diff-friendly JSON: sorted keys, two-space indent, trailing newline."""
    return (json.dumps(manifest, indent=2, sort_keys=True, allow_nan=False) + "\n").encode()


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """An ``.npz`` (readable by ``np.load``) whose bytes depend only on the arrays."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for key in sorted(arrays):
            payload = io.BytesIO()
            np.lib.format.write_array(
                payload, np.ascontiguousarray(arrays[key]), allow_pickle=False
            )
            info = zipfile.ZipInfo(f"{key}.npy", date_time=_ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            info.create_system = 3
            archive.writestr(info, payload.getvalue(), compresslevel=6)
    return buffer.getvalue()


def _arrays(baseline: Baseline) -> dict[str, np.ndarray]:
    names = list(baseline.inputs[0]) if baseline.inputs else []
    arrays = {f"inputs/{n}": np.stack([feed[n] for feed in baseline.inputs]) for n in names}
    for runner, outputs in baseline.outputs.items():
        for name, array in outputs.items():
            arrays[f"outputs/{runner}/{name}"] = array
    return arrays


def write_baseline(baseline: Baseline, directory: str | os.PathLike[str]) -> Path:
    """Write ``baseline`` into ``directory`` atomically (a temp dir renamed into place).

    An existing baseline there is replaced only once the new one is complete.
    """
    target = Path(directory)
    if target.exists() and not target.is_dir():
        raise UsageError(f"{target} exists and is not a directory")
    if target.is_dir() and any(target.iterdir()) and not (target / MANIFEST).is_file():
        raise UsageError(f"{target} is not empty and holds no baseline; refusing to replace it")
    target.parent.mkdir(parents=True, exist_ok=True)
    npz = npz_bytes(_arrays(baseline))
    manifest = dict(baseline.manifest)
    manifest["files"] = {ARRAYS: hashlib.sha256(npz).hexdigest()}
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        (tmp / ARRAYS).write_bytes(npz)
        (tmp / MANIFEST).write_bytes(dumps_manifest(manifest))
        if baseline.latency is not None:
            (tmp / LATENCY).write_bytes(dumps_manifest(baseline.latency))
        os.chmod(tmp, dir_mode())  # mkdtemp makes 0700
        if target.exists():
            old = target.with_name(f".{target.name}.old-{os.getpid()}")
            os.rename(target, old)
            os.rename(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            shutil.rmtree(tmp)
        raise
    baseline.manifest = manifest
    baseline.path = target
    return target


def read_baseline(directory: str | os.PathLike[str]) -> Baseline:
    """Load a baseline directory; a missing or damaged one is a :class:`UsageError`."""
    path = Path(directory)
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        raise UsageError(
            f"{path} is not a baseline (no {MANIFEST}); record one with "
            "`tflkit regress record MODEL -o DIR`"
        )
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"{manifest_path}: cannot read the manifest ({exc})") from None
    schema = manifest.get("schema") if isinstance(manifest, dict) else None
    if schema != BASELINE_SCHEMA:
        raise UsageError(f"{manifest_path}: schema {schema!r} is not {BASELINE_SCHEMA!r}")
    try:
        data = (path / ARRAYS).read_bytes()
    except OSError as exc:
        raise UsageError(f"{path / ARRAYS}: {exc.strerror or exc}") from None
    expected = manifest.get("files", {}).get(ARRAYS)
    if expected and hashlib.sha256(data).hexdigest() != expected:
        raise UsageError(f"{path / ARRAYS} does not match the manifest's sha256 (edited by hand?)")
    inputs: dict[str, np.ndarray] = {}
    outputs: dict[str, dict[str, np.ndarray]] = {}
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        for key in npz.files:
            kind, _, rest = key.partition("/")
            if kind == "inputs":
                inputs[rest] = npz[key]
            elif kind == "outputs":
                runner, _, name = rest.partition("/")
                outputs.setdefault(runner, {})[name] = npz[key]
    count = int(manifest.get("inputs", {}).get("count", 0))
    feeds = [{n: a[k] for n, a in inputs.items()} for k in range(count)]
    latency = None
    if (path / LATENCY).is_file():
        try:
            latency = json.loads((path / LATENCY).read_text())
        except ValueError as exc:
            raise UsageError(f"{path / LATENCY}: {exc}") from None
    return Baseline(manifest, feeds, outputs, latency, path)
