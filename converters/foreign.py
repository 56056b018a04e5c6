"""Converters that live in their own Python environment: ONNX (onnx2tf) and PyTorch (litert-torch).

Both run the same two steps as a plain script under the route's interpreter (the environment
tflkit provisions, or the user's ``--python``): ``convert`` writes ``model.tflite``; this process
then makes the seeded reference inputs from that model; ``reference`` runs the source framework
(ONNX Runtime, torch) on them. The reference file, the CPU-vs-source figures and the provenance
are made here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tflkit import ir
from tflkit.errors import UsageError
from tflkit.proc.result_file import RESULT_FILE
from tflkit.report.convert_report import ConvertReport

from . import _route_clock
from ._progress import without_escapes
from ._route_clock import STAGES, Budget, budget_for, progress_line
from ._runner import raise_for, run_worker, scratch_dir
from .base import ConversionError, ConvertOptions, MissingExtraError
from .envs import ROUTES, ensure_env
from .provenance import finalize, tool_version

if TYPE_CHECKING:
    from tflkit.ir.entry import IoSpec

__all__ = ["ONNX", "ONNX_TORCH", "TORCH", "ForeignRoute", "convert_foreign", "has_module"]


@dataclass(frozen=True)
class ForeignRoute:
    """A converter run as a script in its own environment (``route``: the environment)."""

    route: str
    script: str
    label: str
    name: str
    modules: tuple[str, ...]


ONNX = ForeignRoute("onnx", "_onnx_worker.py", "ONNX", "onnx2tf", ("onnx2tf", "onnxruntime"))
#: ONNX's second route: onnx2torch, then litert-torch, in the PyTorch route's environment
ONNX_TORCH = ForeignRoute(
    "torch", "_onnx_torch_worker.py", "ONNX", "onnx2torch", ("onnx2torch", "litert_torch")
)
TORCH = ForeignRoute(
    "torch", "_torch_worker.py", "PyTorch", "litert-torch", ("torch", "litert_torch")
)
#: post-conversion quantization of ONNX and PyTorch sources, in the PyTorch route's environment
QUANTIZE = ForeignRoute(
    "torch", "_quantize_worker.py", "quantization", "ai-edge-quantizer", ("ai_edge_quantizer",)
)
_ONNX_ROUTES = {"auto": (ONNX, ONNX_TORCH), "onnx2tf": (ONNX,), "onnx2torch": (ONNX_TORCH,)}

#: Options that only the TensorFlow route (Keras, SavedModel) knows.
_TF_ONLY = {
    "allow_flex": "--allow-flex",
    "fp16": "--fp16",
    "signature": "--signature",
    "unsafe_deserialization": "--unsafe-deserialization",
}


def has_module(python: str, module: str) -> bool:
    """Whether ``python`` can import ``module`` (asked in a child, nothing imported here)."""
    code = f"import importlib.util,sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    try:
        return subprocess.run([python, "-c", code], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _interpreter(
    route: ForeignRoute, options: ConvertOptions, report: ConvertReport, *, record: bool = True
) -> str:
    """The user's ``--python`` (checked), else the provisioned environment (built if missing);
    ``record``: it becomes the report's ``converter_env``."""
    if options.python is None:
        env = ensure_env(route.route)
        if record:
            report.converter_env = env.provenance()
        return str(env.python)
    python = str(options.python)
    spec = ROUTES[route.route][0]
    for module in route.modules:
        if not has_module(python, module):
            wanted = " ".join(spec.packages + spec.no_deps)
            raise MissingExtraError(
                f"{route.label} conversion with {route.name} needs {module} in {python} "
                f"(--python): install {wanted} there, or drop --python and tflkit builds its "
                f"own environment (tflkit converters install {route.route})"
            )
    report.converter_env = {"route": route.route, "python": python, "user_supplied": True}
    return python


def _step(
    python: str,
    route: ForeignRoute,
    step: str,
    source: Path,
    options: ConvertOptions,
    work: Path,
    script: str | None = None,
    budget: Budget | None = None,
    **extra: Any,
) -> dict[str, Any]:
    job = {"step": step, "source": str(source), "options": options.to_json(), "workdir": str(work)}
    (work / "job.json").write_text(json.dumps({**job, **extra}))
    (work / RESULT_FILE).unlink(missing_ok=True)
    outcome = None
    try:
        outcome = run_worker(
            [python, str(Path(__file__).with_name(script or route.script)), str(work / "job.json")],
            work,
            timeout=options.timeout,
            on_wait=progress_line(f"{route.name} {STAGES.get(step, step)}", budget),
            every=_route_clock.PROGRESS_S,
        )
        raise_for(outcome)
    except ConversionError as exc:  # the converter's own log, for --verbose
        tail = outcome.output_tail if outcome else getattr(exc, "output_tail", "")
        if tail:
            log = without_escapes(tail)
            exc.log = f"--- {route.name} {step}: the converter's log ---\n{log}"  # type: ignore[attr-defined]
        raise
    return outcome.state


def cpu_vs_reference(
    data: bytes,
    feeds: list[dict[str, np.ndarray]],
    refs: list[dict[str, np.ndarray]],
    out_quant: dict[str, tuple[float, int]],
) -> dict[str, float]:
    """Max |.tflite on the CPU - source framework| per output over the reference sets; quantized
    outputs (``out_quant``: scale, zero point) in the real values they stand for."""
    from tflkit.delegates.litert_cpu import LiteRTCpuRunner
    from tflkit.delegates.reference_io import real_values

    runner = LiteRTCpuRunner(data)
    with _native_stderr_silenced():  # LiteRT logs "Created TensorFlow Lite XNNPACK delegate"
        runner.activate()
    worst: dict[str, float] = {}
    for got, ref in zip(runner.infer(feeds).outputs, refs, strict=True):
        for name, value in real_values(got, out_quant).items():
            diff = np.abs(np.asarray(value, np.float64) - np.asarray(ref[name], np.float64))
            worst[name] = max(worst.get(name, 0.0), float(diff.max()) if diff.size else 0.0)
    return worst


@contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """Point fd 2 at /dev/null (native INFO lines) and restore it."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _channels_last(
    produced: dict[str, np.ndarray], shapes: list[tuple[int, ...]]
) -> dict[str, np.ndarray]:
    """The source's outputs in the ``.tflite``'s layout where onnx2tf moved channels last.

    Output by output in order (the converters keep it); an output whose shape already matches,
    or whose channels-last shape does not, is left alone.
    """
    if len(produced) != len(shapes):
        return produced
    out = {}
    for (name, value), shape in zip(produced.items(), shapes, strict=True):
        if value.ndim >= 3 and tuple(value.shape) != tuple(shape):
            moved = np.moveaxis(value, 1, -1)
            value = moved if tuple(moved.shape) == tuple(shape) else value
        out[name] = value
    return out


def _static_inputs(data: bytes) -> bytes:
    """onnx2tf keeps a -1 batch in ``shape_signature`` even with static input shapes: drop it."""
    from tflkit.delegates.litert_cpu import computed_shapes
    from tflkit.ir.shapes import dynamic_input_tensors, fix_input_shapes

    model = ir.load(data)
    dynamic = {t.name: t.shape for t in dynamic_input_tensors(model)}
    if not dynamic:
        return data
    fix_input_shapes(model, dynamic, infer=computed_shapes)
    return ir.dumps(model)


def _with_source_shapes(specs: list[IoSpec], sources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each .tflite input with its source shape: matched by name when every name matches (the
    .tflite's signature orders inputs by name), else by position."""
    by_name = {src.get("name"): src for src in sources}
    if not all(spec.name in by_name for spec in specs):
        by_name = {spec.name: src for spec, src in zip(specs, sources, strict=False)}
    return [
        {
            **spec.to_json(),
            "source_shape": by_name.get(spec.name, {}).get("source_shape"),
            "onnx_dtype": by_name.get(spec.name, {}).get("onnx_dtype"),
        }
        for spec in specs
    ]


def _narrowed_inputs(inputs: list[dict[str, Any]]) -> list[str]:
    """One note per input whose type the converter changed (litert-torch feeds int64 ids as
    int32): the app must feed the ``.tflite``'s type."""
    notes = []
    for spec in inputs:
        source = spec.get("onnx_dtype")
        if source and spec.get("dtype") and source != spec["dtype"]:
            notes.append(
                f"input {spec['name']}: {spec['dtype']} in the .tflite where the ONNX model takes "
                f"{source} (the converter changed it: feed {spec['dtype']})"
            )
    return notes


def _quantized(data: bytes, options: ConvertOptions, report: ConvertReport, work: Path) -> bytes:
    """``--quantize`` of a converted float model (:mod:`.quantize`), its worker run in the
    PyTorch route's environment."""
    from .quantize import quantize_converted

    python = _interpreter(QUANTIZE, options, report, record=False)

    def run(source: Path, **job: Any) -> dict[str, Any]:
        return _step(python, QUANTIZE, "quantize", source, options, work, **job)

    quantized, state = quantize_converted(data, options, work, run)
    report.versions.update({k: str(v) for k, v in state.get("versions", {}).items()})
    report.notes.append(f"quantized by {state.get('quantizer')}")
    report.notes += state.get("notes", [])
    return quantized


def _refuse_options(route: ForeignRoute, options: ConvertOptions) -> None:
    """One usage line for options the route does not take."""
    given = [flag for name, flag in _TF_ONLY.items() if getattr(options, name)]
    if given:
        raise UsageError(
            f"{', '.join(given)}: only for Keras and SavedModel sources, not {route.label}"
        )
    onnx_only = ["--input-value"] if options.input_values else []
    onnx_only += ["--converter-option"] if options.converter_options else []
    if options.converter_options and options.route == "onnx2torch":
        raise UsageError("--converter-option: onnx2tf's options, not for --route onnx2torch")
    onnx_only += ["--route"] if options.route != "auto" else []
    if onnx_only and route is not ONNX:
        raise UsageError(f"{', '.join(onnx_only)}: only for ONNX sources, not {route.label}")


def _unsupported_everywhere(failures: list[Exception]) -> str:
    """One line for ops no route converts: each op with its domain and opset, the converters
    that lack it, then the first route's advice (what the user can do)."""
    lacking: dict[tuple[str, str, Any], list[str]] = {}
    for exc in failures:
        for domain, op_type, opset, _count in getattr(exc, "unsupported", []):
            lacking.setdefault((domain, op_type, opset), []).append(str(exc.converter))  # type: ignore[attr-defined]
    names = []
    for (domain, op_type, opset), converters in lacking.items():
        where = f"opset {opset}" if opset is not None else "no opset imported"
        names.append(f"{domain} {op_type} ({where}), not supported by {' or '.join(converters)}")
    advice = next((a for a in (getattr(e, "advice", None) for e in failures) if a), "")
    return "; ".join(names) + (f": {advice}" if advice else "")


#: A converted float model whose CPU outputs differ from the source framework's by more than
#: this share of max(1, the output's peak) is wrong, not reassociated: on the ONNX corpus
#: (docs/onnx-corpus.md) right conversions stay at or below 4.3e-5 of it and wrong ones (onnx2tf
#: on openWakeWord's heads and magika 0.6/1.0) start at 1.8e-2, 20x on either side.
WRONG_SHARE = 1e-3


@dataclass
class _Checked:
    """A converted model, its reference sets and outputs, and how far the CPU is from them."""

    data: bytes
    sets: Any  # tflkit.validation.inputs.InputSets
    refs: list[dict[str, np.ndarray]]
    reference: dict[str, Any]  # the reference worker's state
    outputs: list[str]
    worst: dict[str, float]
    #: the file the source framework ran on: the user's, or the dequantized model when ONNX
    #: Runtime cannot run the quantized original
    held_to: Path

    def wrong(self) -> str | None:
        """Why the CPU's outputs are not the source's (None when they are)."""
        for name, diff in self.worst.items():
            peak = max(
                float(np.max(np.abs(r[name]))) if np.size(r[name]) else 0.0 for r in self.refs
            )
            if diff > WRONG_SHARE * max(1.0, peak):
                return (
                    f"converted, but output {name} differs from the source framework's on the "
                    f"CPU by {diff:.3g} (more than {WRONG_SHARE:g} x max(1, peak {peak:.3g}))"
                )
        return None


def _float_model(work: Path, state: dict[str, Any], label: str) -> bytes:
    """The converter's ``model.tflite`` with static inputs; refused if it kept flex/custom ops."""
    data = _static_inputs((work / "model.tflite").read_bytes())
    model = ir.load(data)
    flex = sorted({op.type for sg in model.subgraphs for op in sg.ops if op.is_custom})
    if flex:
        raise ConversionError(
            f"{state.get('converter', label)} left ops with no TFLite builtin: "
            f"{', '.join(flex)}; they could only run on the CPU (flex/custom ops), never on "
            "the GPU delegate"
        )
    return data


def _onnx_io_names(data: bytes, inputs: list[str], outputs: list[str]) -> bytes:
    """litert-torch names a signature's inputs ``args_0``, ``args_1``... and its outputs
    ``output_0``...; give them the ONNX graph's names (the same order: onnx2torch's placeholders
    and outputs follow the ONNX graph's), which apps look them up by."""
    model = ir.load(data)
    if len(model.signatures) != 1:
        return data
    signature = model.signatures[0]
    for kind, names, generic in (("inputs", inputs, "args_"), ("outputs", outputs, "output_")):
        current = getattr(signature, kind)
        keys = list(current)
        if names and keys == [f"{generic}{i}" for i in range(len(names))]:
            renamed = {new: current[old] for old, new in zip(keys, names, strict=True)}
            setattr(signature, kind, renamed)
    return ir.dumps(model)


def _check_against_source(
    python: str, route: ForeignRoute, source: Path, options: ConvertOptions, work: Path, data: bytes
) -> _Checked:
    """Seeded realistic inputs for ``data``, the source framework's outputs on them (its own
    environment), and the CPU's distance to those."""
    from tflkit.delegates.reference_io import real_values
    from tflkit.delegates.tf_reference import match_outputs
    from tflkit.ir.entry import IoSpec, entry_point
    from tflkit.validation.inputs import make_input_sets

    model = ir.load(data)
    _, _, ins, outs = entry_point(model)
    sets = make_input_sets(model, count=options.reference_sets, seed=options.seed, kind="realistic")
    # --int8-io: the source gets the real values the int8 inputs stand for
    quant = {spec.name: spec.quant for spec in sets.specs if spec.quant is not None}
    real = [real_values(feed, quant) for feed in sets.feeds]
    arrays = {f"s{k}_in_{i}": f[n] for k, f in enumerate(real) for i, n in enumerate(ins)}
    np.savez(
        work / "feeds.npz",
        sets=np.array(len(sets.feeds)),
        names=np.array([str(n) for n in ins], dtype=str),
        **arrays,
    )
    ref = _step(python, route, "reference", source, options, work)
    wanted = {n: t.shape for n, t in outs.items()}
    refs = []
    with np.load(work / "outputs.npz") as npz:
        for k in range(len(sets.feeds)):
            produced = {n: npz[f"s{k}_out_{j}"] for j, n in enumerate(ref["output_names"])}
            produced = _channels_last(produced, list(wanted.values()))
            try:
                refs.append(match_outputs(produced, wanted)[0])
            except ValueError as exc:
                raise ConversionError(str(exc)) from None
    out_quant = {n: q for n, t in outs.items() if (q := IoSpec(n, t, t.shape).quant)}
    worst = cpu_vs_reference(data, sets.feeds, refs, out_quant)
    return _Checked(data, sets, refs, ref, list(outs), worst, source)


def _lacks(route: ForeignRoute, prepared: dict[str, Any]) -> ConversionError | None:
    """Why ``route`` cannot convert the prepared model, known from its op table before its
    converter starts (onnx2tf: its ``ops`` modules, listed without importing TensorFlow) or its
    environment is built (onnx2torch: ``converters/onnx2torch_ops.json``); None otherwise."""
    found = prepared.get("lacking", {}).get(route.name)
    if not found:
        return None
    error = ConversionError(found["message"])
    error.unsupported = [tuple(m) for m in found["ops"]]  # type: ignore[attr-defined]
    error.converter = found["converter"]  # type: ignore[attr-defined]
    error.advice = found["advice"]  # type: ignore[attr-defined]
    return error


#: How the preparation's line on ONNX Runtime's quantization starts (``_onnx_dequantize``).
DEQUANTIZED = "dequantized ONNX Runtime's quantization"


def _round_trip(
    python: str,
    source: Path,
    options: ConvertOptions,
    work: Path,
    data: bytes,
    report: ConvertReport,
    held: _Checked,
) -> _Checked:
    """The check against ONNX Runtime's outputs of the quantized original (what validation then
    compares with), and a note of what the round trip through float costs; ``held`` (the
    dequantized model's) when ONNX Runtime cannot run the original."""
    try:
        original = _check_against_source(python, ONNX, source, options, work, data)
    except ConversionError as exc:
        report.notes.append(
            f"ONNX Runtime cannot run the quantized original ({exc}): the reference is the "
            "dequantized float model"
        )
        return held
    cost = ", ".join(f"{name} {diff:.3g}" for name, diff in original.worst.items())
    report.notes.append(
        f"round trip: the dequantized model differs from ONNX Runtime's quantized original by "
        f"max abs {cost} (activations no longer rounded to int8); validate's cpu:reference "
        "compares with the quantized original"
    )
    return original


def _convert_onnx(
    source: Path, options: ConvertOptions, report: ConvertReport, work: Path
) -> tuple[str, dict[str, Any], _Checked]:
    """Prepare the ONNX model, then convert it by each route in turn until one gives a model
    whose CPU outputs are ONNX Runtime's.

    Returns the ONNX environment's interpreter (the reference runs there), the converting
    route's state and its check. Every attempt, and why it failed, goes to
    ``report.attempts``. When no route converts, one :class:`ConversionError` names each
    route's reason; when every model converted is wrong, the first is kept (validation then
    fails on ``cpu:reference`` and says by how much).
    """
    python = _interpreter(ONNX, options, report)
    prepared = _step(python, ONNX, "prepare", source, options, work)
    report.preparation = list(prepared.get("preparation", []))
    # a dequantized model is held to the float model the converters saw; the quantized
    # original then gives the reference (validation says what the round trip costs)
    dequantized = any(line.startswith(DEQUANTIZED) for line in report.preparation)
    reasons, failures = [], []
    kept: tuple[dict[str, Any], _Checked, dict[str, Any] | None] | None = None
    routes = _ONNX_ROUTES[options.route]
    for route in routes:
        start = time.perf_counter()
        lacking = _lacks(route, prepared)
        if lacking is not None:  # known before its environment is built or its converter runs
            if route is not routes[-1]:
                _say_switch(route, lacking)
            report.attempts.append({"route": route.name, "error": str(lacking), "seconds": 0.0})
            reasons.append(f"{route.name}: {lacking}")
            failures.append(lacking)
            continue
        # auto: a route with another after it runs on a budget for the model's size
        budget = budget_for(source) if route is not routes[-1] else None
        try:
            here = python if route is ONNX else _interpreter(route, options, report, record=False)
            prepared_path = Path(prepared["prepared"])
            state = _step(here, route, "convert", prepared_path, options, work, budget=budget)
            data = _float_model(work, state, route.name)
            if route is ONNX_TORCH:
                names = [i["name"] for i in prepared.get("inputs", [])]
                data = _onnx_io_names(data, names, prepared.get("outputs", []))
        except (ConversionError, MissingExtraError) as exc:
            if route is not routes[-1]:  # the switch is said, whatever stopped the route
                _say_switch(route, exc)
            seconds = round(time.perf_counter() - start, 1)
            report.attempts.append({"route": route.name, "error": str(exc), "seconds": seconds})
            reasons.append(f"{route.name}: {exc}")
            failures.append(exc)
            continue
        held_to = Path(prepared["prepared"]) if dequantized else source
        checked = _check_against_source(python, ONNX, held_to, options, work, data)
        wrong = checked.wrong()
        if wrong is None and dequantized:
            checked = _round_trip(python, source, options, work, data, report, checked)
        seconds = round(time.perf_counter() - start, 1)
        report.attempts.append({"route": route.name, "error": wrong, "seconds": seconds})
        state["inputs"] = prepared.get("inputs", [])
        env = None if route is ONNX or options.python else ensure_env(route.route).provenance()
        if kept is None:
            kept = (state, checked, env)
        if wrong is None:
            kept = (state, checked, env)
            break
    if kept is not None:
        state, checked, env = kept
        if env is not None:
            report.converter_env = env
        return python, state, checked
    raise _no_route(options, prepared, reasons, failures) from None


def _say_switch(route: ForeignRoute, why: Exception) -> None:
    """The one stderr line that says ``route`` failed and the next one is tried."""
    line = " ".join(str(why).split())
    cut = line if len(line) <= 160 else line[:159] + "…"
    print(f"tflkit: {route.name}: {cut}; trying the next route", file=sys.stderr, flush=True)


def _no_route(
    options: ConvertOptions, prepared: dict[str, Any], reasons: list[str], failures: list[Exception]
) -> ConversionError:
    """The one error when no route converted: each route's reason (or the op none of them has),
    with a hint where the model branches on an input, carrying each route's log."""
    if len(failures) > 1 and all(getattr(e, "unsupported", None) for e in failures):
        return _with_logs(ConversionError(_unsupported_everywhere(failures)), failures)
    tried = " and ".join(r.name for r in _ONNX_ROUTES[options.route])
    hint = ""
    branching = prepared.get("branch_inputs") or []
    if branching:
        pins = " ".join(f"--input-value {name}=VALUE" for name in branching)
        hint = (
            f"; the model branches (If) on {', '.join(branching)}: pin the value the app "
            f"feeds ({pins}) and the branch it takes replaces the If"
        )
    error = ConversionError(f"no route converted the model ({tried}): {'; '.join(reasons)}{hint}")
    return _with_logs(error, failures)


def _with_logs(error: ConversionError, failures: list[Exception]) -> ConversionError:
    """``error`` carrying each failed route's own log (``--verbose`` shows it)."""
    logs = [getattr(e, "log", "") for e in failures]
    error.log = "\n".join(log for log in logs if log)  # type: ignore[attr-defined]
    return error


def convert_foreign(
    route: ForeignRoute,
    source: Path,
    output: Path,
    options: ConvertOptions,
    report: ConvertReport,
) -> ConvertReport:
    """Convert ``source`` through ``route``; write ``output``, its provenance and reference file."""
    from tflkit.delegates.tf_reference import save_reference

    _refuse_options(route, options)
    with scratch_dir(output) as tmp:
        work = Path(tmp).resolve()
        if route is ONNX:
            python, state, checked = _convert_onnx(source, options, report, work)
        else:
            python = _interpreter(route, options, report)
            state = _step(python, route, "convert", source, options, work)
            data = _float_model(work, state, route.name)
            checked = _check_against_source(python, route, source, options, work, data)
        if options.quantize != "none":
            # the quantized model's own realistic inputs (photographs mapped onto the range its
            # first QUANTIZE covers, as validate makes them; int8 under --int8-io, the source
            # then fed their real values)
            data = _quantized(checked.data, options, report, work)
            checked = _check_against_source(python, route, checked.held_to, options, work, data)
        ref = checked.reference
        framework = str(ref.get("framework", ""))
        save_reference(
            work / "reference.npz",
            checked.sets.feeds,
            checked.refs,
            source=str(source),
            framework=framework,
            inputs=checked.sets.summary(),
        )
        report.reference_inputs = checked.sets.summary()
        report.converter = str(state.get("converter", route.route))
        report.versions.update({k: str(v) for k, v in state.get("versions", {}).items()})
        report.versions.update({k: str(v) for k, v in ref.get("versions", {}).items()})
        report.versions["framework"] = framework
        report.versions["ai-edge-litert"] = tool_version("ai-edge-litert") or "unknown"
        report.inputs = _with_source_shapes(checked.sets.specs, state.get("inputs", []))
        report.notes += _narrowed_inputs(report.inputs)
        report.outputs = checked.outputs
        report.convert_seconds = state.get("convert_seconds")
        report.cpu_vs_reference_max_abs = checked.worst
        finalize(checked.data, report, output, reference_tmp=work / "reference.npz")
    return report
