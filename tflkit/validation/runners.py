"""The runners ``validate`` builds by name (CPU, reference kernels, fp16 emulation, GPU, an
external delegate, the reference), and running them on the input sets."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from tflkit import ir
from tflkit.compare.comparator import OutputInfo
from tflkit.delegates.base import (
    TFLITE_RUNNERS,
    VALIDATE_DEFAULT,
    BuildRequest,
    InputMeta,
    Runner,
    RunResult,
    execute,
    find_spec,
    runner_spec,
)
from tflkit.delegates.reference_io import Port, ReferenceIo
from tflkit.delegates.registry import browser_session, build
from tflkit.delegates.tf_reference import is_reference_file
from tflkit.errors import UsageError, require_extra
from tflkit.ir.entry import entry_point
from tflkit.validation.inputs import InputSets
from tflkit.validation.options import ValidateOptions, say
from tflkit.validation.tflite_reference import TfliteReference, io_ports

__all__ = [
    "DEFAULT_RUNNERS",
    "RUNNERS",
    "Entry",
    "build_runner",
    "check_pairs",
    "input_meta",
    "is_tflite",
    "reference_runner",
    "resolve_entry",
    "run_all",
    "runner_names",
]

#: what ``validate`` runs on a ``.tflite`` (the registry's)
RUNNERS = TFLITE_RUNNERS
DEFAULT_RUNNERS = VALIDATE_DEFAULT


class Entry(NamedTuple):
    """A model's resolved entry point (:func:`tflkit.ir.entry.entry_point`): resolved once per
    validation and handed to everything that needs its inputs or outputs."""

    key: str | None
    subgraph: ir.Subgraph
    inputs: dict[str, ir.Tensor]
    outputs: dict[str, ir.Tensor]


def resolve_entry(model: ir.Model, signature: str | None) -> Entry:
    """``signature``'s entry point of ``model`` (the first signature, or the main subgraph)."""
    return Entry(*entry_point(model, signature))


def is_tflite(path: Path | None) -> bool:
    """A ``.tflite`` reference (not a framework model or a reference file)."""
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
    _require_extras(names, options)
    return list(dict.fromkeys(names))


def _require_extras(names: Sequence[str], options: ValidateOptions) -> None:
    """Stop before any run, in one line, when a runner asked for needs an extra not installed."""
    if any(getattr(runner_spec(n), "device", None) == "browser" for n in names):
        require_extra("browser", "a browser runner (LiteRT.js in Chromium)", "playwright")
    ref = options.reference
    if ref is None or is_tflite(ref) or is_reference_file(ref) or ref.suffix == ".litertlm":
        return
    require_extra("convert", f"the TensorFlow reference {ref.name}", "tensorflow")


def check_pairs(pairs: Sequence[tuple[str, str]], names: Sequence[str]) -> None:
    """A usage error for a ``--pair`` side that is not among the runners."""
    for actual, expected in pairs:
        for side in (actual, expected):
            if side not in names:
                raise UsageError(f"--pair {actual}:{expected}: {side} is not among the runners")


def input_meta(entry: Entry) -> InputMeta:
    """The inputs every runner of ``entry`` takes: (dtype, shape signature) by feed name."""
    return {
        name: (t.dtype, tuple(t.shape_signature or t.shape)) for name, t in entry.inputs.items()
    }


def build_runner(
    name: str,
    data: bytes,
    options: ValidateOptions,
    entry: Entry,
    outputs: list[OutputInfo],
    tflite: TfliteReference | None = None,
) -> Runner:
    """The runner ``name`` of ``data`` at the resolved ``entry`` point (``tflite``: a
    ``.tflite`` reference, loaded)."""
    spec = runner_spec(name)
    assert spec is not None
    if spec.device == "framework":
        return reference_runner(options, entry, outputs, tflite)
    return build(spec, request(data, options, entry))


def request(
    data: bytes, options: ValidateOptions, entry: Entry, session: Any = None
) -> BuildRequest:
    """What every runner of this validation is built on: the model, its entry point, the
    options' timeout, browser adapter and external delegate, the model's tensor names."""
    return BuildRequest(
        data,
        options.signature,
        options.timeout,
        browser_adapter=options.browser_adapter,
        session=session,
        delegate=options.delegate,
        delegate_options=options.delegate_options,
        input_tensors={n: t.name for n, t in entry.inputs.items()},
        output_names={t.name: n for n, t in entry.outputs.items()},
    )


def reference_runner(
    options: ValidateOptions,
    entry: Entry,
    outputs: list[OutputInfo],
    tflite: TfliteReference | None,
    kernels: str = "xnnpack",
) -> Runner:
    """The reference runner (a ``.tflite`` on ``kernels``, a framework model or a reference
    file), fed and read in its own terms when they differ from the model's."""
    assert options.reference is not None
    key = options.signature
    ports_in, ports_out = io_ports(entry.inputs), io_ports(entry.outputs)
    if tflite is not None:
        runner: Runner = tflite.runner(kernels, key)
        theirs: tuple[list[Port] | None, list[Port] | None] = tflite.ports()
    else:
        spec = find_spec(device="framework")
        runner = build(
            spec,
            BuildRequest(
                options.reference,
                key,
                options.timeout,
                outputs={o.name: o.shape for o in outputs},
            ),
        )
        if is_reference_file(options.reference):  # recorded on this model's own inputs
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
    entry: Entry,
    outputs: list[OutputInfo],
    sets: InputSets,
    tflite: TfliteReference | None = None,
) -> list[RunResult]:
    """Each runner of ``names`` (built here, or one of ``extra``) on every input set, each set
    checked against the entry point's inputs first."""
    results = []
    browser = [
        spec
        for spec in (runner_spec(n) for n in names if n not in extra)
        if spec is not None and spec.device == "browser"
    ]
    session = None
    if browser:  # one browser job for every browser runner
        session = browser_session(
            data, browser, options.browser_adapter, options.signature, options.timeout
        )
    inputs = input_meta(entry)
    shared = request(data, options, entry, session)
    for name in names:
        say(options, running_line(name))
        spec = runner_spec(name)
        if name in extra:
            runner = extra[name]
        elif spec is not None and spec.device == "browser":
            runner = build(spec, shared)
        else:
            runner = build_runner(name, data, options, entry, outputs, tflite)
        results.append(execute(runner, sets.feeds, inputs))
    return results


def _device(name: str) -> str | None:
    spec = runner_spec(name)
    return None if spec is None else spec.device


def running_line(name: str) -> str:
    """The progress line before running ``name``."""
    device = _device(name)
    if device == "browser":
        return (
            f"running {name} (LiteRT.js in headless Chromium; the first browser runner runs "
            "them all)"
        )
    if device == "gpu":
        return (
            f"running {name} (the first run of a model compiles its GPU shaders: tens of seconds "
            "on a software GPU)"
        )
    return f"running {name}"
