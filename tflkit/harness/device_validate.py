"""``device validate``: run a model on devices and compare there exactly as ``validate`` does.

The devices are runners of :func:`tflkit.validation.pipeline.validate` (one per device and backend,
named ``gpu-fp16@adb:SERIAL``), so inputs, calibration, tolerances, verdicts and report formats are
``validate``'s own. The first device runner to be asked writes one job with ``validate``'s input
sets and runs it on every device at once; the others read their part of the results. Pairs: every
device runner against the host CPU (and the reference, when given), and each backend on every other
device against the first device's. A device that fails (unreachable, disconnected, timed out) does
not stop the others: its runners are ``unavailable`` with the device's error line and the rest
compare as usual; when every device failed, :class:`DeviceError` is raised after ``validate``
returns, so the command prints one line.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tflkit.compare.comparator import default_pairs
from tflkit.delegates.base import Feed, RunResult
from tflkit.delegates.device_protocol import (
    BROWSER_BACKENDS,
    RECORD_BACKENDS,
    DeviceResult,
    JobOptions,
    write_job,
)
from tflkit.errors import UsageError
from tflkit.harness.device_runs import RUNNER_OF, device_run_results, runner_name
from tflkit.harness.transport import Device, DeviceError
from tflkit.proc.worker import kill_sessions
from tflkit.report.progress import Progress
from tflkit.report.validate_report import ValidateReport
from tflkit.validation.options import InputSetOptions

__all__ = [
    "DEFAULT_BACKENDS",
    "DeviceValidateOptions",
    "device_backends",
    "device_slug",
    "device_validate",
    "run_each",
    "run_on_devices",
]


@dataclass
class DeviceValidateOptions(InputSetOptions):
    """What to run where. ``keep`` keeps each device's result folder under that directory.

    ``backends``: empty means each device's default (``cpu``, ``gpu_fp16``, ``gpu_fp32``; a
    browser device's ``webgpu_fp32``, ``webgpu_fp16``, ``wasm``); a device runs the ones of the
    list it has. ``browser``: the job's ``browser`` field for browser devices (protocol 1.1:
    ``repeats``, at least 3 here; ``webgpu_device``, ...).
    """

    backends: Sequence[str] = ()
    reference: Path | None = None
    tolerances: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    threads: int | None = None
    warmup_runs: int = 1
    timed_runs: int = 1
    timeout: float = 300.0
    keep: Path | None = None
    browser: Mapping[str, object] | None = None


#: What a device runs when ``--backend`` is not given: the harness aliases of what ``regress
#: record`` records (the CPU, the GPU in fp16 and fp32).
DEFAULT_BACKENDS = RECORD_BACKENDS
#: At least this many runs of each input set on a browser backend (run-to-run drift).
MIN_REPEATS = 3


def device_backends(device: Device, asked: Sequence[str]) -> tuple[str, ...]:
    """The backends ``device`` runs: its own (a browser device's ``backends``) or the usual
    ones, narrowed to ``asked`` when given; a usage error when it runs none of them."""
    own = tuple(getattr(type(device), "backends", None) or ())
    if not asked:
        return own or DEFAULT_BACKENDS
    if own:
        chosen = tuple(b for b in asked if b in own)
    else:
        chosen = tuple(b for b in asked if b not in BROWSER_BACKENDS)
    if not chosen:
        raise UsageError(
            f"--device {device.spec} runs none of the backends {list(asked)}"
            + (f" (it runs {', '.join(own)})" if own else " (webgpu_* and wasm need a browser)")
        )
    return chosen


def device_slug(spec: str) -> str:
    """A file-name-safe form of a device spec (``adb:127.0.0.1:5555`` -> ``adb_127.0.0.1_5555``)."""
    return re.sub(r"[^\w.\-]+", "_", spec)


def run_on_devices(
    job: Path,
    devices: Sequence[Device],
    dests: Sequence[Path],
    *,
    timeout: float,
    progress: Progress | None = None,
) -> list[DeviceResult]:
    """Run one job on several devices at once; raise one :class:`DeviceError` if any failed.

    Every device finishes (or times out) before this returns, so no transfer is left running.
    """
    outcomes = run_each(job, devices, dests, timeout=timeout, progress=progress)
    errors = [o for o in outcomes if isinstance(o, DeviceError)]
    if errors:
        for outcome in outcomes:
            if isinstance(outcome, DeviceResult):
                shutil.rmtree(outcome.path, ignore_errors=True)
        raise DeviceError("; ".join(str(e) for e in errors))
    return [o for o in outcomes if isinstance(o, DeviceResult)]


def run_each(
    job: Path,
    devices: Sequence[Device],
    dests: Sequence[Path],
    *,
    timeout: float,
    progress: Progress | None = None,
) -> list[DeviceResult | DeviceError]:
    """Run one job on several devices at once, one thread each; each device's result or its
    error, in the devices' order (a device that fails does not stop the others)."""
    if len({d.spec for d in devices}) != len(devices):
        raise UsageError("the same --device is given twice")

    def one(pair: tuple[Device, Path]) -> DeviceResult | DeviceError:
        device, dest = pair
        try:
            return device.run_job(job, dest, timeout=timeout, progress=progress)
        except DeviceError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=max(len(devices), 1)) as pool:
        try:
            return list(pool.map(one, zip(devices, dests, strict=True)))
        except BaseException:  # Ctrl-C, SIGTERM: stop the transfers so the threads end now
            kill_sessions()
            raise


class _Fleet:
    """Runs the job on every device once, with the feeds of the first runner that asks."""

    def __init__(
        self,
        devices: Sequence[Device],
        model: bytes,
        options: DeviceValidateOptions,
        workdir: Path,
        progress: Progress | None,
    ) -> None:
        self.devices = devices
        self.model = model
        self.options = options
        self.workdir = workdir
        self.progress = progress
        self.error: DeviceError | None = None
        self._runs: dict[str, RunResult] | None = None
        self._lock = threading.Lock()

    def result(self, name: str, feeds: Sequence[Feed], signature: str | None) -> RunResult:
        with self._lock:
            if self._runs is None:
                self._runs = self._run(feeds, signature)
        if name not in self._runs:
            assert self.error is not None
            raise self.error
        return self._runs[name]

    def _run(self, feeds: Sequence[Feed], signature: str | None) -> dict[str, RunResult]:
        o = self.options
        # one job per set of backends (a browser device's differ from a phone's), same inputs
        jobs: dict[tuple[str, ...], Path] = {}
        for device in self.devices:
            backends = device_backends(device, o.backends)
            if backends in jobs:
                continue
            browser = set(backends) <= set(BROWSER_BACKENDS)
            settings = dict(o.browser or {}) if browser else None
            if settings is not None:
                settings["repeats"] = max(int(settings.get("repeats", 0)), MIN_REPEATS)
            job_options = JobOptions(
                backends=backends,
                signature=signature,
                threads=o.threads,
                warmup_runs=o.warmup_runs,
                timed_runs=o.timed_runs,
                timeout_seconds=o.timeout,
                browser=settings,
            )
            jobs[backends] = write_job(
                self.workdir / f"job{len(jobs)}", self.model, [dict(f) for f in feeds], job_options
            )
        dests = [self.workdir / f"result-{device_slug(d.spec)}" for d in self.devices]
        # the device's timeout is per backend: allow for every backend plus the transfers
        total = o.timeout * max(len(b) for b in jobs) + 120
        outcomes = _run_jobs(jobs, self.devices, dests, total, o.backends, self.progress)
        failed = [x for x in outcomes if isinstance(x, DeviceError)]
        if len(failed) == len(outcomes):  # nothing ran: one line, exit code 4
            self.error = DeviceError("; ".join(str(e) for e in failed))
            return {}
        if o.keep is not None:
            done = [(d, x) for d, x in zip(self.devices, outcomes, strict=True) if x not in failed]
            _keep([x for _, x in done], [d for d, _ in done], o.keep)
        runs = {}
        for device, outcome in zip(self.devices, outcomes, strict=True):
            if isinstance(outcome, DeviceError):  # the others still compare
                for backend in device_backends(device, o.backends):
                    name = runner_name(backend, device.spec)
                    runs[name] = RunResult(name, "unavailable", error=str(outcome))
            else:
                runs.update({r.runner: r for r in device_run_results(outcome, device.spec)})
        return runs


def _run_jobs(
    jobs: Mapping[tuple[str, ...], Path],
    devices: Sequence[Device],
    dests: Sequence[Path],
    timeout: float,
    asked: Sequence[str],
    progress: Progress | None,
) -> list[DeviceResult | DeviceError]:
    """Every device runs its job, all at once; each one's result or error, in their order."""
    if len(jobs) == 1:
        job = next(iter(jobs.values()))
        return run_each(job, devices, dests, timeout=timeout, progress=progress)
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = {
            backends: pool.submit(
                run_each,
                job,
                [d for d in devices if device_backends(d, asked) == backends],
                [
                    p
                    for d, p in zip(devices, dests, strict=True)
                    if device_backends(d, asked) == backends
                ],
                timeout=timeout,
                progress=progress,
            )
            for backends, job in jobs.items()
        }
        try:
            done = {backends: list(future.result()) for backends, future in futures.items()}
        except BaseException:  # Ctrl-C, SIGTERM: stop the transfers so the threads end now
            kill_sessions()
            raise
    return [done[device_backends(d, asked)].pop(0) for d in devices]


class _DeviceRunner:
    """One backend on one device, as a :class:`tflkit.delegates.base.Runner`."""

    def __init__(self, fleet: _Fleet, device: Device, backend: str, signature: str | None):
        self.fleet = fleet
        self.signature = signature
        self.name = runner_name(backend, device.spec)

    def activate(self) -> None:
        """Nothing here: the fleet runs the job when the first runner infers."""

    def infer(self, feeds: Sequence[Feed]) -> RunResult:
        return self.fleet.result(self.name, feeds, self.signature)

    def deactivate(self) -> None:
        """Nothing held: the device's harness has exited."""


def _pairs(host: Sequence[str], devices: Sequence[Device], asked: Sequence[str]) -> list:
    ran = {d.spec: device_backends(d, asked) for d in devices}
    names = list(host) + [runner_name(b, d.spec) for d in devices for b in ran[d.spec]]
    pairs = default_pairs(names)
    # each backend on every other device against the first device that runs it
    first: dict[str, str] = {}
    for device in devices:
        for backend in ran[device.spec]:
            if backend in first:
                pairs.append(
                    (runner_name(backend, device.spec), runner_name(backend, first[backend]))
                )
            else:
                first[backend] = device.spec
    return pairs


def device_validate(
    model_path: str | Path,
    devices: Sequence[Device],
    options: DeviceValidateOptions | None = None,
    progress: Progress | None = None,
) -> ValidateReport:
    """Run the model on ``devices`` and compare; device failures raise :class:`DeviceError`."""
    from tflkit import ir
    from tflkit.validation.pipeline import ValidateOptions, validate

    options = options or DeviceValidateOptions()
    if not devices:
        raise UsageError("give at least one --device")
    unknown = [b for b in options.backends if b not in RUNNER_OF]
    if unknown:
        raise UsageError(f"unknown backend(s) {unknown}; choose from {', '.join(RUNNER_OF)}")
    if len({d.spec for d in devices}) != len(devices):
        raise UsageError("the same --device is given twice")
    if options.keep is not None:
        taken = [options.keep / device_slug(d.spec) for d in devices]
        if any(p.exists() for p in taken):
            raise UsageError(f"{options.keep} already holds results for these devices")
    data, _ = ir.serde.read_model_bytes(model_path)
    host = ["cpu"] + (["reference"] if options.reference is not None else [])
    with tempfile.TemporaryDirectory(prefix="tflkit-device-") as tmp:
        fleet = _Fleet(devices, data, options, Path(tmp), progress)
        runners = [
            _DeviceRunner(fleet, d, b, options.signature)
            for d in devices
            for b in device_backends(d, options.backends)
        ]
        report = validate(
            model_path,
            ValidateOptions(
                runners=["cpu"],
                pairs=_pairs(host, devices, options.backends),
                reference=options.reference,
                tolerances=options.tolerances,
                timeout=options.timeout,
                progress=progress,
                extra_runners=runners,
                **options.input_options(),
            ),
        )
    if fleet.error is not None:
        raise fleet.error
    return report


def _keep(results: Sequence[DeviceResult], devices: Sequence[Device], keep: Path) -> None:
    keep.mkdir(parents=True, exist_ok=True)
    for result, device in zip(results, devices, strict=True):
        shutil.move(str(result.path), keep / device_slug(device.spec))
