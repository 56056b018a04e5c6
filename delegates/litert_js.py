"""LiteRT.js in headless Chromium: the ``webgpu-fp16``, ``webgpu-fp32`` and ``wasm`` runners.

The three runners share one :class:`BrowserSession`: the first to be asked writes the input sets
and runs one browser job for every browser runner of the validation (the LiteRT.js runtime of
:mod:`tflkit.delegates.browser`, in a child started from
:func:`tflkit.delegates._browser_worker.main`, in a process group of its own with a timeout), and
each reads its backend's record back. A runner only turns inputs into outputs and records what
executed: the WebGPU adapter, LiteRT.js's ``isFullyAccelerated``, the ops delegated, the I/O path,
and the run-to-run repeats (each input set runs at least 3 times; ``executed["repeats"]["stable"]``
is False when the runs differ, which ``validate`` reports as a finding of its own).

:func:`browser_run_result` turns one backend record of a browser result (protocol 1.1) into a
:class:`RunResult`; ``device validate`` uses it for ``--device browser`` too, so both paths
report the same facts.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.gpu.log import parse_gpu_log

from .protocol import Feed, RunnerSpec, RunnerUnavailable, RunResult, harness_timings

__all__ = [
    "BrowserSession",
    "LiteRtJsRunner",
    "browser_run_result",
    "read_browser_result",
]

#: seconds for Chromium to start and LiteRT.js to load, beyond the backends' own time
_OVERHEAD_S = 120.0


def _adapter(gpu: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("name", "vendor", "backend", "type", "architecture", "is_fallback_adapter")
    adapter = {k: gpu.get(k) for k in keys}
    adapter["software"] = bool(gpu.get("software"))
    for key in ("feature_level", "shader_f16", "adapter_mode", "webgpu_device"):
        adapter[key] = gpu.get(key)
    return adapter


def browser_run_result(
    name: str,
    spec: RunnerSpec,
    record: Mapping[str, Any],
    outputs: list[dict[str, np.ndarray]],
    document: Mapping[str, Any],
    where: str,
) -> RunResult:
    """One backend ``record`` of a browser result (``document``: the whole ``result.json``) as
    the :class:`RunResult` of runner ``name`` (``spec``: the registry's for its backend);
    ``where``: the device, e.g. ``browser:lavapipe``."""
    status = record.get("status") or "run_error"
    gpu_backend = spec.id.backend == "webgpu"
    harness = document.get("harness") or {}
    device = document.get("device") or {}
    executed: dict[str, Any] = {
        "runtime": harness.get("runtime"),
        "device": f"{'WebGPU (ML Drift)' if gpu_backend else 'CPU (XNNPACK in Wasm)'} on {where}",
        "precision": spec.precision,
        "harness": harness.get("kind"),
        "browser": device.get("browser"),
        "webgpu_adapter_mode": device.get("webgpu_adapter_mode"),
        "fully_accelerated": record.get("fully_accelerated"),
        "ops_total": record.get("ops_total"),
        "ops_delegated": record.get("ops_delegated"),
        "io_path": record.get("io_path"),
        "api_error": record.get("api_error"),
        "webgpu_errors": list(record.get("webgpu_errors") or []),
        "repeats": record.get("repeats"),
        "device_info": device,
    }
    gpu = record.get("gpu")
    if gpu:
        executed["adapter"] = _adapter(gpu)
    if gpu_backend and record.get("delegate_log"):
        # Chromium's console lines carry their level ("error: ", "log: ") before LiteRT's text
        text = "\n".join(
            re.sub(r"^(?:error|warning|log|info|debug): ", "", line)
            for line in record["delegate_log"].splitlines()
        )
        log = parse_gpu_log(text)
        executed["cpu_fallback"] = [
            {"op": r.op_type, "reason": r.reason, "detail": r.detail} for r in log.rejections
        ]
    return RunResult(
        name,
        status,
        outputs=outputs if status == "ok" else [],
        unreadable=dict(record.get("unreadable") or {}),
        executed=executed,
        **harness_timings(record),
        error=record.get("error") if status != "ok" else None,
        notes=_notes(record, executed, status),
        wall_seconds=float(record.get("wall_seconds") or 0.0),
    )


def _notes(record: Mapping[str, Any], executed: Mapping[str, Any], status: str) -> list[str]:
    notes = []
    adapter = executed.get("adapter")
    if adapter and adapter.get("software"):
        notes.append(
            f"the WebGPU adapter is a software renderer ({adapter['name']}, "
            f"{adapter.get('feature_level')} WebGPU): correct numerics, not device speed"
        )
    if record.get("fully_accelerated") is False:
        fallback = sorted({f["op"] for f in executed.get("cpu_fallback", [])})
        notes.append(
            "not fully accelerated: some ops ran on LiteRT.js's CPU path"
            + (f" ({', '.join(fallback)})" if fallback else "")
        )
    if record.get("api_error"):
        notes.append(
            "warning: LiteRT.js's public API refuses this model's inputs or outputs "
            f"({record['api_error']}), so a web app using it cannot run the model as is; "
            f"tflkit ran it through the Wasm bindings ({record.get('io_path')})"
        )
    if status == "run_error" and record.get("webgpu_errors"):
        notes.append(
            "unusable: WebGPU refused work while this backend ran, so LiteRT.js's outputs are "
            "wrong even though it raised nothing (in compatibility mode: a device requested "
            "without the adapter's limits)"
        )
    error = record.get("error") or ""
    if status == "unavailable" and "lavapipe" in error:
        notes.append(
            "the lavapipe adapter is missing here: Chromium fell back to SwiftShader, so the "
            "Mesa (>= 25, lavapipe) or ANGLE setup is broken; use --device browser (SwiftShader) "
            "or fix Mesa"
        )
    for output, why in (record.get("unreadable") or {}).items():
        notes.append(f"output {output} cannot be read back on this backend: {why}")
    return notes


def read_browser_result(folder: Path) -> tuple[dict[str, Any], dict[str, list[dict]]]:
    """``result.json`` of a browser result folder and each backend's loaded output sets."""
    document = json.loads((folder / "result.json").read_text())
    outputs: dict[str, list[dict]] = {}
    for record in document.get("backends", []):
        sets = []
        for entries in record.get("outputs") or []:
            sets.append(
                {e["name"]: np.load(folder / e["file"], allow_pickle=False) for e in entries}
            )
        outputs[record["backend"]] = sets
    return document, outputs


class BrowserSession:
    """One browser job for every browser runner of a validation (one Chromium, one page)."""

    def __init__(
        self,
        model: bytes,
        specs: Sequence[RunnerSpec],
        *,
        adapter: str = "swiftshader",
        signature: str | None = None,
        timeout: float = 300.0,
    ) -> None:
        unknown = [s.name for s in specs if s.device != "browser" or s.harness is None]
        if unknown:
            raise ValueError(f"not browser runners: {unknown}")
        self.model = model
        self.specs = {s.name: s for s in specs}
        self.names = list(self.specs)
        self.adapter = adapter
        self.signature = signature
        self.timeout = timeout
        self._lock = threading.Lock()
        self._results: dict[str, RunResult] | None = None

    def result(self, name: str, feeds: Sequence[Feed]) -> RunResult:
        with self._lock:
            if self._results is None:
                self._results = self._run(feeds)
        return self._results[name]

    def _failed(self, status: str, error: str) -> dict[str, RunResult]:
        return {n: RunResult(n, status, error=error) for n in self.names}

    def _run(self, feeds: Sequence[Feed]) -> dict[str, RunResult]:
        from tflkit.proc.child_env import child_env
        from tflkit.proc.worker import own_session, python_command

        from . import _browser_worker

        where = f"browser:{self.adapter}"
        backends = [str(s.harness) for s in self.specs.values()]
        total = self.timeout * len(backends) + _OVERHEAD_S
        work = Path(tempfile.mkdtemp(prefix="tflkit-litertjs-"))
        try:
            (work / "model.tflite").write_bytes(self.model)
            folder = work / "feeds"
            for s, feed in enumerate(feeds):
                (folder / str(s)).mkdir(parents=True)
                for k, array in enumerate(feed.values()):
                    np.save(folder / str(s) / f"{k}.npy", np.asarray(array), allow_pickle=False)
            (folder / "feeds.json").write_text(json.dumps([list(f) for f in feeds]))
            args: list[object] = [work / "model.tflite", folder, work / "result"]
            args += [f"--backend={b}" for b in backends]
            args += [f"--adapter={self.adapter}", f"--timeout={total:g}"]
            args += [f"--backend-timeout={self.timeout:g}"]
            if self.signature is not None:
                args += [f"--signature={self.signature}"]
            cmd = python_command(_browser_worker.main, *args)
            with own_session(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=child_env(),
            ) as proc:
                try:
                    _, err = proc.communicate(timeout=total + 30)
                except subprocess.TimeoutExpired:
                    return self._failed("timeout", f"the browser did not finish in {total:g} s")
            if not (work / "result" / "result.json").is_file():
                lines = [ln for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
                why = lines[-1].removeprefix(_browser_worker.ERROR_PREFIX) if lines else "no output"
                status = "unavailable" if proc.returncode == 4 else "run_error"
                return self._failed(status, f"the browser harness failed: {why}")
            document, outputs = read_browser_result(work / "result")
            records = {r["backend"]: r for r in document.get("backends", [])}
            return {
                n: browser_run_result(
                    n, s, records[str(s.harness)], outputs[str(s.harness)], document, where
                )
                for n, s in self.specs.items()
            }
        finally:
            shutil.rmtree(work, ignore_errors=True)


class LiteRtJsRunner:
    """One LiteRT.js backend in headless Chromium, run through its :class:`BrowserSession`."""

    def __init__(self, session: BrowserSession, spec: RunnerSpec) -> None:
        if spec.name not in session.names:
            raise RunnerUnavailable(f"{spec.name} is not a runner of this browser session")
        self.session = session
        self.name = spec.name

    def activate(self) -> None:
        """Nothing here: the session starts the browser when the first runner infers."""

    def infer(self, feeds: Sequence[Feed]) -> RunResult:
        return self.session.result(self.name, feeds)

    def deactivate(self) -> None:
        """Nothing held: the browser's process is gone."""
