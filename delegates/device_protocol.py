"""The device job protocol, host side: write a job folder, read a result folder.

A job folder holds the model, the input sets (``.npy`` or raw little-endian buffers described in
``job.json``) and ``job.json``; a result folder holds the outputs (``.npy``) and ``result.json``.
The harnesses (``tflkit/harness/linux_harness.py``, the Android app, the browser harness of
``tflkit.delegates.browser``) implement the other half. The format is documented in
``android_harness/PROTOCOL.md`` with JSON schemas in ``android_harness/protocol/*.schema.json``.

Not the runner protocol (``delegates/protocol.py``): this is the device job's folder format,
which the device transports (``tflkit.harness``) and the browser runtime share.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.errors import TflkitError, UsageError

# a backend's status is a runner's: passed on as is
from .backends import BACKENDS, BROWSER_BACKENDS, RECORD_BACKENDS, WEBGPU_BACKENDS
from .protocol import STATUSES

__all__ = [
    "BACKENDS",
    "BROWSER_BACKENDS",
    "DTYPES",
    "JOB_SCHEMA",
    "RECORD_BACKENDS",
    "RESULT_SCHEMA",
    "WEBGPU_BACKENDS",
    "BackendResult",
    "DeviceResult",
    "JobOptions",
    "ProtocolError",
    "read_document",
    "read_result",
    "write_job",
]

JOB_SCHEMA = "tflkit.device-job/1"
RESULT_SCHEMA = "tflkit.device-result/1"
DTYPES = ("int8", "uint8", "int16", "int32", "int64", "bool", "float16", "float32")


class ProtocolError(TflkitError):
    """A job or result folder that does not follow the protocol."""


@dataclass
class JobOptions:
    """What the device runs: backends, CPU threads, warm-up and timed runs, dumps, timeout."""

    backends: Sequence[str] = RECORD_BACKENDS
    signature: str | None = None
    threads: int | None = None
    warmup_runs: int = 1
    timed_runs: int = 1
    timeout_seconds: float = 300.0
    dump_tensors: Sequence[str] = ()
    input_format: str = "npy"
    #: the job's ``browser`` field (protocol 1.1, browser harness: repeats, webgpu_device, ...)
    browser: Mapping[str, Any] | None = None

    def check(self) -> None:
        known = BACKENDS + BROWSER_BACKENDS
        unknown = [b for b in self.backends if b not in known]
        if unknown or not self.backends:
            raise UsageError(f"backends must be among {', '.join(known)}, got {unknown}")
        if self.input_format not in ("npy", "raw"):
            raise UsageError(f"input format must be npy or raw, got {self.input_format!r}")
        if self.warmup_runs < 0 or self.timed_runs < 1:
            raise UsageError("warm-up runs must be >= 0 and timed runs >= 1")


def _array_entry(folder: Path, rel: str, array: np.ndarray, fmt: str) -> dict[str, Any]:
    array = np.ascontiguousarray(array)
    if array.dtype.name not in DTYPES:
        raise UsageError(f"dtype {array.dtype} is not in the protocol ({', '.join(DTYPES)})")
    path = folder / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "npy":
        np.save(path, array, allow_pickle=False)
    else:
        array.astype(array.dtype.newbyteorder("<")).tofile(path)
    return {"name": None, "dtype": array.dtype.name, "shape": list(array.shape), "file": rel}


def write_job(
    dest: str | os.PathLike[str],
    model: bytes,
    feeds: Sequence[Mapping[str, np.ndarray]],
    options: JobOptions | None = None,
    *,
    job_id: str | None = None,
) -> Path:
    """Write a job folder at ``dest`` (which must not exist), atomically; return its path."""
    options = options or JobOptions()
    options.check()
    if not feeds:
        raise UsageError("a job needs at least one input set")
    dest = Path(dest)
    if dest.exists():
        raise UsageError(f"{dest} already exists; refusing to overwrite it")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}-"))
    try:
        (tmp / "model.tflite").write_bytes(model)
        suffix = ".npy" if options.input_format == "npy" else ".bin"
        sets = []
        for s, feed in enumerate(feeds):
            entries = []
            for k, (name, array) in enumerate(feed.items()):
                entry = _array_entry(tmp, f"inputs/{s}/{k}{suffix}", array, options.input_format)
                entry["name"] = name
                entries.append(entry)
            sets.append(entries)
        job = {
            "schema": JOB_SCHEMA,
            "id": job_id or f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}",
            "model": {"file": "model.tflite", "sha256": hashlib.sha256(model).hexdigest()},
            "signature": options.signature,
            "input_format": options.input_format,
            "input_sets": sets,
            "backends": list(options.backends),
            "threads": options.threads,
            "warmup_runs": options.warmup_runs,
            "timed_runs": options.timed_runs,
            "timeout_seconds": options.timeout_seconds,
            "dump_tensors": list(options.dump_tensors),
        }
        if options.browser is not None:
            job["browser"] = dict(options.browser)
        (tmp / "job.json").write_text(json.dumps(job, indent=1) + "\n")
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


@dataclass
class BackendResult:
    """One backend's record from ``result.json`` with its arrays loaded (one dict per input set)."""

    backend: str
    status: str
    record: dict[str, Any]
    outputs: list[dict[str, np.ndarray]] = field(default_factory=list)
    dumps: list[dict[str, np.ndarray]] = field(default_factory=list)

    @property
    def error(self) -> str | None:
        return self.record.get("error")


@dataclass
class DeviceResult:
    """A whole result folder."""

    path: Path
    document: dict[str, Any]
    backends: dict[str, BackendResult]

    @property
    def device(self) -> dict[str, Any]:
        return self.document.get("device", {})

    @property
    def harness(self) -> dict[str, Any]:
        return self.document.get("harness", {})


def _load_arrays(folder: Path, sets: Sequence[Sequence[Mapping[str, Any]]]) -> list[dict]:
    loaded = []
    for entries in sets:
        arrays = {}
        for entry in entries:
            path = folder / entry["file"]
            if path.suffix != ".npy" or ".." in Path(entry["file"]).parts:
                raise ProtocolError(f"result file {entry['file']!r} is not an .npy in the folder")
            try:
                array = np.load(path, allow_pickle=False)
            except (OSError, ValueError) as exc:
                raise ProtocolError(f"cannot read {path}: {exc}") from None
            if array.dtype.name != entry["dtype"] or list(array.shape) != list(entry["shape"]):
                raise ProtocolError(
                    f"{path} holds {array.dtype}{list(array.shape)}, result.json says "
                    f"{entry['dtype']}{list(entry['shape'])}"
                )
            arrays[entry["name"]] = array
        loaded.append(arrays)
    return loaded


def read_document(path: Path) -> dict[str, Any]:
    """A protocol JSON document (``job.json``, ``result.json``); :class:`ProtocolError` when it
    cannot be read or parsed."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ProtocolError(f"cannot read {path}: {exc}") from None


def read_result(path: str | os.PathLike[str]) -> DeviceResult:
    """Read a result folder written by a harness; raise :class:`ProtocolError` if malformed."""
    folder = Path(path)
    document = read_document(folder / "result.json")
    if document.get("schema") != RESULT_SCHEMA:
        raise ProtocolError(
            f"{folder / 'result.json'}: schema {document.get('schema')!r}, expected {RESULT_SCHEMA}"
        )
    backends = {}
    for record in document.get("backends", []):
        status = record.get("status")
        if status not in STATUSES:
            raise ProtocolError(f"backend {record.get('backend')}: unknown status {status!r}")
        backends[record["backend"]] = BackendResult(
            record["backend"],
            status,
            record,
            outputs=_load_arrays(folder, record.get("outputs") or []),
            dumps=_load_arrays(folder, record.get("dumps") or []),
        )
    return DeviceResult(folder, document, backends)
