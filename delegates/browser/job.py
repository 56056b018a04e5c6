"""Run one device job in Chromium with LiteRT.js and write the protocol's result folder.

:func:`run_browser_job` is the browser harness's whole host side: it checks the job folder,
fetches LiteRT.js into the cache if needed, serves the job to the page on a one-job local server,
runs the page in one or more sessions (``page_run``: a headless Chromium, or a browser an
``opener`` gives), and writes ``RESULT_DIR`` as ``android_harness/PROTOCOL.md`` says
(``result``). :func:`write_browser_job` writes a job folder for it with the protocol's
``write_job``.

Backends: ``webgpu_fp32``, ``webgpu_fp16`` (LiteRT.js's WebGPU accelerator, ML Drift, at that
precision) and ``wasm`` (LiteRT.js's CPU path, XNNPACK in Wasm). Any other backend of the job gets
an ``unavailable`` record. Each input set runs ``repeats`` times (3 by default, warm-up runs come
first on set 0); the result keeps the last run's outputs and, per output, the largest absolute
difference of every run to the first one (``repeats`` in the backend record), so a backend whose
answers drift from run to run shows it (LiteRT issue 8065: right only on the first inference).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..device_protocol import (
    BROWSER_BACKENDS,
    DTYPES,
    JOB_SCHEMA,
    DeviceResult,
    JobOptions,
    ProtocolError,
    read_document,
    write_job,
)
from .chromium import ADAPTERS, BROWSER_CHOICE, CHROMIUM
from .errors import BrowserHarnessError
from .page_run import Backends, Console, Opener, SessionPlan, run_session, unavailable
from .provision import ensure_litertjs
from .result import HARNESS_VERSION, write_result
from .server import JobServer

__all__ = [
    "BROWSER_BACKENDS",
    "HARNESS_VERSION",
    "BrowserOptions",
    "run_browser_job",
    "write_browser_job",
]

WEBGPU_DEVICE_MODES = ("adapter-limits", "default-limits")
WASM_BUILDS = ("jspi", "threads")


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


def run_browser_job(
    job_dir: str | os.PathLike[str],
    result_dir: str | os.PathLike[str],
    *,
    adapter: str = "swiftshader",
    timeout: float = 900.0,
    cache_dir: str | os.PathLike[str] | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    chromium: str = CHROMIUM,
    npm: str = "npm",
    registry: str | None = None,
    progress: Callable[[str], None] | None = None,
    page_dir: str | os.PathLike[str] | None = None,
    opener: Opener | None = None,
) -> DeviceResult:
    """Run ``job_dir`` in headless Chromium with LiteRT.js; write and return ``result_dir``.

    ``adapter``: ``swiftshader`` or ``lavapipe`` (see ``chromium.ADAPTERS``). ``timeout``: the
    whole job, seconds (each backend also has the job's ``timeout_seconds``). ``cache_dir``: the
    folder LiteRT.js is fetched into (default ``provision.browser_cache_dir()``). ``host``,
    ``port``: the interface and port the job's server listens on (port 0: any free one).
    ``page_dir``: another page folder (development, tests).
    ``opener``: who opens the page instead of a local headless Chromium (a device's browser, a
    browser the user points at the URL: :mod:`tflkit.harness.browser.remote`, a WebDriver
    session: :mod:`tflkit.harness.browser.webdriver_device`); called once per session as
    ``opener(server=..., adapter=..., on_console=...)``, it returns a context manager that yields
    an object shaped like :class:`~tflkit.delegates.browser.chromium.Chromium` (``open(url)``,
    ``wait(seconds)``, ``crashed``, ``version``; optional ``hello_seconds``).

    Raises :class:`~tflkit.delegates.device_protocol.ProtocolError` for a bad job folder (exit 2)
    and :class:`~tflkit.delegates.browser.errors.BrowserHarnessError` (exit 4) when LiteRT.js
    cannot be fetched, Chromium does not start, or the page never reports within ``timeout``.
    """
    start = time.monotonic()
    say = progress or (lambda line: print(f"tflkit: {line}", file=sys.stderr, flush=True))
    job_dir, result_dir = Path(job_dir).resolve(), Path(result_dir)
    job, options = _checked(job_dir, result_dir, adapter, opener is not None)
    litertjs = ensure_litertjs(
        Path(cache_dir) if cache_dir is not None else None,
        npm=npm,
        registry=registry,
        progress=progress,
    )
    # the job's timeout starts once LiteRT.js is at hand
    plan = SessionPlan(adapter, chromium, job, time.monotonic(), timeout, say, opener)
    backends = _backends(job)
    work = Path(tempfile.mkdtemp(prefix="tflkit-browser-job-"))
    console = Console()
    try:
        with JobServer(
            job_dir, job, litertjs.path, work, host=host, port=port, page_dir=page_dir
        ) as server:
            session_id = 0
            while backends.pending:
                session_id += 1
                server.session = _session_settings(session_id, backends.pending, options, plan)
                say(
                    f"browser: {', '.join(backends.pending)} on {adapter} (Chromium, LiteRT.js "
                    f"{litertjs.version})"
                )
                run_session(server, session_id, backends, console, plan)
        return write_result(
            job,
            (job_dir / job["model"]["file"]).read_bytes(),
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


def _checked(
    job_dir: Path, result_dir: Path, adapter: str, opened: bool
) -> tuple[dict[str, Any], BrowserOptions]:
    """The job and its browser options, once the adapter (``browser``: only for a browser an
    opener gives), the job folder and the (empty or missing) result folder are right."""
    if adapter not in ADAPTERS and not (opened and adapter == BROWSER_CHOICE.name):
        raise BrowserHarnessError(
            f"unknown WebGPU adapter {adapter!r}; known: {', '.join(ADAPTERS)}"
        )
    job = _load_job(job_dir)
    options = BrowserOptions.from_job(job)
    if result_dir.exists() and any(result_dir.iterdir()):
        raise BrowserHarnessError(f"{result_dir} exists and is not empty")
    return job, options


def _backends(job: Mapping[str, Any]) -> Backends:
    """The job's backends: the browser's pending, any other one ``unavailable`` already."""
    records: dict[str, dict[str, Any]] = {}
    for backend in job["backends"]:
        if backend not in BROWSER_BACKENDS:
            records[backend] = unavailable(
                backend,
                f"the browser harness runs {', '.join(BROWSER_BACKENDS)}; {backend} belongs to "
                "the Linux or Android harness",
            )
    return Backends([b for b in job["backends"] if b not in records], records)


def _session_settings(
    session_id: int, pending: Sequence[str], options: BrowserOptions, plan: SessionPlan
) -> dict[str, Any]:
    """What the page reads from ``session.json``: the backends to run and how."""
    job = plan.job
    return {
        "session": session_id,
        "backends": list(pending),
        "adapter": {
            "name": plan.adapter,
            "feature_level": ADAPTERS.get(plan.adapter, BROWSER_CHOICE).feature_level,
            # lavapipe missing: Chromium answers a compatibility request with SwiftShader;
            # that is not the adapter the user asked for
            "reject_fallback": plan.adapter == "lavapipe",
        },
        "webgpu_device": options.webgpu_device,
        "repeats": max(options.repeats, int(job.get("timed_runs", 1))),
        "warmup_runs": int(job.get("warmup_runs", 1)),
        "wasm_build": options.wasm_build,
        "raw_io": options.raw_io,
    }
