"""The probe's disk cache: results keyed by (model sha256, ai-edge-litert version, options),
the JSON of a ``ProbeResult`` with its arrays in a sibling ``.npz``."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.fsio import write_atomic
from tflkit.gpu.probe_result import ProbeResult

#: Part of every cache key: raise it when what a cached result means changes.
PROTOCOL = 1


def default_cache_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The probe cache directory: ``cache_dir`` when given, else ``~/.cache/tflkit/probe``."""
    if cache_dir is not None:
        return Path(cache_dir)
    return Path.home() / ".cache" / "tflkit" / "probe"


def litert_version() -> str:
    """Installed ai-edge-litert version, part of every cache key."""
    try:
        return importlib.metadata.version("ai-edge-litert")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def inputs_digest(normalized: tuple[list[np.ndarray], list[str] | None] | None) -> str | None:
    if normalized is None:
        return None
    h = hashlib.sha256()
    arrays, names = normalized
    h.update(json.dumps(names).encode())
    for a in arrays:
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def sets_digest(sets: list[tuple[list[np.ndarray], list[str] | None]] | None) -> str | None:
    if sets is None:
        return None
    return hashlib.sha256("".join(str(inputs_digest(one)) for one in sets).encode()).hexdigest()


def cache_key(sha: str, version: str, options: dict[str, Any]) -> str:
    blob = json.dumps(
        {"protocol": PROTOCOL, "model": sha, "litert": version, **options}, sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def cache_load(entry: Path) -> ProbeResult | None:
    meta = entry.with_suffix(".json")
    if not meta.is_file():
        return None
    try:
        data = json.loads(meta.read_text())
        arrays = load_arrays(entry.with_suffix(".npz"), data) if data.get("ran") else None
        result = ProbeResult.from_json_dict(data, arrays)
    except (OSError, ValueError, TypeError, KeyError):
        return None
    result.from_cache = True
    return result


def cache_store(entry: Path, result: ProbeResult, npz: Path | None) -> None:
    """Arrays first, then the JSON that makes the entry visible to readers."""
    if npz is not None and npz.is_file():
        data = npz.read_bytes()
        write_atomic(entry.with_suffix(".npz"), data)
    write_atomic(entry.with_suffix(".json"), json.dumps(result.to_json_dict(), sort_keys=True))


def load_arrays(npz: Path, state: dict[str, Any]) -> dict[str, dict[str, np.ndarray]]:
    specs_in = state.get("input_specs") or state.get("inputs") or []
    specs_out = state.get("output_specs") or state.get("outputs") or []
    result: dict[str, Any] = {"inputs": {}, "outputs": {}}
    if not npz.is_file():
        return result
    with np.load(npz, allow_pickle=False) as data:
        count = state.get("sets") or 0
        if count:
            result["sets"] = {
                k: {
                    spec["name"]: data[f"s{k}_out_{i}"]
                    for i, spec in enumerate(specs_out)
                    if f"s{k}_out_{i}" in data.files
                }
                for k in range(count)
            }
        for i, spec in enumerate(specs_in):
            if f"in_{i}" in data.files:
                result["inputs"][spec["name"]] = data[f"in_{i}"]
        for i, spec in enumerate(specs_out):
            if f"out_{i}" in data.files:
                result["outputs"][spec["name"]] = data[f"out_{i}"]
    return result


def cacheable(result: ProbeResult) -> bool:
    """Timeouts depend on load and a missing adapter on the machine: never cache those."""
    return (
        not result.timed_out
        and result.log.fatal_kind != "no_adapter"
        and (result.log.adapter is not None or result.compiled)
    )
