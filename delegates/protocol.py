"""The runner protocol: turn input sets into outputs and record what really executed.

A runner knows nothing about comparison (Polygraphy's split), nor about the registry that says
what each runner is (:mod:`tflkit.delegates.base`): every runner module imports this module alone.
What a runner is, as values: :class:`RunnerId` (backend, variant, device: its name is formatted
from them, never split), :class:`RunnerPair` (two of them; its ``"a:b"`` key is formatted here
and parsed by :func:`split_pair` alone) and :class:`RunnerSpec` (what the registry knows of one,
with the factory that builds it).
``activate`` prepares a runner (load, compile), ``infer`` runs every input set, ``deactivate``
frees it; :func:`execute` drives the three and turns any failure into a :class:`RunResult` whose
``status`` says what happened, so a crash, a hang or a refused model is a finding, never an
exception that kills the caller.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from tflkit.errors import UsageError, one_line
from tflkit.jsonable import plain

if TYPE_CHECKING:  # numpy is imported where arrays are touched: the CLI's --help reads this
    import numpy as np

__all__ = [
    "STATUSES",
    "BuildRequest",
    "Feed",
    "FeedMismatch",
    "InputMeta",
    "RunResult",
    "Runner",
    "RunnerId",
    "RunnerPair",
    "RunnerSpec",
    "RunnerUnavailable",
    "Speed",
    "check_feeds",
    "execute",
    "harness_timings",
    "pair_key",
    "split_pair",
    "split_runner",
]

Feed = Mapping[str, "np.ndarray"]

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
            import numpy as np

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


#: The inputs a runner takes, by feed name: (dtype, shape); a dimension below 0 takes any size,
#: a dtype of None any dtype.
InputMeta = Mapping[str, tuple["np.dtype | None", Sequence[int]]]


class FeedMismatch(UsageError):
    """A feed does not fit the runner's inputs (names, dtype, shape): nothing ran."""


def check_feeds(runner: str, feeds: Sequence[Feed], inputs: InputMeta) -> None:
    """Raise :class:`FeedMismatch`, one line naming the first misfit, unless every feed has
    exactly the names of ``inputs``, each with its dtype and shape."""
    import numpy as np

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


@dataclass(frozen=True)
class RunnerId:
    """A runner's identity: ``backend`` (``cpu``, ``gpu``, ``webgpu``, ``wasm``, ``delegate``,
    ``reference``, ``litert-lm``), ``variant`` (its precision, ``fp16``/``fp32``, or kernels,
    ``ref``; None: the backend's one runner) and ``device`` (None: this machine; ``adb:SERIAL``,
    ``ssh:pi@board``, ``browser:lavapipe``: a device through its harness). Its :attr:`name` is
    formatted from them (``gpu-fp16@adb:SERIAL``); nothing reads the parts back from a name."""

    backend: str
    variant: str | None = None
    device: str | None = None

    @property
    def local_name(self) -> str:
        """The name without the device: the registry's name of this runner."""
        return self.backend if self.variant is None else f"{self.backend}-{self.variant}"

    @property
    def name(self) -> str:
        """``backend[-variant][@device]``."""
        return self.local_name if self.device is None else f"{self.local_name}@{self.device}"

    @property
    def here(self) -> bool:
        """It runs on this machine (not on a device through its harness)."""
        return self.device is None

    def on(self, device: str | None) -> RunnerId:
        """This runner on ``device`` (None: this machine)."""
        return replace(self, device=device)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class RunnerPair:
    """``actual`` judged against ``expected``; :attr:`key` is the ``"actual:expected"`` of JSON
    reports and ``--pair`` / ``--tolerance`` (the one place it is formatted)."""

    actual: RunnerId
    expected: RunnerId

    @property
    def key(self) -> str:
        return pair_key(self.actual.name, self.expected.name)

    def __str__(self) -> str:
        return self.key


def pair_key(actual: str, expected: str) -> str:
    """The ``"actual:expected"`` key of two runners' names (the one place it is formatted)."""
    return f"{actual}:{expected}"


#: A runner's name: the registry's name, then ``@DEVICE`` (a device spec may hold ``@`` or ``:``
#: itself: ``ssh:pi@board``); a registry name holds neither.
_RUNNER_TEXT = re.compile(r"(?P<local>[^@:]+)(?:@(?P<device>.+))?")


def split_runner(text: str) -> tuple[str, str | None] | None:
    """``(registry name, device)`` of a runner's name (None: not a runner's name). The one
    reading of a name: :func:`tflkit.delegates.base.runner_id` resolves the registry name."""
    m = _RUNNER_TEXT.fullmatch(text.strip())
    return None if m is None else (m["local"], m["device"])


def split_pair(text: str, known: Callable[[str], bool]) -> list[tuple[str, str]]:
    """Every ``(actual, expected)`` split of ``"actual:expected"`` at a ``:`` whose two sides
    are runners by ``known`` (a device's runner holds ``:`` too: ``gpu-fp16@adb:SERIAL:cpu``)."""
    found = []
    for k, ch in enumerate(text):
        if ch == ":" and known(text[:k]) and known(text[k + 1 :]):
            found.append((text[:k], text[k + 1 :]))
    return found


@dataclass(frozen=True)
class BuildRequest:
    """What a runner is built on, beyond its spec: the model (bytes; a ``.litertlm`` bundle's
    path for the engine), the entry point, the timeout and, per kind of runner, its extras:
    ``browser_adapter`` and ``session`` (the browser job the browser runners share),
    ``delegate`` / ``delegate_options`` / ``input_tensors`` / ``output_names`` (an external
    delegate's ``.so`` and the model's tensor names), ``outputs`` (the reference's output shapes
    by name), ``steps`` (a ``--steps`` run: the
    :class:`~tflkit.delegates.kv_steps.KvProgram`, the decode steps and the GPU child's
    ``feeds_dir``), ``engine`` (the LiteRT-LM engine's ``max_output_tokens`` and ``one_cpu``)."""

    model: Any
    signature: str | None = None
    timeout: float = 300.0
    browser_adapter: str = "swiftshader"
    session: Any = None
    delegate: Any = None
    delegate_options: Mapping[str, str] = field(default_factory=dict)
    input_tensors: Mapping[str, str] = field(default_factory=dict)
    output_names: Mapping[str, str] = field(default_factory=dict)
    outputs: Mapping[str, Any] = field(default_factory=dict)
    steps: StepPlan | None = None
    engine: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StepPlan:
    """A ``--steps`` run: the KV-cache ``program``, ``steps`` decode steps, and where the GPU
    child saves every decode call's feeds (``feeds_dir``, for ``--localize``)."""

    program: Any
    steps: int
    feeds_dir: Any = None


#: Builds the runner of a spec: ``factory(spec, request)``.
Factory = Callable[["RunnerSpec", BuildRequest], Runner]


@dataclass(frozen=True)
class RunnerSpec:
    """What a runner is: read from here, never parsed from its name.

    ``id``: its :class:`RunnerId` on this machine. ``precision``: the tolerance class of what it
    may compute in ("fp16": half precision, or an external delegate of unknown precision;
    "fp32"). ``device``: "cpu", "gpu" (this machine's GPU accelerator), "browser" (LiteRT.js in
    headless Chromium), "external" (a delegate ``.so``), "framework" (the reference), "device"
    (only on a device through its harness), "engine" (the LiteRT-LM engine on a ``.litertlm``
    bundle). ``harness``: the device protocol's backend name for it
    (``tflkit.delegates.device_protocol``). ``kernels``: the CPU interpreter's kernels ("xnnpack",
    "reference": LiteRT's reference kernels). ``emulated``: fp16 emulated op by op on the CPU.
    ``localize``: ``validate --localize`` runs its ops alone. ``steps``: ``validate --steps``
    runs it step by step. ``engine_backend``: the engine's backend ("cpu", "gpu") of an engine
    runner. ``baseline``: the runner on the same device whose steady-state time its speed-up is
    measured against (a GPU's CPU path: XNNPACK natively, Wasm in a browser). ``defaults``: the
    commands that run it when no runner is named ("validate"; what ``regress record`` records is
    the device protocol's ``RECORD_BACKENDS``). ``factory``: what builds
    it (:func:`tflkit.delegates.registry.build`); None for a runner only a device's harness runs.
    """

    id: RunnerId
    precision: str
    device: str
    harness: str | None = None
    kernels: str | None = None
    emulated: bool = False
    localize: bool = False
    steps: bool = False
    engine_backend: str | None = None
    baseline: str | None = None
    defaults: tuple[str, ...] = ()
    factory: Factory | None = field(default=None, compare=False, repr=False)

    @property
    def name(self) -> str:
        """The registry's name of this runner (``gpu-fp16``)."""
        return self.id.name

    @property
    def integer_kernels(self) -> bool:
        """It computes a quantized model on its 8-bit grid (LiteRT's CPU kernels)."""
        return self.kernels is not None
