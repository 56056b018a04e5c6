"""Running runners with another LiteRT runtime: the Linux harness, run by that runtime's venv
Python (this machine as a device). The venvs themselves: :mod:`tflkit.regress.runtimes`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.delegates.base import runner_id

__all__ = ["RuntimeEnv", "run_in_runtime"]


@dataclass(frozen=True)
class RuntimeEnv:
    """A ready runtime venv: its spec as given, the version installed, its Python."""

    spec: str
    label: str
    python: Path
    gpu: bool

    @property
    def distribution(self) -> str:
        return self.label.partition("==")[0]


def run_in_runtime(
    model: Path,
    feeds: Sequence[Mapping[str, np.ndarray]],
    runners: Sequence[str],
    runtime: RuntimeEnv,
    *,
    signature: str | None,
    timeout: float,
) -> list[Any]:
    """Run ``runners`` (tflkit runner names) on ``feeds`` with ``runtime``: the Linux harness in
    its venv. One :class:`tflkit.delegates.base.RunResult` per runner, named as given."""
    from tflkit.delegates.base import RunResult
    from tflkit.delegates.device_protocol import JobOptions, write_job
    from tflkit.harness.device_runs import RUNNER_OF, device_run_results
    from tflkit.harness.transport import LocalDevice

    backend_of = {name: backend for backend, name in RUNNER_OF.items()}
    unknown = [r for r in runners if r not in backend_of]
    results: dict[str, Any] = {
        r: RunResult(r, "unavailable", error=f"{r} does not run in another runtime")
        for r in unknown
    }
    backends = tuple(backend_of[r] for r in runners if r in backend_of)
    if backends:
        options = JobOptions(backends=backends, signature=signature, timeout_seconds=timeout)
        with tempfile.TemporaryDirectory(prefix="tflkit-runtime-") as tmp:
            job = write_job(
                Path(tmp) / "job", model.read_bytes(), [dict(f) for f in feeds], options
            )
            done = LocalDevice(str(runtime.python)).run_job(
                job, Path(tmp) / "result", timeout=timeout * len(backends) + 60
            )
            for run in device_run_results(done, "local"):
                rid = runner_id(run.runner)  # named from the registry by device_run_results
                assert rid is not None
                name = rid.local_name
                executed = {**run.executed, "runtime": runtime.label}
                results[name] = replace(run, runner=name, executed=executed)
    return [results[r] for r in runners]
