"""Run one device job in Chromium with LiteRT.js and write the protocol's result folder.

:func:`run_browser_job` is the browser harness's whole host side: it checks the job folder,
fetches LiteRT.js into the cache if needed, serves the job to the page on a one-job local server,
drives a headless Chromium with the flags of the chosen WebGPU adapter, collects what the page
posts, and writes ``RESULT_DIR`` as ``android_harness/PROTOCOL.md`` says (``result.json`` last and
atomically). :func:`write_browser_job` writes a job folder for it with the protocol's
``write_job``.

Backends: ``webgpu_fp32``, ``webgpu_fp16`` (LiteRT.js's WebGPU accelerator, ML Drift, at that
precision) and ``wasm`` (LiteRT.js's CPU path, XNNPACK in Wasm). Any other backend of the job gets
an ``unavailable`` record. Each input set runs ``repeats`` times (3 by default, warm-up runs come
first on set 0); the result keeps the last run's outputs and, per output, the largest absolute
difference of every run to the first one (``repeats`` in the backend record), so a backend whose
answers drift from run to run shows it (LiteRT issue 8065: right only on the first inference).

A backend whose compile or runs made WebGPU report an error (an uncaptured error, an error
scope, or Chromium's console line, e.g. "The total number of workgroup invocations (256) exceeds
the maximum allowed (128)") is ``run_error`` with that line, never ``ok``: LiteRT.js then returns
numbers without raising, and they are wrong.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.fsio import write_atomic
from tflkit.gpu.log import parse_gpu_log
from tflkit.harness.protocol import (
    BROWSER_BACKENDS,
    DTYPES,
    JOB_SCHEMA,
    RESULT_SCHEMA,
    DeviceResult,
    JobOptions,
    ProtocolError,
    read_document,
    read_result,
    write_job,
)

from .chromium import ADAPTERS, CHROMIUM, Chromium
from .errors import BrowserHarnessError, BrowserTimeoutError
from .provision import ensure_litertjs
from .server import JobServer

__all__ = [
    "BROWSER_BACKENDS",
    "HARNESS_VERSION",
    "BrowserOptions",
    "run_browser_job",
    "write_browser_job",
]

HARNESS_VERSION = "1"
WEBGPU_DEVICE_MODES = ("adapter-limits", "default-limits")
WASM_BUILDS = ("jspi", "threads")
LOG_CHARS = 20000
#: Time the page gets to say hello after the browser opened it, within the job's timeout.
HELLO_SECONDS = 60.0

#: Console lines in which WebGPU (Dawn, via Chromium) says a pipeline or command was refused.
_GPU_ERROR = re.compile(
    r"exceeds the maximum allowed|is invalid due to a previous error|Invalid (?:Compute|Render)"
    r"Pipeline|Invalid (?:BindGroup|ShaderModule|CommandBuffer|Buffer)\b|Device was lost|"
    r"\[Device\] is lost|WebGPU: too many warnings|Error while parsing WGSL",
)
_MARKER = re.compile(r"^tflkit: backend (\S+) (start|end)$")

Progress = Callable[[str], None]
#: Opens the page in a browser tflkit does not launch itself (see ``run_browser_job``).
Opener = Callable[..., Any]


@dataclass
class BrowserOptions:
    """The job's ``browser`` field: how the page runs the backends.

    ``repeats``: runs of each input set (at least 2; 3 by default); ``webgpu_device``:
    ``adapter-limits`` (request the device with every limit the adapter has, then hand it to
    LiteRT.js: right) or ``default-limits`` (test only: request it with the default limits, which
    reproduces the WebGPU compatibility-mode trap); ``wasm_build``: ``jspi`` (LiteRT.js's JSPI
    build, needed by partially delegated models; one thread) or ``threads`` (the threaded Wasm
    build; models the GPU takes partly then fail with "Asyncify is not defined"); ``raw_io``:
    read and write tensors of dtypes the public API refuses (int64, bool, ...) through the Wasm
    bindings instead of calling the backend unavailable.
    """

    repeats: int = 3
    webgpu_device: str = "adapter-limits"
    wasm_build: str = "jspi"
    raw_io: bool = True

    def check(self) -> None:
        if self.repeats < 2:
            raise BrowserHarnessError("browser.repeats must be at least 2 (run-to-run drift)")
        if self.webgpu_device not in WEBGPU_DEVICE_MODES:
            raise BrowserHarnessError(
                f"browser.webgpu_device must be one of {', '.join(WEBGPU_DEVICE_MODES)}"
            )
        if self.wasm_build not in WASM_BUILDS:
            raise BrowserHarnessError(f"browser.wasm_build must be one of {', '.join(WASM_BUILDS)}")

    @classmethod
    def from_job(cls, job: Mapping[str, Any]) -> BrowserOptions:
        raw = job.get("browser") or {}
        if not isinstance(raw, dict):
            raise ProtocolError("job.json: 'browser' must be an object")
        known = {
            k: raw[k] for k in ("repeats", "webgpu_device", "wasm_build", "raw_io") if k in raw
        }
        options = cls(**known)
        options.check()
        return options


def write_browser_job(
    dest: str | os.PathLike[str],
    model: bytes,
    feeds: Sequence[Mapping[str, np.ndarray]],
    *,
    backends: Sequence[str] = BROWSER_BACKENDS,
    signature: str | None = None,
    warmup_runs: int = 1,
    timeout_seconds: float = 300.0,
    threads: int | None = None,
    browser: BrowserOptions | None = None,
    job_id: str | None = None,
) -> Path:
    """A job folder for the browser harness at ``dest`` (which must not exist): raw inputs, the
    browser backends and the ``browser`` field, written by the protocol's ``write_job``."""
    browser = browser or BrowserOptions()
    browser.check()
    unknown = [b for b in backends if b not in BROWSER_BACKENDS]
    if unknown or not backends:
        raise BrowserHarnessError(
            f"browser backends must be among {', '.join(BROWSER_BACKENDS)}, got {list(backends)}"
        )
    if Path(dest).exists():
        raise BrowserHarnessError(f"{dest} already exists; refusing to overwrite it")
    options = JobOptions(
        backends=tuple(backends),
        signature=signature,
        threads=threads,
        warmup_runs=warmup_runs,
        timed_runs=browser.repeats,
        timeout_seconds=timeout_seconds,
        input_format="raw",
        browser=asdict(browser),
    )
    return write_job(dest, model, feeds, options, job_id=job_id)


# -- the job folder -------------------------------------------------------------------------------


def _load_job(job_dir: Path) -> dict[str, Any]:
    job = read_document(job_dir / "job.json")
    if job.get("schema") != JOB_SCHEMA:
        raise ProtocolError(
            f"job.json schema is {job.get('schema')!r}; the browser harness reads {JOB_SCHEMA}"
        )
    model = job_dir / job["model"]["file"]
    if not model.is_file():
        raise ProtocolError(f"the model file {job['model']['file']} is missing from the job")
    want = job["model"].get("sha256")
    if want and hashlib.sha256(model.read_bytes()).hexdigest() != want:
        raise ProtocolError(f"{model} does not match the job's sha256")
    if not job.get("backends"):
        raise ProtocolError("job.json names no backend")
    for s, entries in enumerate(job.get("input_sets") or [[]]):
        for entry in entries:
            _check_input(job_dir, entry, s)
    if not job.get("input_sets"):
        raise ProtocolError("job.json has no input set")
    return job


def _check_input(job_dir: Path, entry: Mapping[str, Any], s: int) -> None:
    rel = entry.get("file", "")
    if Path(rel).is_absolute() or ".." in Path(rel).parts:
        raise ProtocolError(f"input file {rel!r} leaves the job folder")
    if entry.get("dtype") not in DTYPES:
        raise ProtocolError(f"input {entry.get('name')!r}: dtype {entry.get('dtype')!r}")
    path = job_dir / rel
    if not path.is_file():
        raise ProtocolError(f"input set {s}: {rel} is missing")
    if path.suffix != ".npy":
        need = int(np.prod(entry["shape"], dtype=np.int64)) * np.dtype(entry["dtype"]).itemsize
        if path.stat().st_size != need:
            raise ProtocolError(
                f"{rel}: {path.stat().st_size} bytes, {entry['dtype']}{entry['shape']} needs {need}"
            )


def _count_ops(model: bytes) -> int | None:
    """Operators in every subgraph (the Linux harness's count)."""
    try:
        from ai_edge_litert import schema_py_generated as schema

        root = schema.Model.GetRootAsModel(model, 0)
        return sum(root.Subgraphs(i).OperatorsLength() for i in range(root.SubgraphsLength()))
    except Exception:
        return None


# -- one run of the page ---------------------------------------------------------------------------


class _Console:
    """Chromium's console lines (Playwright's view: Chromium's own WebGPU warnings included),
    split by backend with the page's ``tflkit: backend NAME start|end`` lines."""

    def __init__(self) -> None:
        self.current: str | None = None
        self.by_backend: dict[str, list[str]] = {}
        self.all: list[str] = []

    def __call__(self, kind: str, text: str) -> None:
        line = f"{kind}: {text}"
        self.all.append(line)
        marker = _MARKER.match(text.strip())
        if marker:
            self.current = marker[1] if marker[2] == "start" else None
            return
        if self.current is not None:
            self.by_backend.setdefault(self.current, []).append(line)

    def tail(self, count: int = 12) -> str:
        lines = [ln for ln in self.all if not ln.startswith(("debug:",))][-count:]
        return " | ".join(ln[:300] for ln in lines) or "(nothing)"


@dataclass
class _Session:
    hello: dict[str, Any] | None = None
    ready: dict[str, Any] | None = None
    fatal: str | None = None
    done: bool = False
    current: str | None = None
    current_start: float = 0.0


@dataclass
class _Backends:
    """What the sessions of one job share: the backends still to run, each one's record and the
    session that ran it, and what the pages said about the browser."""

    pending: list[str]
    records: dict[str, dict[str, Any]]
    session_of: dict[str, int] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)


def run_browser_job(
    job_dir: str | os.PathLike[str],
    result_dir: str | os.PathLike[str],
    *,
    adapter: str = "swiftshader",
    timeout: float = 900.0,
    cache_dir: str | os.PathLike[str] | None = None,
    host: str = "127.0.0.1",
    chromium: str = CHROMIUM,
    npm: str = "npm",
    registry: str | None = None,
    progress: Progress | None = None,
    page_dir: str | os.PathLike[str] | None = None,
    opener: Opener | None = None,
) -> DeviceResult:
    """Run ``job_dir`` in headless Chromium with LiteRT.js; write and return ``result_dir``.

    ``adapter``: ``swiftshader`` or ``lavapipe`` (see ``chromium.ADAPTERS``). ``timeout``: the
    whole job, seconds (each backend also has the job's ``timeout_seconds``). ``cache_dir``: the
    folder LiteRT.js is fetched into (default ``provision.browser_cache_dir()``). ``host``: the
    interface the job's server listens on. ``page_dir``: another page folder (development, tests).
    ``opener``: who opens the page instead of a local headless Chromium (a device's browser, a
    browser the user points at the URL: :mod:`tflkit.harness.browser.remote`); called once per
    session as ``opener(server=..., adapter=..., on_console=...)``, it returns a context manager
    that yields an object shaped like :class:`~tflkit.harness.browser.chromium.Chromium`
    (``open(url)``, ``wait(seconds)``, ``crashed``, ``version``; optional ``hello_seconds``).

    Raises :class:`~tflkit.harness.protocol.ProtocolError` for a bad job folder (exit 2) and
    :class:`~tflkit.harness.browser.errors.BrowserHarnessError` (exit 4) when LiteRT.js cannot be
    fetched, Chromium does not start, or the page never reports within ``timeout``.
    """
    start = time.monotonic()
    say = progress or (lambda line: print(f"tflkit: {line}", file=sys.stderr, flush=True))
    job_dir = Path(job_dir).resolve()
    result_dir = Path(result_dir)
    if adapter not in ADAPTERS:
        raise BrowserHarnessError(
            f"unknown WebGPU adapter {adapter!r}; known: {', '.join(ADAPTERS)}"
        )
    job = _load_job(job_dir)
    options = BrowserOptions.from_job(job)
    if result_dir.exists() and any(result_dir.iterdir()):
        raise BrowserHarnessError(f"{result_dir} exists and is not empty")
    litertjs = ensure_litertjs(
        Path(cache_dir) if cache_dir is not None else None,
        npm=npm,
        registry=registry,
        progress=progress,
    )
    model_bytes = (job_dir / job["model"]["file"]).read_bytes()
    job_start = time.monotonic()  # the job's timeout starts once LiteRT.js is at hand
    records: dict[str, dict[str, Any]] = {}
    for backend in job["backends"]:
        if backend not in BROWSER_BACKENDS:
            records[backend] = _unavailable(
                backend,
                f"the browser harness runs {', '.join(BROWSER_BACKENDS)}; {backend} belongs to "
                "the Linux or Android harness",
            )
    backends = _Backends([b for b in job["backends"] if b not in records], records)
    pending = backends.pending
    work = Path(tempfile.mkdtemp(prefix="tflkit-browser-job-"))
    console = _Console()
    try:
        with JobServer(job_dir, job, litertjs.path, work, host=host, page_dir=page_dir) as server:
            session_id = 0
            while pending:
                session_id += 1
                server.session = {
                    "session": session_id,
                    "backends": list(pending),
                    "adapter": {
                        "name": adapter,
                        "feature_level": ADAPTERS[adapter].feature_level,
                        # lavapipe missing: Chromium answers a compatibility request with
                        # SwiftShader; that is not the adapter the user asked for
                        "reject_fallback": adapter != "swiftshader",
                    },
                    "webgpu_device": options.webgpu_device,
                    "repeats": max(options.repeats, int(job.get("timed_runs", 1))),
                    "warmup_runs": int(job.get("warmup_runs", 1)),
                    "wasm_build": options.wasm_build,
                    "raw_io": options.raw_io,
                }
                say(
                    f"browser: {', '.join(pending)} on {adapter} (Chromium, LiteRT.js "
                    f"{litertjs.version})"
                )
                _run_session(
                    server,
                    session_id,
                    backends,
                    console,
                    adapter=adapter,
                    chromium=chromium,
                    job=job,
                    start=job_start,
                    timeout=timeout,
                    say=say,
                    opener=opener,
                )
        result = _write_result(
            job,
            model_bytes,
            result_dir,
            work,
            backends,
            console,
            adapter=adapter,
            litertjs_version=litertjs.version,
            wall=time.monotonic() - start,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result


def _unavailable(backend: str, why: str) -> dict[str, Any]:
    return {"backend": backend, "status": "unavailable", "error": why, "outputs": []}


def _run_session(
    server: JobServer,
    session_id: int,
    backends: _Backends,
    console: _Console,
    *,
    adapter: str,
    chromium: str,
    job: dict[str, Any],
    start: float,
    timeout: float,
    say: Progress,
    opener: Opener | None = None,
) -> None:
    """One Chromium, one page; returns when the page is done, a backend timed out or crashed."""
    pending, records = backends.pending, backends.records
    state = _Session()
    backend_timeout = float(job.get("timeout_seconds", 300.0))
    origin = server.url.split("/", 3)[2]
    extra: tuple[str, ...] = ()
    if not origin.startswith(("127.0.0.1:", "localhost:", "[::1]:")):
        # WebGPU needs a secure context; http on another interface is not one
        extra = (f"--unsafely-treat-insecure-origin-as-secure=http://{origin}",)
    if opener is None:
        launched: Any = Chromium(
            adapter, executable=chromium, on_console=console, extra_flags=extra
        )
    else:
        launched = opener(server=server, adapter=adapter, on_console=console)
    with launched as browser:
        backends.facts.setdefault("chromium", browser.version)
        browser.open(server.url)
        opened = time.monotonic()
        hello_seconds = float(getattr(browser, "hello_seconds", HELLO_SECONDS))
        while True:
            browser.wait(0.1)
            _drain(server, session_id, state, backends, say)
            now = time.monotonic()
            if state.done or not pending:
                for backend in [b for b in pending if b in server.session["backends"]]:
                    records[backend] = {
                        **_unavailable(backend, ""),
                        "status": "run_error",
                        "error": "the page finished without reporting this backend",
                    }
                    pending.remove(backend)
                return
            if state.fatal is not None:
                for backend in pending:
                    records[backend] = _unavailable(backend, state.fatal)
                pending.clear()
                return
            if browser.crashed:
                victim = state.current or pending[0]
                records[victim] = {
                    **_unavailable(victim, ""),
                    "status": "crashed",
                    "error": f"the page's renderer crashed while {victim} ran "
                    f"(last console lines: {console.tail(4)})",
                }
                pending.remove(victim)
                return
            if state.hello is None and (now - opened > hello_seconds or now - start > timeout):
                limit = (
                    f"the job's {timeout:g} s"
                    if now - start > timeout
                    else f"{hello_seconds:g} s of opening it"
                )
                raise BrowserTimeoutError(
                    f"the browser page at {origin} did not report within "
                    f"{limit} ({server.requests} requests served); its console: {console.tail()}"
                )
            if state.current is not None and now - state.current_start > backend_timeout:
                records[state.current] = {
                    **_unavailable(state.current, ""),
                    "status": "timeout",
                    "error": f"no result within {backend_timeout:g} s (the job's timeout_seconds)",
                }
                pending.remove(state.current)
                return  # this browser is killed; the next session runs the rest
            if now - start > timeout:
                for backend in pending:
                    records[backend] = {
                        **_unavailable(backend, ""),
                        "status": "timeout",
                        "error": f"the job's {timeout:g} s ran out before {backend} finished",
                    }
                pending.clear()
                return


def _drain(
    server: JobServer, session_id: int, state: _Session, backends: _Backends, say: Progress
) -> None:
    pending, records, facts = backends.pending, backends.records, backends.facts
    while not server.events.empty():
        event = server.events.get_nowait()
        if event.get("session", session_id) != session_id:
            continue  # a killed session's page
        kind = event.get("type")
        if kind == "hello":
            state.hello = event
            for key in ("user_agent", "cross_origin_isolated", "hardware_concurrency"):
                facts[key] = event.get(key)
        elif kind == "ready":
            state.ready = event
            if event.get("gpu"):
                facts["webgpu"] = event["gpu"]
            facts["webgpu_reason"] = event.get("webgpu_reason")
            facts["wasm_build"] = event.get("wasm_build")
        elif kind == "backend_start":
            state.current = event.get("backend")
            state.current_start = event["_received"]
        elif kind == "backend_done":
            record = event.get("record") or {}
            name = record.get("backend")
            if name in pending:
                records[name] = record
                backends.session_of[name] = session_id
                pending.remove(name)
                say(f"browser: {name} {record.get('status')}")
            state.current = None
        elif kind == "done":
            state.done = True
        elif kind == "fatal":
            state.fatal = str(event.get("error") or "the page failed")


# -- the result folder ---------------------------------------------------------------------------


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
    console: _Console,
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
    is_gpu = backend.startswith("webgpu")
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


def _write_result(
    job: dict[str, Any],
    model: bytes,
    result_dir: Path,
    work: Path,
    backends: _Backends,
    console: _Console,
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
        raw = records.get(backend) or _unavailable(backend, "the page never ran it")
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
