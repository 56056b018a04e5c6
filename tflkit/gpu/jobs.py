"""Batch jobs: many models compiled (and run) on the GPU in as few worker processes as possible."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.errors import UsageError
from tflkit.gpu import _probe_worker
from tflkit.gpu.log import parse_gpu_log
from tflkit.gpu.probe_result import last_line
from tflkit.gpu.spawn import JOB_MARKER, communicate
from tflkit.proc.worker import python_command


@dataclass
class JobResult:
    """One model of a :func:`run_jobs` batch: "ok", "compile_error", "run_error", "crashed",
    "timeout" or "worker_error"; ``outputs`` by output name when it ran; ``log`` is what the
    accelerator printed for this job and ``record`` the worker's state for it."""

    status: str
    compiled: bool = False
    fully_accelerated: bool = False
    error: str | None = None
    compile_seconds: float | None = None
    run_seconds: float | None = None
    outputs: dict[str, np.ndarray] | None = None
    unreadable: dict[str, str] = field(default_factory=dict)
    log: str = ""
    record: dict[str, Any] = field(default_factory=dict)
    wall_seconds: float = 0.0


def run_jobs(
    models: Sequence[bytes],
    inputs: Sequence[Mapping[str, np.ndarray] | None] | None = None,
    *,
    enforce_f32: bool = False,
    timeout_per_job: float = 60.0,
) -> list[JobResult]:
    """Compile each model (and run it once on its inputs, when given) on the GPU, in as few
    processes as possible.

    One worker runs the jobs in order; when the accelerator kills it (or a job hangs), that job
    is recorded as "crashed" (or "timeout") and a new worker resumes with the next job. With
    ``inputs`` None every job only compiles. Used to run every op of a model cut out on its own,
    and to probe a corpus, without paying a process start per model.
    """
    feeds = list(inputs) if inputs is not None else [None] * len(models)
    if len(models) != len(feeds):
        raise UsageError(f"{len(models)} models but {len(feeds)} input sets")
    results: dict[int, JobResult] = {}
    with tempfile.TemporaryDirectory(prefix="tflkit-jobs-") as tmp:
        work = Path(tmp)
        jobs: list[dict[str, Any]] = []
        for i, (data, feed) in enumerate(zip(models, feeds, strict=True)):
            (work / f"m{i}.tflite").write_bytes(data)
            job: dict[str, Any] = {"model": str(work / f"m{i}.tflite")}
            if feed is not None:
                np.savez(work / f"i{i}.npz", **{f"in_{k}": a for k, a in enumerate(feed.values())})
                job.update(
                    inputs=str(work / f"i{i}.npz"),
                    outputs=str(work / f"o{i}.npz"),
                    names=[str(name) for name in feed],
                )
            jobs.append(job)
        jobs_path = work / "jobs.json"
        jobs_path.write_text(json.dumps(jobs))
        start = 0
        while start < len(jobs):
            result_path = work / f"state{start}.json"
            cmd = python_command(_probe_worker.main, "--jobs", jobs_path, "--result", result_path)
            cmd += ["--start", str(start)]
            if enforce_f32:
                cmd.append("--enforce-f32")
            timeout = timeout_per_job * (len(jobs) - start)
            state, text, _code, timed_out, _wall, _ = communicate(
                cmd, work, timeout, result_path, work / "unused.npz"
            )
            logs = _split_job_logs(text)
            for key, record in state.get("jobs", {}).items():
                index = int(key)
                outputs = jobs[index].get("outputs")
                results[index] = _job_result(
                    record, Path(outputs) if outputs else None, logs.get(index, "")
                )
            if state.get("stage") == "done":
                break
            current = state.get("current")
            if current is None:
                error = last_line(text, "worker_error")
                for i in range(start, len(jobs)):
                    results.setdefault(i, JobResult(status="worker_error", error=error))
                break
            fatal = parse_gpu_log(logs.get(current, text)).fatal
            results[current] = JobResult(
                status="timeout" if timed_out else "crashed",
                error=fatal or ("timed out" if timed_out else "the accelerator killed the process"),
                log=logs.get(current, ""),
            )
            start = current + 1
    return [results.get(i, JobResult(status="worker_error")) for i in range(len(jobs))]


def _split_job_logs(text: str) -> dict[int, str]:
    """The worker's merged log cut at its ``JOB_MARKER`` lines: job index -> its lines."""
    pieces: dict[int, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith(JOB_MARKER):
            current = pieces.setdefault(int(line[len(JOB_MARKER) :].split()[0]), [])
        elif current is not None:
            current.append(line)
    return {k: "\n".join(v) + "\n" for k, v in pieces.items()}


def _job_result(record: dict[str, Any], npz: Path | None, log: str) -> JobResult:
    result = JobResult(
        status="ok",
        compiled=bool(record.get("compiled")),
        fully_accelerated=bool(record.get("fully_accelerated")),
        error=record.get("error") or record.get("run_error"),
        compile_seconds=record.get("compile_seconds"),
        run_seconds=record.get("run_seconds"),
        unreadable=record.get("unreadable", {}),
        log=log,
        record=record,
    )
    if not result.compiled:
        result.status = "compile_error"
    elif record.get("run_error"):
        result.status = "run_error"
    if npz is not None and npz.is_file():
        specs = record.get("outputs", [])
        with np.load(npz, allow_pickle=False) as data:
            result.outputs = {
                spec["name"]: data[f"out_{i}"]
                for i, spec in enumerate(specs)
                if f"out_{i}" in data.files
            }
    return result
