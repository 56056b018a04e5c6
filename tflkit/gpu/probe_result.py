"""What the GPU accelerator did with one model (``ProbeResult``), built from the probe worker's
last state and its native log."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from tflkit.gpu.log import Adapter, GpuLog, parse_gpu_log
from tflkit.jsonable import plain

if TYPE_CHECKING:
    import numpy as np

#: Probe statuses after which the accelerator has compiled the model.
COMPILED_STATUSES = ("ok", "run_error", "binding_refused")


@dataclass
class CrashSite:
    """The op whose inclusion makes the accelerator crash.

    ``op_index`` indexes ``model.main.ops``. ``method`` is "message" when the crash message's
    hint was confirmed by two compiles, "bisect" when prefixes of the op list were bisected.
    ``isolated`` says whether the op alone (cut out with ``ir.extract_model([op])``) also crashes.
    """

    op_index: int
    op_type: str
    method: str
    compiles: int
    isolated: bool | None = None


@dataclass
class ProbeResult:
    """What the GPU accelerator did with one model.

    ``status``: "ok" (compiled, and ran if asked), "compile_error" (the runtime refused, e.g. a
    dynamic shape or no adapter), "run_error" (compiled, inference raised), "binding_refused"
    (compiled, but the Python binding cannot write an input's dtype), "crashed" (the
    process died: see ``exit_code``/``signal``/``log.fatal``/``crash_site``), "timeout",
    "worker_error" (the child never started its work: a broken install, see ``error``).
    """

    status: str
    compiled: bool
    is_fully_accelerated: bool
    log: GpuLog
    log_text: str
    model_sha256: str
    litert_version: str
    options: dict[str, Any]
    exit_code: int | None = None
    signal: str | None = None
    timed_out: bool = False
    stage: str | None = None
    error: str | None = None
    compile_seconds: float | None = None
    wall_seconds: float = 0.0
    num_ops: int | None = None
    signature: str | None = None
    input_specs: list[dict[str, Any]] = field(default_factory=list)
    output_specs: list[dict[str, Any]] = field(default_factory=list)
    ran: bool = False
    run_seconds: float | None = None
    run_seconds_each: list[float] = field(default_factory=list)
    inputs: dict[str, np.ndarray] | None = None
    outputs: dict[str, np.ndarray] | None = None
    output_sets: list[dict[str, np.ndarray]] | None = None
    unreadable_outputs: dict[str, str] = field(default_factory=dict)
    crash_site: CrashSite | None = None
    crash_note: str | None = None
    worker_pid: int | None = None
    from_cache: bool = False

    @property
    def crashed(self) -> bool:
        """The accelerator took the process down."""
        return self.status == "crashed"

    @property
    def adapter(self) -> Adapter | None:
        """The GPU adapter the accelerator selected, if it got that far."""
        return self.log.adapter

    @property
    def exit_description(self) -> str | None:
        """'killed by SIGABRT', 'exit status 1', or None for a clean exit."""
        if self.signal:
            return f"killed by {self.signal}"
        if self.exit_code:
            return f"exit status {self.exit_code}"
        return None

    def to_json_dict(self) -> dict[str, Any]:
        """JSON-ready form without the arrays (those go to a sibling .npz in the cache)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        del data["inputs"], data["outputs"], data["output_sets"]
        data["log"] = self.log.to_dict()
        data["crash_site"] = plain(self.crash_site)
        return data

    @classmethod
    def from_json_dict(
        cls, data: dict[str, Any], arrays: dict[str, dict[str, np.ndarray]] | None
    ) -> ProbeResult:
        """Rebuild from :meth:`to_json_dict` plus the arrays stored beside it."""
        data = dict(data)
        data["log"] = GpuLog.from_dict(data["log"])
        if data.get("crash_site") is not None:
            data["crash_site"] = CrashSite(**data["crash_site"])
        arrays = arrays or {}
        sets = arrays.get("sets")
        return cls(
            **data,
            inputs=arrays.get("inputs"),
            outputs=arrays.get("outputs"),
            output_sets=list(sets.values()) if sets else None,
        )


def status_of(state: dict[str, Any], timed_out: bool) -> str:
    if timed_out:
        return "timeout"
    if not state:
        return "worker_error"
    if state.get("stage") != "done":
        return "crashed"
    if not state.get("compiled"):
        return "compile_error"
    if state.get("run_error"):
        return "binding_refused" if state.get("binding_refused") else "run_error"
    return "ok"


def result_from_state(
    state: dict[str, Any],
    text: str,
    code: int | None,
    timed_out: bool,
    wall: float,
    sha: str,
    version: str,
    options: dict[str, Any],
) -> ProbeResult:
    status = status_of(state, timed_out)
    sig = None
    if code is not None and code < 0:
        try:
            sig = signal.Signals(-code).name
        except ValueError:
            sig = f"signal {-code}"
    log = parse_gpu_log(text)
    compiled = bool(state.get("compiled"))
    return ProbeResult(
        status=status,
        compiled=compiled,
        is_fully_accelerated=bool(state.get("fully_accelerated")) and compiled,
        log=log,
        log_text=text,
        model_sha256=sha,
        litert_version=version,
        options=options,
        exit_code=code,
        signal=sig,
        timed_out=timed_out,
        stage=state.get("stage"),
        error=state.get("error") or state.get("run_error") or last_line(text, status),
        compile_seconds=state.get("compile_seconds"),
        wall_seconds=wall,
        num_ops=state.get("num_ops"),
        signature=state.get("signature"),
        input_specs=state.get("inputs", []),
        output_specs=state.get("outputs", []),
        ran=bool(state.get("ran")),
        run_seconds=state.get("run_seconds"),
        run_seconds_each=state.get("run_seconds_each", []),
        unreadable_outputs=state.get("unreadable", {}),
        worker_pid=state.get("pid"),
    )


def last_line(text: str, status: str) -> str | None:
    """For a worker that never started: the last thing it printed (e.g. an ImportError)."""
    if status != "worker_error":
        return None
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "the probe worker exited without a word"
