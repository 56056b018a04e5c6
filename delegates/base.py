"""The runner protocol: turn input sets into outputs and record what really executed.

A runner knows nothing about comparison (Polygraphy's split). What each runner is (its precision
class, the device it runs on, the device protocol's name for it, what it can do) is one
:class:`RunnerSpec` of :data:`RUNNER_SPECS`, read by everything that needs to know: tolerances,
localization, repro, the device harnesses, ``--steps`` and the CLI never parse a runner's name.
``tflkit.delegates.registry`` builds each runner from its spec. ``activate`` prepares it (load,
compile), ``infer`` runs every input set, ``deactivate`` frees it; :func:`execute` drives the
three and turns any failure into a :class:`RunResult` whose ``status`` says what happened, so a
crash, a hang or a refused model is a finding, never an exception that kills the caller.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from tflkit.errors import UsageError, one_line
from tflkit.jsonable import plain

__all__ = [
    "RECORD_DEFAULT",
    "RUNNER_SPECS",
    "STATUSES",
    "VALIDATE_DEFAULT",
    "Feed",
    "FeedMismatch",
    "InputMeta",
    "RunResult",
    "Runner",
    "RunnerSpec",
    "RunnerUnavailable",
    "Speed",
    "check_feeds",
    "device_of",
    "execute",
    "find_spec",
    "precision_of",
    "runner_spec",
    "spec_names",
]

Feed = Mapping[str, np.ndarray]

#: ``ok`` ran every input set; ``unavailable`` could not start (missing file, TensorFlow absent);
#: ``compile_error`` the runtime refused the model; ``run_error`` inference raised; ``crashed`` the
#: runtime killed its process; ``timeout`` it hung and was killed. A runner of this machine may
#: also end ``binding_refused`` (:data:`tflkit.gpu.buffers.BINDING_REFUSED`): the Python binding
#: could not hand the runtime an input (a dtype it refuses), no verdict on the runtime; device
#: harnesses write the bytes themselves, so the device protocol does not carry it.
STATUSES = ("ok", "unavailable", "compile_error", "run_error", "crashed", "timeout")


@dataclass(frozen=True)
class Speed:
    """How fast a runner was, split the way a user asks: the compile (shader compilation on a
    GPU), the first inference (what an app's first call costs), then the steady state: the
    median (``p50_s``) and 90th percentile (``p90_s``) of the ``runs`` timed runs after it
    (``warmup_runs`` more ran untimed between). None where the runner did not measure it."""

    compile_s: float | None
    first_s: float | None
    p50_s: float | None
    p90_s: float | None
    runs: int
    warmup_runs: int = 0


@dataclass
class RunResult:
    """What one runner produced and what it really ran on.

    ``outputs`` has one dict per input set (output name -> array; outputs the runtime cannot read
    back are absent and explained in ``unreadable``). ``executed`` records the facts: runtime,
    accelerator, kernels, precision, adapter, whether the graph was fully delegated and which ops
    fell back to the CPU. Times are the runner's own: one compile, then one figure per input set
    (``infer_seconds``); a runner that repeats each input set also keeps every run in order
    (``warmup_seconds``, then ``run_seconds``). :attr:`speed` derives the split from them.
    """

    runner: str
    status: str
    outputs: list[dict[str, np.ndarray]] = field(default_factory=list)
    unreadable: dict[str, str] = field(default_factory=dict)
    executed: dict[str, Any] = field(default_factory=dict)
    compile_seconds: float | None = None
    infer_seconds: list[float] = field(default_factory=list)
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    wall_seconds: float = 0.0
    warmup_seconds: list[float] = field(default_factory=list)
    run_seconds: list[float] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every input set ran."""
        return self.status == "ok"

    @property
    def own_seconds(self) -> float:
        """Compile plus inference time as the runtime measured it (the benchmark's denominator)."""
        return (self.compile_seconds or 0.0) + sum(self.infer_seconds)

    @property
    def speed(self) -> Speed:
        """The compile / first / steady-state split (the one place it is derived).

        The first inference is the first run of the first input set (a warm-up run when there
        were any); the steady state is every timed run after it: each run of a runner that
        repeats input sets (``run_seconds``), else each input set after the first."""
        warm, timed = list(self.warmup_seconds), list(self.run_seconds)
        if not timed and not warm:
            first = self.infer_seconds[0] if self.infer_seconds else None
            steady = self.infer_seconds[1:]
        elif warm:
            first, steady = warm[0], timed
        else:
            first, steady = timed[0], timed[1:]
        p50 = p90 = None
        if steady and self.ok:
            p50, p90 = (float(v) for v in np.percentile(steady, [50, 90]))
        return Speed(
            self.compile_seconds,
            first if self.ok else None,
            p50,
            p90,
            len(steady) if self.ok else 0,
            max(len(warm) - 1, 0),
        )

    def to_json(self) -> dict[str, Any]:
        """JSON-ready summary (no arrays)."""
        n = len(self.infer_seconds)
        return plain(
            {
                "runner": self.runner,
                "status": self.status,
                "error": self.error,
                "executed": self.executed,
                "unreadable_outputs": self.unreadable,
                "compile_seconds": self.compile_seconds,
                "inference_seconds": {
                    "count": n,
                    "total": sum(self.infer_seconds),
                    "mean": sum(self.infer_seconds) / n if n else None,
                    "min": min(self.infer_seconds) if n else None,
                    "max": max(self.infer_seconds) if n else None,
                },
                "speed": self.speed,
                "wall_seconds": self.wall_seconds,
                "notes": self.notes,
            }
        )


def harness_timings(record: Mapping[str, Any]) -> dict[str, Any]:
    """A harness backend record's times as :class:`RunResult` fields: the compile, the warm-up
    runs, every timed run (``run_seconds``: one list per input set) and their mean per set."""
    each = record.get("run_seconds") or []
    return {
        "compile_seconds": record.get("compile_seconds"),
        "infer_seconds": [sum(t) / len(t) for t in each if t],
        "warmup_seconds": list(record.get("warmup_seconds") or []),
        "run_seconds": [t for one in each for t in one],
    }


@runtime_checkable
class Runner(Protocol):
    """Anything that turns input sets into outputs: a runtime, an accelerator, a framework."""

    name: str

    def activate(self) -> None:
        """Load or compile; raise on failure (``execute`` records it)."""

    def infer(self, feeds: Sequence[Feed]) -> RunResult:
        """Run every input set and return the outputs with what executed."""
        ...

    def deactivate(self) -> None:
        """Release what ``activate`` took."""


@dataclass(frozen=True)
class RunnerSpec:
    """What a runner is: read from here, never parsed from its name.

    ``precision``: the tolerance class of what it may compute in ("fp16": half precision, or an
    external delegate of unknown precision; "fp32"). ``device``: "cpu", "gpu" (this machine's
    GPU accelerator), "browser" (LiteRT.js in headless Chromium), "external" (a delegate
    ``.so``), "framework" (the reference), "device" (only on a device through its harness).
    ``harness``: the device protocol's backend name for it (``tflkit.harness.protocol``).
    ``kernels``: the CPU interpreter's kernels ("xnnpack", "reference": LiteRT's reference
    kernels). ``emulated``: fp16 emulated op by op on the CPU. ``localize``: ``validate
    --localize`` runs its ops alone. ``steps``: ``validate --steps`` runs it step by step.
    ``baseline``: the runner on the same device whose steady-state time its speed-up is measured
    against (a GPU's CPU path: XNNPACK natively, Wasm in a browser).
    """

    name: str
    precision: str
    device: str
    harness: str | None = None
    kernels: str | None = None
    emulated: bool = False
    localize: bool = False
    steps: bool = False
    #: the LiteRT-LM engine's backend ("cpu", "gpu") of a runner on device "engine" (a
    #: ``.litertlm`` bundle in the engine, not a ``.tflite``)
    engine_backend: str | None = None
    baseline: str | None = None

    @property
    def integer_kernels(self) -> bool:
        """It computes a quantized model on its 8-bit grid (LiteRT's CPU kernels)."""
        return self.kernels is not None


#: Every runner, in the order the CLI lists them. "gpu": the classic GPU delegate of a device's
#: harness, which allows fp16 by default on Android. webgpu-fp16, webgpu-fp32 and wasm: LiteRT.js
#: in headless Chromium (one browser job runs them all).
RUNNER_SPECS: tuple[RunnerSpec, ...] = (
    RunnerSpec("cpu", "fp32", "cpu", harness="cpu", kernels="xnnpack", steps=True),
    RunnerSpec("cpu-ref", "fp32", "cpu", kernels="reference", steps=True),
    RunnerSpec("cpu-fp16", "fp16", "cpu", emulated=True, localize=True, steps=True),
    RunnerSpec(
        "gpu-fp16", "fp16", "gpu", harness="gpu_fp16", localize=True, steps=True, baseline="cpu"
    ),
    RunnerSpec(
        "gpu-fp32", "fp32", "gpu", harness="gpu_fp32", localize=True, steps=True, baseline="cpu"
    ),
    RunnerSpec("gpu", "fp16", "device", harness="gpu_delegate", baseline="cpu"),
    RunnerSpec("webgpu-fp16", "fp16", "browser", harness="webgpu_fp16", baseline="wasm"),
    RunnerSpec("webgpu-fp32", "fp32", "browser", harness="webgpu_fp32", baseline="wasm"),
    RunnerSpec("wasm", "fp32", "browser", harness="wasm"),
    RunnerSpec("delegate", "fp16", "external"),
    RunnerSpec("reference", "fp32", "framework"),
    # the LiteRT-LM engine on a bundle (validate B.litertlm); GPU fp16: its default activations
    RunnerSpec("litert-lm-cpu", "fp32", "engine", engine_backend="cpu"),
    RunnerSpec("litert-lm-gpu", "fp16", "engine", engine_backend="gpu", baseline="litert-lm-cpu"),
    RunnerSpec(
        "litert-lm-gpu-fp32", "fp32", "engine", engine_backend="gpu", baseline="litert-lm-cpu"
    ),
)
_BY_NAME = {spec.name: spec for spec in RUNNER_SPECS}
#: What ``validate`` runs when no runner is asked for, and ``regress record`` records.
VALIDATE_DEFAULT = ("cpu", "cpu-fp16", "gpu-fp16", "gpu-fp32")
RECORD_DEFAULT = ("cpu", "gpu-fp16", "gpu-fp32")


def runner_spec(name: str) -> RunnerSpec | None:
    """The spec of runner ``name``; a runner on a device (``gpu-fp16@adb:SERIAL``) has its
    backend's, an external delegate (``delegate``, ``delegate-xnnpack``) the delegate's."""
    base = name.split("@", 1)[0]
    return _BY_NAME.get(base) or (_BY_NAME["delegate"] if base.startswith("delegate") else None)


def device_of(name: str) -> str | None:
    """The device runner ``name`` ran on (``adb:SERIAL`` of ``gpu-fp16@adb:SERIAL``, as
    ``tflkit.harness.device_runs.runner_name`` builds it); None for this machine's runners."""
    _, sep, device = name.partition("@")
    return device if sep else None


def precision_of(name: str) -> str:
    """The precision class ("fp16" or "fp32") of runner ``name``; "fp32" for one without spec."""
    spec = runner_spec(name)
    return "fp32" if spec is None else spec.precision


def find_spec(**fields: Any) -> RunnerSpec:
    """The first spec whose fields have these values (``find_spec(kernels="reference")``)."""
    for spec in RUNNER_SPECS:
        if all(getattr(spec, k) == v for k, v in fields.items()):
            return spec
    raise LookupError(f"no runner with {fields}")


def spec_names(**fields: Any) -> tuple[str, ...]:
    """The names of the runners whose spec fields have these values, in registry order."""
    return tuple(s.name for s in RUNNER_SPECS if all(getattr(s, k) == v for k, v in fields.items()))


#: The inputs a runner takes, by feed name: (dtype, shape); a dimension below 0 takes any size,
#: a dtype of None any dtype.
InputMeta = Mapping[str, tuple[np.dtype | None, Sequence[int]]]


class FeedMismatch(UsageError):
    """A feed does not fit the runner's inputs (names, dtype, shape): nothing ran."""


def check_feeds(runner: str, feeds: Sequence[Feed], inputs: InputMeta) -> None:
    """Raise :class:`FeedMismatch`, one line naming the first misfit, unless every feed has
    exactly the names of ``inputs``, each with its dtype and shape."""
    for k, feed in enumerate(feeds):
        which = f"{runner}: input set {k}"
        missing = [n for n in inputs if n not in feed]
        extra = [n for n in feed if n not in inputs]
        if missing or extra:
            raise FeedMismatch(
                f"{which} does not fit the model's inputs {sorted(inputs)}: "
                + "; ".join(
                    f"{what} {names}"
                    for what, names in (("missing", missing), ("unknown", extra))
                    if names
                )
            )
        for name, (dtype, shape) in inputs.items():
            array = np.asarray(feed[name])
            fits = len(array.shape) == len(shape) and all(
                d < 0 or d == a for d, a in zip(shape, array.shape, strict=True)
            )
            if (dtype is not None and array.dtype != dtype) or not fits:
                want = [d if d >= 0 else "?" for d in shape]
                takes = "any dtype" if dtype is None else np.dtype(dtype).name
                raise FeedMismatch(
                    f"{which}: input {name!r} takes {takes} {want}, got "
                    f"{array.dtype.name} {list(array.shape)}"
                )


def execute(runner: Runner, feeds: Sequence[Feed], inputs: InputMeta | None = None) -> RunResult:
    """activate, infer, deactivate; any exception becomes a result with a status and one line.

    ``inputs``: the runner's inputs; every feed is checked against them first
    (:func:`check_feeds`: a feed that does not fit raises, nothing runs)."""
    if inputs is not None:
        check_feeds(runner.name, feeds, inputs)
    start = time.perf_counter()
    try:
        runner.activate()
    except Exception as exc:
        result = RunResult(
            runner.name, getattr(exc, "status", "compile_error"), error=one_line(exc)
        )
        result.wall_seconds = time.perf_counter() - start
        return result
    try:
        result = runner.infer(feeds)
    except Exception as exc:
        result = RunResult(runner.name, getattr(exc, "status", "run_error"), error=one_line(exc))
    finally:
        runner.deactivate()
    result.wall_seconds = time.perf_counter() - start
    return result


class RunnerUnavailable(RuntimeError):
    """The runner cannot start here (missing file, missing framework); status ``unavailable``."""

    status = "unavailable"
