"""The browser harness's result folder: the page's records -> ``RESULT_DIR`` as
``android_harness/PROTOCOL.md`` says (``result.json`` last and atomically).

A backend whose compile or runs made WebGPU report an error (an uncaptured error, an error
scope, or Chromium's console line, e.g. "The total number of workgroup invocations (256) exceeds
the maximum allowed (128)") is ``run_error`` with that line, never ``ok``: LiteRT.js then returns
numbers without raising, and they are wrong. Each backend keeps the last run's outputs and, per
output, the largest absolute difference of every run to the first one (``repeats``).
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.fsio import write_atomic
from tflkit.gpu.log import parse_gpu_log

from ..device_protocol import (
    BROWSER_BACKENDS,
    DTYPES,
    RESULT_SCHEMA,
    WEBGPU_BACKENDS,
    DeviceResult,
    read_result,
)
from .page_run import Backends, Console, unavailable

__all__ = ["HARNESS_VERSION", "write_result"]

HARNESS_VERSION = "1"
LOG_CHARS = 20000

#: Console lines in which WebGPU (Dawn, via Chromium) says a pipeline or command was refused.
_GPU_ERROR = re.compile(
    r"exceeds the maximum allowed|is invalid due to a previous error|Invalid (?:Compute|Render)"
    r"Pipeline|Invalid (?:BindGroup|ShaderModule|CommandBuffer|Buffer)\b|Device was lost|"
    r"\[Device\] is lost|WebGPU: too many warnings|Error while parsing WGSL",
)


def _count_ops(model: bytes) -> int | None:
    """Operators in every subgraph (the Linux harness's count)."""
    try:
        from ai_edge_litert import schema_py_generated as schema

        root = schema.Model.GetRootAsModel(model, 0)
        return sum(root.Subgraphs(i).OperatorsLength() for i in range(root.SubgraphsLength()))
    except Exception:
        return None


def _gpu_record(webgpu: Mapping[str, Any] | None, adapter: str) -> dict[str, Any] | None:
    if not webgpu:
        return None
    description = webgpu.get("description") or ""
    architecture = webgpu.get("architecture") or ""
    software = bool(webgpu.get("is_fallback_adapter")) or any(
        word in f"{description} {architecture}".lower()
        for word in ("swiftshader", "llvmpipe", "lavapipe", "softpipe")
    )
    level = webgpu.get("feature_level")
    return {
        "name": description or architecture or "(the browser does not say)",
        "vendor": webgpu.get("vendor") or "",
        "backend": f"WebGPU ({level})",
        "type": "fallback adapter" if webgpu.get("is_fallback_adapter") else "adapter",
        "software": software,
        "architecture": architecture,
        "is_fallback_adapter": bool(webgpu.get("is_fallback_adapter")),
        "feature_level": level,
        "shader_f16": webgpu.get("shader_f16"),
        "adapter_mode": adapter,
        "webgpu_device": webgpu.get("webgpu_device"),
        "max_compute_invocations_per_workgroup": (webgpu.get("device_limits") or {}).get(
            "maxComputeInvocationsPerWorkgroup"
        ),
        "adapter_max_compute_invocations_per_workgroup": (webgpu.get("adapter_limits") or {}).get(
            "maxComputeInvocationsPerWorkgroup"
        ),
    }


def _max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    if a.shape != b.shape:
        return float("inf")
    if a.dtype == np.bool_:
        return float(np.count_nonzero(a != b))
    x, y = a.astype(np.float64), b.astype(np.float64)
    same_nan = np.isnan(x) & np.isnan(y)
    diff = np.abs(x - y)
    diff[same_nan] = 0.0
    return float(np.nan_to_num(diff, nan=np.inf).max()) if diff.size else 0.0


def _collect_outputs(record: dict[str, Any], work: Path, session: int, result_dir: Path) -> None:
    """Read the posted runs, keep the last run's outputs as .npy, measure run-to-run drift."""
    backend = record["backend"]
    metas = record.get("outputs_meta") or []
    unreadable = dict(record.get("unreadable") or {})
    manifest: list[list[dict[str, Any]]] = []
    drift: list[dict[str, list[float]]] = []
    for s, runs in enumerate(record.get("runs") or []):
        shapes = (record.get("shapes") or [])[s] if s < len(record.get("shapes") or []) else []
        entries, set_drift = [], {}
        for k, meta in enumerate(metas):
            name, dtype = meta["name"], meta["dtype"]
            if name in unreadable:
                continue
            if dtype not in DTYPES:
                unreadable[name] = f"dtype {dtype} is not in the protocol"
                continue
            shape = shapes[k] if k < len(shapes) and shapes[k] is not None else meta["shape"]
            arrays = []
            for r in range(runs):
                path = work / "out" / str(session) / backend / str(s) / str(r) / f"{k}.bin"
                try:
                    raw = np.fromfile(path, dtype=np.dtype(dtype).newbyteorder("<"))
                except OSError:
                    unreadable[name] = f"the page posted no data for run {r} of input set {s}"
                    break
                if raw.size != int(np.prod(shape, dtype=np.int64)):
                    unreadable[name] = (
                        f"the page posted {raw.size} {dtype} values for shape {list(shape)}"
                    )
                    break
                arrays.append(raw.astype(np.dtype(dtype)).reshape(shape))
            if name in unreadable:
                continue
            set_drift[name] = [_max_abs_diff(a, arrays[0]) for a in arrays[1:]]
            rel = f"outputs/{backend}/{s}/{k}.npy"
            path = result_dir / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, arrays[-1], allow_pickle=False)
            entries.append({"name": name, "dtype": dtype, "shape": list(shape), "file": rel})
        manifest.append(entries)
        drift.append(set_drift)
    record["outputs"] = manifest
    record["unreadable"] = unreadable
    worst = max((d for one in drift for ds in one.values() for d in ds), default=0.0)
    record["repeats"] = {
        "runs": list(record.get("runs") or []),
        "max_abs_diff_to_first": drift,
        "max_abs_diff": worst,
        "stable": worst == 0.0,
    }


def _finish_record(
    raw: dict[str, Any],
    *,
    console: Console,
    ops_total: int | None,
    facts: Mapping[str, Any],
    adapter: str,
) -> dict[str, Any]:
    """The page's record -> the protocol's backend record (outputs filled in later)."""
    backend = raw["backend"]
    host_lines = console.by_backend.get(backend, [])
    page_lines = raw.get("console") or []
    log_lines = host_lines or page_lines
    log = "\n".join(log_lines)
    status, error = raw.get("status"), raw.get("error")
    gpu_errors = list(raw.get("gpu_errors") or [])
    is_gpu = backend in WEBGPU_BACKENDS
    if is_gpu:
        seen = [ln for ln in host_lines if _GPU_ERROR.search(ln)]
        for line in seen:
            gpu_errors.append({"backend": backend, "kind": "console", "message": line})
        if status == "ok" and seen:
            status = "run_error"
            error = (
                "WebGPU refused work while this backend ran, so its outputs cannot be trusted: "
                + seen[0].splitlines()[0][:400]
            )
    fully = raw.get("fully_accelerated")
    # LiteRT's own summary line in the console, else all ops when it says fully accelerated
    summaries = parse_gpu_log(log).summaries if is_gpu else [(0, 0)]
    delegated = summaries[0][0] if summaries else (ops_total if fully else None)
    record: dict[str, Any] = {
        "backend": backend,
        "status": status,
        "error": error,
        "compile_seconds": raw.get("compile_seconds"),
        "warmup_seconds": raw.get("warmup_seconds") or [],
        "run_seconds": raw.get("run_seconds") or [],
        "fully_accelerated": fully,
        "ops_total": ops_total,
        "ops_delegated": delegated,
        "delegate_log": log[-LOG_CHARS:],
        "gpu": _gpu_record(facts.get("webgpu"), adapter) if is_gpu else None,
        "outputs": [],
        "unreadable": raw.get("unreadable") or {},
        "dumps": [],
        # browser-only fields (PROTOCOL.md, version 1.1)
        "io_path": raw.get("io_path"),
        "api_error": raw.get("api_error"),
        "webgpu_errors": [f"{e.get('kind')}: {e.get('message')}"[:1000] for e in gpu_errors],
        "outputs_meta": raw.get("outputs") or [],
        "runs": raw.get("runs") or [],
        "shapes": raw.get("shapes") or [],
    }
    return record


def write_result(
    job: dict[str, Any],
    model: bytes,
    result_dir: Path,
    work: Path,
    backends: Backends,
    console: Console,
    *,
    adapter: str,
    litertjs_version: str,
    wall: float,
) -> DeviceResult:
    records, session_of, facts = backends.records, backends.session_of, backends.facts
    result_dir.mkdir(parents=True, exist_ok=True)
    ops_total = _count_ops(model)
    out: list[dict[str, Any]] = []
    for backend in job["backends"]:
        raw = records.get(backend) or unavailable(backend, "the page never ran it")
        if backend in BROWSER_BACKENDS and "console" in raw:
            record = _finish_record(
                raw, console=console, ops_total=ops_total, facts=facts, adapter=adapter
            )
            if record["status"] == "ok":
                _collect_outputs(record, work, session_of[backend], result_dir)
            for key in ("outputs_meta", "runs", "shapes"):
                record.pop(key, None)
        else:
            record = {**raw}
            record.setdefault("outputs", [])
            if backend in BROWSER_BACKENDS:
                record.setdefault("delegate_log", "\n".join(console.by_backend.get(backend, [])))
        out.append(record)
    uname = platform.uname()
    device = {
        "os": f"{uname.system} {uname.release}",
        "machine": uname.machine,
        "hostname": uname.node,
        "browser": f"Chromium {facts.get('chromium')}" if facts.get("chromium") else None,
        "user_agent": facts.get("user_agent"),
        "cross_origin_isolated": facts.get("cross_origin_isolated"),
        "hardware_concurrency": facts.get("hardware_concurrency"),
        "webgpu_adapter_mode": adapter,
        "webgpu": facts.get("webgpu"),
        "webgpu_unavailable": facts.get("webgpu_reason"),
        "litertjs": litertjs_version,
        "wasm_build": facts.get("wasm_build"),
    }
    document = {
        "schema": RESULT_SCHEMA,
        "job_id": job.get("id"),
        "model_sha256": job["model"].get("sha256") or hashlib.sha256(model).hexdigest(),
        "harness": {
            "kind": "browser",
            "version": HARNESS_VERSION,
            "runtime": f"LiteRT.js {litertjs_version} (@litertjs/core) in Chromium "
            f"{facts.get('chromium')} headless, WebGPU adapter {adapter}",
        },
        "device": device,
        "backends": out,
        "wall_seconds": wall,
    }
    write_atomic(result_dir / "result.json", json.dumps(document, indent=1) + "\n")
    return read_result(result_dir)
