"""``device validate``: run a model on devices, compare with the host CPU, the reference and
each other, in the very report ``validate`` writes.

One job (model + seeded or given inputs) goes to every device at once; each device runs its
backends and sends back a result folder. The host runs the CPU (XNNPACK) on the same inputs and,
when given, the framework reference. Pairs: every device runner against the host CPU and the
reference, and each backend on every other device against the first device's. Tolerances are
``validate``'s, chosen by the backend (``gpu-fp16@adb:X`` is judged like ``gpu-fp16``).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from tflkit import ir
from tflkit.compare.comparator import OutputInfo, PairComparison, compare_pair
from tflkit.delegates.base import RunResult, execute
from tflkit.delegates.device import RUNNER_OF, device_run_results
from tflkit.delegates.litert_cpu import LiteRTCpuRunner
from tflkit.errors import UsageError
from tflkit.harness.protocol import DeviceResult, JobOptions, write_job
from tflkit.harness.transport import Device, DeviceError
from tflkit.inputs import entry_point
from tflkit.report.validate_report import ValidateReport
from tflkit.validation import ValidateOptions, conclude, output_infos, resolve_inputs

__all__ = ["DeviceValidateOptions", "device_slug", "device_validate", "run_on_devices"]

Progress = Callable[[str], None]


@dataclass
class DeviceValidateOptions:
    """What to run where. ``keep`` keeps each device's result folder under that directory."""

    backends: Sequence[str] = ("cpu", "gpu_fp16", "gpu_fp32")
    reference: Path | None = None
    inputs: Path | None = None
    num_inputs: int = 4
    seed: int = 0
    input_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    signature: str | None = None
    tolerances: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    threads: int | None = None
    warmup_runs: int = 1
    timed_runs: int = 1
    timeout: float = 300.0
    keep: Path | None = None


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
    if len({d.spec for d in devices}) != len(devices):
        raise UsageError("the same --device is given twice")

    def one(pair: tuple[Device, Path]) -> DeviceResult | DeviceError:
        device, dest = pair
        try:
            return device.run_job(job, dest, timeout=timeout, progress=progress)
        except DeviceError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=max(len(devices), 1)) as pool:
        outcomes = list(pool.map(one, zip(devices, dests, strict=True)))
    errors = [o for o in outcomes if isinstance(o, DeviceError)]
    if errors:
        for outcome in outcomes:
            if isinstance(outcome, DeviceResult):
                shutil.rmtree(outcome.path, ignore_errors=True)
        raise DeviceError("; ".join(str(e) for e in errors))
    return [o for o in outcomes if isinstance(o, DeviceResult)]


def _base(runner: str) -> str:
    return runner.split("@", 1)[0]


def _compare(
    actual: RunResult,
    expected: RunResult,
    outputs: Sequence[OutputInfo],
    overrides: Mapping[str, Mapping[str, float]],
) -> PairComparison:
    """``compare_pair`` under the tolerance of the backends, named after the full runners."""
    pair = compare_pair(
        replace(actual, runner=_base(actual.runner)),
        replace(expected, runner=_base(expected.runner)),
        outputs,
        overrides=overrides,
    )
    pair.actual, pair.expected = actual.runner, expected.runner
    return pair


def _pairs(
    host: Sequence[RunResult], devices: Sequence[tuple[str, list[RunResult]]]
) -> list[tuple[RunResult, RunResult]]:
    by_name = {r.runner: r for r in host}
    pairs = []
    for _, runs in devices:
        for run in runs:
            if "cpu" in by_name:
                pairs.append((run, by_name["cpu"]))
    if "reference" in by_name:
        if "cpu" in by_name:
            pairs.append((by_name["cpu"], by_name["reference"]))
        for _, runs in devices:
            pairs += [(run, by_name["reference"]) for run in runs]
    if len(devices) > 1:
        first = {_base(r.runner): r for r in devices[0][1]}
        for _, runs in devices[1:]:
            pairs += [(run, first[_base(run.runner)]) for run in runs if _base(run.runner) in first]
    return pairs


def _host_runs(
    data: bytes, key: str | None, options: DeviceValidateOptions, outputs: list[OutputInfo], feeds
) -> list[RunResult]:
    runs = [execute(LiteRTCpuRunner(data, signature=key, name="cpu"), feeds)]
    if options.reference is not None:
        from tflkit.delegates.tf_reference import ReferenceRunner

        reference = ReferenceRunner(
            options.reference,
            outputs={o.name: o.shape for o in outputs},
            signature=key,
            timeout=options.timeout,
        )
        runs.append(execute(reference, feeds))
    return runs


def device_validate(
    model_path: str | Path,
    devices: Sequence[Device],
    options: DeviceValidateOptions | None = None,
    progress: Progress | None = None,
) -> ValidateReport:
    """Run the model on ``devices`` and compare; device failures raise :class:`DeviceError`."""
    options = options or DeviceValidateOptions()
    if not devices:
        raise UsageError("give at least one --device")
    unknown = [b for b in options.backends if b not in RUNNER_OF]
    if unknown:
        raise UsageError(f"unknown backend(s) {unknown}; choose from {', '.join(RUNNER_OF)}")
    start = time.perf_counter()
    data, label = ir.serde.read_model_bytes(model_path)
    model = ir.load(data, label=label)
    vopts = ValidateOptions(
        reference=options.reference,
        inputs=options.inputs,
        num_inputs=options.num_inputs,
        seed=options.seed,
        input_shapes=options.input_shapes,
        signature=options.signature,
    )
    key, _, _, outs = entry_point(model, options.signature)
    sets = resolve_inputs(model, vopts)
    outputs = output_infos(outs)
    job_options = JobOptions(
        backends=tuple(options.backends),
        signature=key,
        threads=options.threads,
        warmup_runs=options.warmup_runs,
        timed_runs=options.timed_runs,
        timeout_seconds=options.timeout,
    )
    with tempfile.TemporaryDirectory(prefix="tflkit-device-") as tmp:
        job = write_job(Path(tmp) / "job", data, sets.feeds, job_options)
        dests = [Path(tmp) / f"result-{device_slug(d.spec)}" for d in devices]
        # the device's own timeout is per backend; allow for every backend plus transfers
        total = options.timeout * len(options.backends) + 120
        results = run_on_devices(job, devices, dests, timeout=total, progress=progress)
        if progress is not None:
            progress("host: running the CPU" + (" and the reference" if options.reference else ""))
        host = _host_runs(data, key, options, outputs, sets.feeds)
        device_runs = [
            (d.spec, device_run_results(r, d.spec)) for d, r in zip(devices, results, strict=True)
        ]
        if options.keep is not None:
            _keep(results, devices, options.keep)
    runners = host + [run for _, runs in device_runs for run in runs]
    comparisons = [
        _compare(a, e, outputs, options.tolerances) for a, e in _pairs(host, device_runs)
    ]
    report = ValidateReport(
        model=label,
        model_sha256=hashlib.sha256(data).hexdigest(),
        signature=key,
        inputs=sets.to_json(),
        outputs=[
            {"name": o.name, "dtype": o.dtype, "shape": list(o.shape), "scale": o.scale}
            for o in outputs
        ],
        runners=runners,
        pairs=comparisons,
    )
    conclude(report)
    report.wall_seconds = time.perf_counter() - start
    return report


def _keep(results: Sequence[DeviceResult], devices: Sequence[Device], keep: Path) -> None:
    keep.mkdir(parents=True, exist_ok=True)
    for result, device in zip(results, devices, strict=True):
        dest = keep / device_slug(device.spec)
        if dest.exists():
            raise UsageError(f"{dest} already exists; refusing to overwrite it")
        shutil.move(str(result.path), dest)
