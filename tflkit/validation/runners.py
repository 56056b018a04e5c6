"""The runners ``validate`` builds by name (CPU, reference kernels, fp16 emulation, GPU, an
external delegate, the reference), and running them on the input sets."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from tflkit import ir
from tflkit.compare.comparator import OutputInfo
from tflkit.delegates.base import Runner, RunResult, execute
from tflkit.delegates.external import ExternalDelegateRunner
from tflkit.delegates.fp16_emulation import Fp16EmulationRunner
from tflkit.delegates.litert_cpu import LiteRTCpuRunner
from tflkit.delegates.litert_gpu import LiteRTGpuRunner
from tflkit.delegates.litert_js import BROWSER_RUNNERS, BrowserSession, LiteRtJsRunner
from tflkit.delegates.reference_io import Port, ReferenceIo
from tflkit.delegates.tf_reference import ReferenceRunner, is_bundle
from tflkit.errors import UsageError
from tflkit.ir.entry import entry_point
from tflkit.validation.inputs import InputSets
from tflkit.validation.options import ValidateOptions, say
from tflkit.validation.tflite_reference import TfliteReference, io_ports

__all__ = [
    "DEFAULT_RUNNERS",
    "RUNNERS",
    "build_runner",
    "check_pairs",
    "is_tflite",
    "reference_runner",
    "run_all",
    "runner_names",
]

#: webgpu-fp16, webgpu-fp32, wasm: LiteRT.js in headless Chromium (one browser job for all three)
RUNNERS = (
    "cpu",
    "cpu-ref",
    "cpu-fp16",
    "gpu-fp16",
    "gpu-fp32",
    *BROWSER_RUNNERS,
    "delegate",
    "reference",
)
DEFAULT_RUNNERS = ("cpu", "cpu-fp16", "gpu-fp16", "gpu-fp32")


def is_tflite(path: Path | None) -> bool:
    """A ``.tflite`` reference (not a framework model or a bundle)."""
    return path is not None and path.suffix == ".tflite"


def runner_names(options: ValidateOptions) -> list[str]:
    """The runners to run, in order: the asked ones (else the defaults) plus the reference and
    delegate runners their options imply; a usage error for what cannot run."""
    names = list(options.runners) or list(DEFAULT_RUNNERS)
    if options.reference is not None and "reference" not in names:
        names.append("reference")
    if options.delegate is not None and "delegate" not in names:
        names.append("delegate")
    unknown = [n for n in names if n not in RUNNERS]
    if unknown:
        raise UsageError(f"unknown runner(s) {unknown}; choose from {', '.join(RUNNERS)}")
    if "reference" in names and options.reference is None:
        raise UsageError(
            "the reference runner needs --reference (Keras, SavedModel, .npz or .tflite)"
        )
    if "delegate" in names and options.delegate is None:
        raise UsageError("the delegate runner needs --delegate path/to/delegate.so")
    if options.save_reference is not None and (
        options.reference is None or is_tflite(options.reference)
    ):
        raise UsageError("--save-reference needs --reference (the Keras model or SavedModel)")
    if options.reference is not None and not options.reference.exists():
        raise UsageError(f"reference {options.reference} does not exist")
    if options.browser_adapter not in ("swiftshader", "lavapipe"):
        raise UsageError(
            f"--browser-adapter takes swiftshader or lavapipe, got {options.browser_adapter!r}"
        )
    return list(dict.fromkeys(names))


def check_pairs(pairs: Sequence[tuple[str, str]], names: Sequence[str]) -> None:
    """A usage error for a ``--pair`` side that is not among the runners."""
    for actual, expected in pairs:
        for side in (actual, expected):
            if side not in names:
                raise UsageError(f"--pair {actual}:{expected}: {side} is not among the runners")


def build_runner(
    name: str,
    data: bytes,
    options: ValidateOptions,
    model: ir.Model,
    outputs: list[OutputInfo],
    tflite: TfliteReference | None = None,
) -> Runner:
    """The runner ``name`` of ``data`` (``tflite``: a ``.tflite`` reference, loaded)."""
    key = options.signature
    if name in ("cpu", "cpu-ref"):
        kernels = "xnnpack" if name == "cpu" else "reference"
        return LiteRTCpuRunner(data, kernels=kernels, signature=key, name=name)
    if name == "cpu-fp16":
        return Fp16EmulationRunner(data, signature=key)
    if name in BROWSER_RUNNERS:
        session = BrowserSession(
            data,
            [name],
            adapter=options.browser_adapter,
            signature=key,
            timeout=options.timeout,
        )
        return LiteRtJsRunner(session, name)
    if name in ("gpu-fp16", "gpu-fp32"):
        return LiteRTGpuRunner(
            data, enforce_f32=name == "gpu-fp32", signature=key, timeout=options.timeout
        )
    _, _, ins, outs = entry_point(model, key)
    if name == "delegate":
        assert options.delegate is not None
        return ExternalDelegateRunner(
            data,
            options.delegate,
            options=options.delegate_options,
            input_tensors={n: t.name for n, t in ins.items()},
            output_names={t.name: n for n, t in outs.items()},
            timeout=options.timeout,
        )
    return reference_runner(options, model, outputs, tflite)


def reference_runner(
    options: ValidateOptions,
    model: ir.Model,
    outputs: list[OutputInfo],
    tflite: TfliteReference | None,
    kernels: str = "xnnpack",
) -> Runner:
    """The reference runner (a ``.tflite`` on ``kernels``, a framework model or a bundle), fed
    and read in its own terms when they differ from the model's."""
    assert options.reference is not None
    key = options.signature
    _, _, ins, outs = entry_point(model, key)
    ports_in, ports_out = io_ports(ins), io_ports(outs)
    if tflite is not None:
        runner: Runner = tflite.runner(kernels, key)
        theirs: tuple[list[Port] | None, list[Port] | None] = tflite.ports()
    else:
        runner = ReferenceRunner(
            options.reference,
            outputs={o.name: o.shape for o in outputs},
            signature=key,
            timeout=options.timeout,
        )
        if is_bundle(options.reference):  # recorded on this model's own inputs
            return runner
        theirs = (None, None)
    try:
        adapter = ReferenceIo(
            runner,
            model_inputs=ports_in,
            model_outputs=ports_out,
            reference_inputs=theirs[0],
            reference_outputs=theirs[1],
        )
    except ValueError as exc:
        raise UsageError(f"--reference {options.reference}: {exc}") from None
    return adapter if adapter.adapted else runner


def run_all(
    names: Sequence[str],
    extra: Mapping[str, Runner],
    data: bytes,
    options: ValidateOptions,
    model: ir.Model,
    outputs: list[OutputInfo],
    sets: InputSets,
    tflite: TfliteReference | None = None,
) -> list[RunResult]:
    """Each runner of ``names`` (built here, or one of ``extra``) on every input set."""
    results = []
    browser = [n for n in names if n in BROWSER_RUNNERS and n not in extra]
    session = None
    if browser:  # one browser job for every browser runner
        session = BrowserSession(
            data,
            browser,
            adapter=options.browser_adapter,
            signature=options.signature,
            timeout=options.timeout,
        )
    for name in names:
        say(options, running_line(name))
        if name in extra:
            runner = extra[name]
        elif session is not None and name in browser:
            runner = LiteRtJsRunner(session, name)
        else:
            runner = build_runner(name, data, options, model, outputs, tflite)
        results.append(execute(runner, sets.feeds))
    return results


def running_line(name: str) -> str:
    """The progress line before running ``name``."""
    if name in BROWSER_RUNNERS:
        return (
            f"running {name} (LiteRT.js in headless Chromium; the first browser runner runs "
            "them all)"
        )
    if name.startswith("gpu"):
        return (
            f"running {name} (the first run of a model compiles its GPU shaders: tens of seconds "
            "on a software GPU)"
        )
    return f"running {name}"
