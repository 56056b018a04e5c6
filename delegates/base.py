"""The runner registry: what each runner is, read from here, never parsed from its name.

Every runner is one :class:`RunnerSpec` of :data:`RUNNER_SPECS` (its identity, precision class,
device, what it can do, and the factory that builds it: :func:`tflkit.delegates.registry.build`),
read by everything that needs to know: tolerances, localization, repro, the device harnesses,
``--steps`` and the CLI. A runner's name is read once, where it enters (the CLI, a baseline, a
device's result), by :func:`runner_id` / :func:`parse_runner`, and a pair's by :func:`parse_pair`;
everything after holds a :class:`RunnerId` or a :class:`RunnerPair`. The protocol every runner
follows (``activate``/``infer``/``deactivate``, :class:`RunResult`, :func:`execute`) is
:mod:`tflkit.delegates.protocol`, re-exported here.
"""

from __future__ import annotations

from typing import Any

from tflkit.errors import UsageError

from . import backends as _wire
from . import registry as _build
from .protocol import (
    STATUSES,
    BuildRequest,
    Feed,
    FeedMismatch,
    InputMeta,
    Runner,
    RunnerId,
    RunnerPair,
    RunnerSpec,
    RunnerUnavailable,
    RunResult,
    Speed,
    StepPlan,
    check_feeds,
    execute,
    harness_timings,
    pair_key,
    split_pair,
    split_runner,
)

__all__ = [
    "RECORD_DEFAULT",
    "RUNNER_SPECS",
    "STATUSES",
    "TFLITE_RUNNERS",
    "VALIDATE_DEFAULT",
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
    "StepPlan",
    "check_feeds",
    "device_of",
    "execute",
    "find_spec",
    "harness_timings",
    "is_pair",
    "on_gpu",
    "pair_key",
    "pair_of",
    "parse_pair",
    "parse_runner",
    "precision_of",
    "runner_id",
    "runner_spec",
    "spec_by_harness",
    "spec_names",
]

_CPU = RunnerId("cpu")
_WASM = RunnerId("wasm")
_ENGINE = "litert-lm"
_GPU = "gpu"

#: Every runner, in the order the CLI lists them. ``gpu``: the classic GPU delegate of a device's
#: harness, which allows fp16 by default on Android. ``webgpu-*`` and ``wasm``: LiteRT.js in
#: headless Chromium (one browser job runs them all). ``litert-lm-*``: the LiteRT-LM engine on a
#: ``.litertlm`` bundle (``validate B.litertlm``); GPU fp16: its default activations.
RUNNER_SPECS: tuple[RunnerSpec, ...] = (
    RunnerSpec(_CPU, "fp32", "cpu", harness=_wire.CPU, kernels="xnnpack", steps=True,
               defaults=("validate",), factory=_build.cpu),
    RunnerSpec(RunnerId("cpu", "ref"), "fp32", "cpu", kernels="reference", steps=True,
               factory=_build.cpu),
    RunnerSpec(RunnerId("cpu", "fp16"), "fp16", "cpu", emulated=True, localize=True, steps=True,
               defaults=("validate",), factory=_build.fp16_emulation),
    RunnerSpec(RunnerId(_GPU, "fp16"), "fp16", "gpu", harness=_wire.GPU_FP16, localize=True,
               steps=True, baseline=_CPU.name, defaults=("validate",),
               factory=_build.gpu),
    RunnerSpec(RunnerId(_GPU, "fp32"), "fp32", "gpu", harness=_wire.GPU_FP32, localize=True,
               steps=True, baseline=_CPU.name, defaults=("validate",),
               factory=_build.gpu),
    RunnerSpec(RunnerId(_GPU), "fp16", "device", harness=_wire.GPU_DELEGATE, baseline=_CPU.name),
    RunnerSpec(RunnerId("webgpu", "fp16"), "fp16", "browser", harness=_wire.WEBGPU_FP16,
               baseline=_WASM.name, factory=_build.browser),
    RunnerSpec(RunnerId("webgpu", "fp32"), "fp32", "browser", harness=_wire.WEBGPU_FP32,
               baseline=_WASM.name, factory=_build.browser),
    RunnerSpec(_WASM, "fp32", "browser", harness=_wire.WASM, factory=_build.browser),
    RunnerSpec(RunnerId("delegate"), "fp16", "external", factory=_build.external),
    RunnerSpec(RunnerId("reference"), "fp32", "framework", factory=_build.reference),
    RunnerSpec(RunnerId(_ENGINE, "cpu"), "fp32", "engine", engine_backend="cpu",
               factory=_build.engine),
    RunnerSpec(RunnerId(_ENGINE, "gpu"), "fp16", "engine", engine_backend="gpu",
               baseline=f"{_ENGINE}-cpu", factory=_build.engine),
    RunnerSpec(RunnerId(_ENGINE, f"{_GPU}-fp32"), "fp32", "engine", engine_backend="gpu",
               baseline=f"{_ENGINE}-cpu", factory=_build.engine),
)  # fmt: skip
_BY_NAME = {spec.name: spec for spec in RUNNER_SPECS}
_BY_HARNESS = {spec.harness: spec for spec in RUNNER_SPECS if spec.harness is not None}
#: What ``validate`` runs on a ``.tflite``: every runner but those only a device's harness runs
#: and the LiteRT-LM engine's (they run bundles).
TFLITE_RUNNERS = tuple(s.name for s in RUNNER_SPECS if s.device not in ("device", "engine"))
#: What ``validate`` runs when no runner is asked for; what ``regress record`` records (a device
#: job's default backends).
VALIDATE_DEFAULT = tuple(s.name for s in RUNNER_SPECS if "validate" in s.defaults)
RECORD_DEFAULT = tuple(_BY_HARNESS[backend].name for backend in _wire.RECORD_BACKENDS)


def runner_id(name: str | RunnerId) -> RunnerId | None:
    """The identity of the runner called ``name`` (``gpu-fp16``, ``gpu-fp16@adb:SERIAL``);
    None when no runner of the registry has that name."""
    if isinstance(name, RunnerId):
        return name
    split = split_runner(name)
    if split is None or split[0] not in _BY_NAME:
        return None
    return _BY_NAME[split[0]].id.on(split[1])


def parse_runner(name: str | RunnerId, option: str = "--runner") -> RunnerId:
    """:func:`runner_id`, or a usage error naming ``option`` and the runners to choose from."""
    found = runner_id(name)
    if found is None:
        raise UsageError(
            f"{option}: unknown runner {str(name)!r}; choose from {', '.join(_BY_NAME)}"
        )
    return found


def parse_pair(text: str | RunnerPair, option: str = "--pair") -> RunnerPair:
    """``"actual:expected"`` (each side a runner's name, on a device or not) as a pair; a usage
    error naming ``option`` when it is not exactly one such pair."""
    if isinstance(text, RunnerPair):
        return text
    splits = split_pair(text, lambda side: runner_id(side) is not None)
    if len(splits) != 1:
        raise UsageError(
            f"{option} takes ACTUAL:EXPECTED, two runners (e.g. "
            f"{RunnerPair(find_spec(device='gpu').id, _CPU).key}), got {text!r}"
        )
    actual, expected = splits[0]
    return RunnerPair(parse_runner(actual, option), parse_runner(expected, option))


def pair_of(actual: str, expected: str) -> RunnerPair | None:
    """The pair of the runners called ``actual`` and ``expected``; None unless both are the
    registry's."""
    a, e = runner_id(actual), runner_id(expected)
    return None if a is None or e is None else RunnerPair(a, e)


def is_pair(text: str) -> bool:
    """``text`` is a pair's key (``actual:expected``)."""
    return len(split_pair(text, lambda side: runner_id(side) is not None)) == 1


def runner_spec(name: str | RunnerId) -> RunnerSpec | None:
    """The spec of runner ``name``; a runner on a device (``gpu-fp16@adb:SERIAL``) has its
    backend's."""
    found = runner_id(name)
    return None if found is None else _BY_NAME[found.local_name]


def on_gpu(name: str | RunnerId) -> bool:
    """Runner ``name`` runs on a GPU accelerator's backend (this machine's, at either
    precision, or a device's GPU; not a browser's WebGPU)."""
    found = runner_id(name)
    return found is not None and found.backend == _GPU


def spec_by_harness(backend: str) -> RunnerSpec | None:
    """The spec of the device protocol's backend ``backend`` (``gpu_fp16``, ``webgpu_fp32``)."""
    return _BY_HARNESS.get(backend)


def device_of(name: str | RunnerId) -> str | None:
    """The device runner ``name`` ran on (``adb:SERIAL`` of ``gpu-fp16@adb:SERIAL``, as
    ``tflkit.harness.device_runs.runner_name`` builds it); None for this machine's runners."""
    found = runner_id(name)
    return None if found is None else found.device


def precision_of(name: str | RunnerId) -> str:
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
