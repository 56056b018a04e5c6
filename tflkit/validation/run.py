"""``validate``: run a model on several runners with the same inputs, compare, localize.

The runners only produce outputs and say what ran (:mod:`tflkit.delegates`); the comparison
only sees arrays (:mod:`tflkit.compare`); this module wires them and builds the report.

Verdicts are scaled by the model's own noise (:mod:`tflkit.compare.sensitivity`): the CPU is
run again on inputs perturbed at each precision the pairs need, next to the reference kernels,
and each output may differ by a measured multiple of how much it moves on its own.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tflkit import ir
from tflkit.compare.comparator import OutputInfo, PairComparison, compare_pair, default_pairs
from tflkit.compare.sensitivity import EPS, FLIPS, SAME_GRID, OutputNoise, measure, perturb
from tflkit.compare.tolerances import DEFAULTS, precision_of, tolerance_for
from tflkit.delegates.base import Runner, RunResult, execute
from tflkit.delegates.external import ExternalDelegateRunner
from tflkit.delegates.fp16_emulation import Fp16EmulationRunner
from tflkit.delegates.litert_cpu import LiteRTCpuRunner
from tflkit.delegates.litert_gpu import LiteRTGpuRunner
from tflkit.delegates.reference_io import Port, ReferenceIo
from tflkit.delegates.step_flips import StepFlipRunner
from tflkit.delegates.tf_reference import ReferenceRunner, is_bundle, load_bundle, save_bundle
from tflkit.errors import UsageError
from tflkit.proc.cpu_smoke import ensure_cpu_safe
from tflkit.report.validate_report import ValidateReport
from tflkit.validation.inputs import (
    InputSets,
    IoSpec,
    entry_point,
    is_quantized,
    make_input_sets,
    quantize_step,
)
from tflkit.validation.localize import Localization, localize
from tflkit.validation.tflite_reference import TfliteReference, io_ports

__all__ = ["RUNNERS", "ValidateOptions", "output_kind", "validate"]

RUNNERS = ("cpu", "cpu-ref", "cpu-fp16", "gpu-fp16", "gpu-fp32", "delegate", "reference")
DEFAULT_RUNNERS = ("cpu", "cpu-fp16", "gpu-fp16", "gpu-fp32")
_THROUGH = {"RESHAPE", "SQUEEZE", "IDENTITY", "QUANTIZE", "DEQUANTIZE", "CAST"}

Progress = Callable[[str], None]
#: trials of one-step flips (their largest effect counts): a flip that moves an output is a rare
#: event (mltk audio_example1 on photographs: 0 or 1 step on most seeds, 11 to 15 on a quarter)
FLIP_TRIALS = 4
#: seconds spent naming the ops whose fp16 storage moves failing outputs (one emulated run per op)
STORAGE_BUDGET_S = 30.0


@dataclass
class ValidateOptions:
    """What to run and compare. Empty ``runners``/``pairs`` mean the defaults.

    ``input_kind``: "realistic" (photographs, audio, valid indices; random where nothing fits)
    or "random". ``calibrate``: scale verdicts by the model's measured noise (else the fixed
    tolerances). ``reference``: a Keras file, SavedModel, reference bundle (.npz) or another
    ``.tflite`` (the model this one replaces). ``progress`` is called with a line before each
    slow step.
    """

    runners: Sequence[str] = ()
    pairs: Sequence[tuple[str, str]] = ()
    reference: Path | None = None
    save_reference: Path | None = None
    delegate: Path | None = None
    delegate_options: Mapping[str, str] = field(default_factory=dict)
    inputs: Path | None = None
    num_inputs: int = 4
    seed: int = 0
    input_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    signature: str | None = None
    tolerances: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    localize: bool = False
    localize_runner: str | None = None
    timeout: float = 300.0
    input_kind: str = "realistic"
    calibrate: bool = True
    progress: Progress | None = None
    #: runners built elsewhere (on devices: :mod:`tflkit.harness.device_validate`), run after
    #: the named ones and compared like them
    extra_runners: Sequence[Runner] = ()


def _is_tflite(path: Path | None) -> bool:
    return path is not None and path.suffix == ".tflite"


def _runner_names(options: ValidateOptions) -> list[str]:
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
        options.reference is None or _is_tflite(options.reference)
    ):
        raise UsageError("--save-reference needs --reference (the Keras model or SavedModel)")
    if options.reference is not None and not options.reference.exists():
        raise UsageError(f"reference {options.reference} does not exist")
    return list(dict.fromkeys(names))


def _inputs(
    model: ir.Model, options: ValidateOptions, tflite: TfliteReference | None = None
) -> InputSets:
    ranges = None
    if tflite is not None:  # a float input this model states no range for: the reference's
        ranges = tflite.ranges_for(entry_point(model, options.signature)[2])
    sets = make_input_sets(
        model,
        signature=options.signature,
        source=options.inputs,
        count=options.num_inputs,
        seed=options.seed,
        shapes=options.input_shapes,
        kind=options.input_kind,
        fallback_ranges=ranges,
    )
    if options.reference is not None and is_bundle(options.reference) and options.inputs is None:
        bundle = load_bundle(options.reference)
        names = [s.name for s in sets.specs]
        if sorted(bundle.manifest["inputs"]) != sorted(names):
            raise UsageError(
                f"the reference bundle's inputs {bundle.manifest['inputs']} are not the "
                f"model's {names}"
            )
        return InputSets(
            bundle.feeds,
            sets.specs,
            f"reference bundle:{options.reference}",
            kinds={n: "file" for n in names},
        )
    return sets


def output_kind(tensor: ir.Tensor) -> str:
    """What an output holds, from its dtype, shape and the op that makes it.

    "index"/"bool" (integers without quantization, booleans), "mask" (NHWC with >= 2 channels
    and at least 8x8 pixels: per-pixel classes), "probabilities" (made by SOFTMAX or LOGISTIC),
    "scores" (rank 2 with >= 2 columns), else "float".
    """
    dtype = tensor.dtype
    if dtype is not None and np.dtype(dtype).kind == "b":
        return "bool"
    if dtype is not None and np.dtype(dtype).kind in "iu" and not tensor.is_quantized:
        return "index"
    shape = tensor.shape
    if len(shape) == 4 and shape[-1] >= 2 and min(shape[1], shape[2]) >= 8:
        return "mask"
    producer = tensor.producer
    while producer is not None and producer.type in _THROUGH and producer.inputs:
        source = producer.inputs[0]
        producer = source.producer if source is not None else None
    if producer is not None and producer.type in ("SOFTMAX", "LOGISTIC"):
        return "probabilities"
    if len(shape) == 2 and shape[1] >= 2:
        return "scores"
    return "float"


def _output_infos(outputs: Mapping[str, ir.Tensor]) -> list[OutputInfo]:
    infos = []
    for name, tensor in outputs.items():
        spec = IoSpec(name, tensor, tensor.shape)
        quant = spec.quant
        infos.append(
            OutputInfo(
                name,
                spec.dtype.name,
                tensor.shape,
                scale=quant[0] if quant else None,
                zero_point=quant[1] if quant else 0,
                kind=output_kind(tensor),
            )
        )
    return infos


def _build(
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
    return _reference(options, model, outputs, tflite)


def _reference(
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


def _check_pairs(pairs: Sequence[tuple[str, str]], names: Sequence[str]) -> None:
    for actual, expected in pairs:
        for side in (actual, expected):
            if side not in names:
                raise UsageError(f"--pair {actual}:{expected}: {side} is not among the runners")


def _findings(
    results: Sequence[RunResult], pairs: Sequence[PairComparison], optional: set[str]
) -> list[str]:
    found = []
    for r in results:
        if not r.ok and r.runner not in optional:
            found.append(f"{r.runner} {r.status}: {r.error or 'no detail'}")
    for pair in pairs:
        for out in pair.outputs:
            if out.verdict == "fail":
                found.append(f"{pair.key} output {out.name}: " + "; ".join(out.reasons))
    return found


def _say(options: ValidateOptions, line: str) -> None:
    if options.progress is not None:
        options.progress(line)


def _sensitivity(
    data: bytes,
    sets: InputSets,
    by_name: dict[str, RunResult],
    outputs: Sequence[OutputInfo],
    precisions: set[str],
    options: ValidateOptions,
) -> dict[str, dict[str, OutputNoise]]:
    """Per precision, per output: how much the CPU's output moves on its own (see module doc).

    A quantized model compared with a half-precision runner also gets ``int8-fp16``: the larger
    of its one-step input perturbation and one-step flips of every quantized activation
    (:mod:`tflkit.delegates.step_flips`), what a GPU computing it in fp16 does to it.
    """
    key = options.signature
    base = by_name.get("cpu")
    if base is None:
        base = execute(LiteRTCpuRunner(data, signature=key), sets.feeds)
    if not base.ok:
        return {}
    spread = by_name.get("cpu-ref")
    if spread is None:
        spread = execute(LiteRTCpuRunner(data, kernels="reference", signature=key), sets.feeds)
    quant = {s.name: s.quant for s in sets.specs if s.quant is not None}
    grid_steps = {s.name: step for s in sets.specs if (step := quantize_step(s.tensor))}
    steps = {o.name: (o.scale, o.zero_point) for o in outputs if o.scale is not None}
    noise: dict[str, dict[str, OutputNoise]] = {}
    if SAME_GRID in precisions:  # identical integer inputs, the same kernels: nothing moves
        label = "none: the same integer kernels on identical integer inputs"
        noise[SAME_GRID] = measure(
            base.outputs, [base.outputs], SAME_GRID, dequantize=steps, labels=[label]
        )
    for seed_offset, precision in enumerate(sorted(precisions - {FLIPS, SAME_GRID})):
        moved = perturb(
            sets.feeds, EPS[precision], options.seed + 1 + seed_offset, quant, grid_steps
        )
        trial = execute(LiteRTCpuRunner(data, signature=key), moved)
        if not trial.ok:
            continue
        noise[precision] = measure(
            base.outputs,
            [trial.outputs],
            precision,
            spread=spread.outputs if spread.ok and precision != "fp16" else None,
            dequantize=steps if precision == "int8" else None,
        )
        if precision == "int8" and FLIPS in precisions:
            flips = [
                execute(StepFlipRunner(data, signature=key, seed=options.seed + 1 + n), sets.feeds)
                for n in range(FLIP_TRIALS)
            ]
            if all(f.ok for f in flips):
                label = "one-step flips of quantized activations (fp16 odds)"
                noise[FLIPS] = measure(
                    base.outputs,
                    [trial.outputs, *(f.outputs for f in flips)],
                    FLIPS,
                    dequantize=steps,
                    labels=["inputs one step", *([label] * FLIP_TRIALS)],
                )
    return noise


def _add_reference_noise(
    noise: dict[str, OutputNoise],
    sets: InputSets,
    by_name: dict[str, RunResult],
    model: ir.Model,
    outputs: list[OutputInfo],
    options: ValidateOptions,
    tflite: TfliteReference,
) -> None:
    """A float model against a quantized ``.tflite`` reference: the reference's own noise counts
    too (the quantization error is the reference's, not this model's): its response to a
    one-step input change and the spread of its two CPU kernel sets, element-wise the larger."""
    base = by_name.get("reference")
    if base is None or not base.ok:
        return
    steps = tflite.steps_for(entry_point(model, options.signature)[2])
    moved = perturb(sets.feeds, EPS["int8"], options.seed + 1, None, steps)
    trial = execute(_reference(options, model, outputs, tflite), moved)
    spread = execute(_reference(options, model, outputs, tflite, "reference"), sets.feeds)
    if not trial.ok or not spread.ok:
        return
    labels = ["the quantized reference's inputs one step", "its XNNPACK vs reference kernels"]
    theirs = measure(base.outputs, [trial.outputs, spread.outputs], "int8", labels=labels)
    for name, extra in theirs.items():
        if name in noise:
            noise[name] = noise[name].widened(extra)


def validate(
    model_path: str | os.PathLike[str], options: ValidateOptions | None = None
) -> ValidateReport:
    """Run, compare and (optionally) localize; never raises for what a runtime does."""
    options = options or ValidateOptions()
    start = time.perf_counter()
    data, label = ir.serde.read_model_bytes(model_path)
    file_sha256 = hashlib.sha256(data).hexdigest()
    model = ir.load(data, label=label)
    if options.input_shapes:  # every runner, the GPU's included, runs the model at that shape
        from tflkit.rewriter.shapes import fix_input_shapes

        fix_input_shapes(model, options.input_shapes)
        data = ir.dumps(model)
    names = _runner_names(options)
    tflite = TfliteReference.load(options.reference) if _is_tflite(options.reference) else None
    extra = {r.name: r for r in options.extra_runners}
    names += [n for n in extra if n not in names]
    if options.localize or {"cpu", "cpu-ref"} & set(names):  # they run in this process
        ensure_cpu_safe(data, label, timeout=options.timeout)
    optional = {"cpu-fp16"} - set(options.runners)  # a default that may not apply to a model
    pairs = list(options.pairs) or default_pairs(names)
    _check_pairs(pairs, names)
    key, _, _, outs = entry_point(model, options.signature)
    sets = _inputs(model, options, tflite)
    outputs = _output_infos(outs)
    quantized = is_quantized(model)
    same_grid = quantized and tflite is not None and tflite.same_grid(model, options.signature)
    # a quantized .tflite reference holds the pairs against it to the quantization contract
    # even when this model is float (checked against the int8 model it replaces)
    quantized_reference = tflite is not None and tflite.quantized

    def pair_quantized(expected: str) -> bool:
        return quantized or (expected == "reference" and quantized_reference)

    results = []
    for name in names:
        _say(options, _running_line(name))
        runner = (
            extra[name] if name in extra else _build(name, data, options, model, outputs, tflite)
        )
        results.append(execute(runner, sets.feeds))
    by_name = {r.runner: r for r in results}
    bundle_path = None
    reference = by_name.get("reference")
    if options.save_reference is not None and reference is not None and reference.ok:
        framework = str(reference.executed.get("runtime"))
        bundle_path = str(
            save_bundle(
                options.save_reference,
                sets.feeds,
                reference.outputs,
                source=str(options.reference),
                framework=framework,
            )
        )
    noise: dict[str, dict[str, OutputNoise]] = {}
    if options.calibrate:
        _say(options, "measuring the model's own noise on the CPU")
        precisions = {
            tolerance_for(a, e, quantized=pair_quantized(e), same_grid=same_grid).precision
            for a, e in pairs
        } | ({"int8"} if quantized else set())
        if quantized and any("fp16" in (precision_of(a), precision_of(e)) for a, e in pairs):
            precisions.add(FLIPS)
        noise = _sensitivity(data, sets, by_name, outputs, precisions, options)
        if quantized_reference and not quantized and "int8" in noise:
            assert tflite is not None
            _add_reference_noise(noise["int8"], sets, by_name, model, outputs, options, tflite)
    comparisons = [
        compare_pair(
            by_name[a],
            by_name[e],
            outputs,
            overrides=options.tolerances,
            noise=noise,
            quantized=pair_quantized(e),
            same_grid=same_grid,
        )
        for a, e in pairs
    ]
    report = ValidateReport(
        model=label,
        model_sha256=file_sha256,
        signature=key,
        inputs=sets.to_json(),
        outputs=[
            {
                "name": o.name,
                "dtype": o.dtype,
                "shape": list(o.shape),
                "scale": o.scale,
                "kind": o.kind,
            }
            for o in outputs
        ],
        runners=results,
        pairs=comparisons,
        reference_bundle=bundle_path,
        sensitivity={p: {n: v.to_json() for n, v in per.items()} for p, per in noise.items()},
    )
    report.findings = _findings(results, comparisons, optional)
    report.unverified = [
        f"{p.key} output {o.name}: {'; '.join(o.reasons)}"
        for p in comparisons
        for o in p.outputs
        if o.verdict == "unverified"
    ]
    report.not_meaningful = [
        f"{p.key} output {o.name}: {o.reasons[0]}"
        for p in comparisons
        for o in p.outputs
        if o.verdict == "not-meaningful"
    ]
    storage = _fp16_storage(data, sets, by_name.get("cpu-fp16"), comparisons, options)
    report.notes = _notes(results, comparisons, optional, quantized, storage)
    dynamic = [s.name for s in sets.specs if s.tensor.is_dynamic]
    if dynamic and any(r.status == "compile_error" and r.runner.startswith("gpu") for r in results):
        report.notes.append(
            f"inputs {', '.join(dynamic)} have dynamic dimensions, which the GPU accelerator may "
            "refuse: fix them with tflkit rewrite --input-shape NAME=D1,D2,... and validate the "
            "result"
        )
    _verdict(report, comparisons, optional)
    if options.localize:
        _say(options, "localizing: running every op on its own")
        report.localization = _localize(data, model, sets, options, comparisons, names, tflite)
    report.wall_seconds = time.perf_counter() - start
    return report


def _running_line(name: str) -> str:
    if name.startswith("gpu"):
        return (
            f"running {name} (the first run of a model compiles its GPU shaders: tens of seconds "
            "on a software GPU)"
        )
    return f"running {name}"


def _fp16_storage(
    data: bytes,
    sets: InputSets,
    emulation: RunResult | None,
    comparisons: Sequence[PairComparison],
    options: ValidateOptions,
) -> dict[str, str]:
    """Per output the fp16 emulation fails on: the op at fault in fp16 (the first hazard: inf/NaN
    from finite inputs, an overflow), else the ops whose fp16 storage moves it most."""
    emulated = next((p for p in comparisons if p.key == "cpu-fp16:cpu"), None)
    failing = [o.name for o in emulated.outputs if o.verdict == "fail"] if emulated else []
    if not failing or emulation is None:
        return {}
    hazards = emulation.executed.get("fp16_hazards") or []
    if hazards:
        first = hazards[0]
        cause = f"the first op at fault in fp16 is op #{first['op_index']} {first['op_type']}"
        return {name: f"{cause} ({first['what']})" for name in failing}
    _say(options, "finding the ops whose fp16 storage moves the failing outputs")
    runner = Fp16EmulationRunner(data, signature=options.signature)
    try:
        runner.activate()
    except Exception:
        return {}
    found = {}
    try:
        for name in failing:
            effects, complete = runner.storage_effects(
                sets.feeds[0], name, budget=STORAGE_BUDGET_S / len(failing)
            )
            top = [e for e in effects if e[2] > 0][:3]
            if top:
                found[name] = (
                    "the values whose fp16 storage moves it most are the outputs of "
                    + ", ".join(f"op #{i} {t} ({v:.3g} alone)" for i, t, v in top)
                    + ("" if complete else " (among the ops tried in the time allowed)")
                )
    finally:
        runner.deactivate()
    return found


def _notes(
    results: Sequence[RunResult],
    comparisons: Sequence[PairComparison],
    optional: set[str],
    quantized: bool = False,
    storage: Mapping[str, str] | None = None,
) -> list[str]:
    """What the reader should know beyond pass/fail: emulation vs GPU, skipped optional runs."""
    notes = []
    storage = storage or {}
    fp32 = next((p for p in comparisons if p.key == "gpu-fp32:cpu"), None)
    fix = (
        "run this model on the GPU in fp32 (enforce_f32: gpu-fp32 passes here)"
        if fp32 is not None and fp32.verdict == "pass"
        else "run it in fp32 on the GPU"
    )
    for r in results:
        if r.runner in optional and not r.ok:
            notes.append(f"{r.runner} did not run: {r.error}")
    by_key = {p.key: p for p in comparisons}
    emulated, real = by_key.get("cpu-fp16:cpu"), by_key.get("gpu-fp16:cpu")
    if emulated is not None and (real is None or real.verdict == "skipped"):
        for e_out in emulated.outputs:
            if e_out.verdict == "fail":
                where = f"; {storage[e_out.name]}" if e_out.name in storage else ""
                notes.append(
                    f"fp16 finding, output {e_out.name}: the fp16 emulation fails, so storing "
                    f"this model's values in half precision costs this much{where}: run it in "
                    "fp32 on the GPU, or accept the loss"
                )
    elif (
        emulated is not None
        and real is not None
        and "skipped"
        not in (
            emulated.verdict,
            real.verdict,
        )
    ):
        for e_out, g_out in zip(emulated.outputs, real.outputs, strict=True):
            if e_out.verdict == g_out.verdict == "fail":
                where = f"; {storage[g_out.name]}" if g_out.name in storage else ""
                notes.append(
                    f"fp16 finding, output {g_out.name}: the fp16 emulation fails too, so fp16 "
                    f"storage itself costs this much on this model, not this GPU's kernels{where}"
                    f": {fix}, or accept the loss (--tolerance gpu-fp16:cpu@noise_factor=N)"
                )
                continue
            if e_out.verdict == g_out.verdict or "unverified" in (e_out.verdict, g_out.verdict):
                continue
            if e_out.verdict == "fail":
                where = f"; {storage[e_out.name]}" if e_out.name in storage else ""
                notes.append(
                    f"output {e_out.name}: the fp16 emulation fails where this GPU passes: "
                    "another GPU backend, without this one's fusions or fp32 accumulators, may "
                    "fail too (" + "; ".join(e_out.reasons[:1]) + f"){where}"
                )
            elif g_out.verdict == "fail" and (g_out.steps is not None or quantized):
                notes.append(
                    f"output {g_out.name}: the GPU computes this quantized model dequantized, in "
                    "fp16; the fp16 emulation runs its integer ops as the CPU does, so it does not "
                    "predict this path"
                )
            elif g_out.verdict == "fail":
                notes.append(
                    f"output {g_out.name}: this GPU fails where the fp16 emulation passes: the "
                    "GPU's kernels lose more than fp16 storage explains (precision inside a "
                    "kernel, or a backend bug)"
                )
    return notes


def _verdict(
    report: ValidateReport, comparisons: Sequence[PairComparison], optional: set[str]
) -> None:
    counted = [
        p
        for p in comparisons
        if not (p.verdict == "skipped" and ({p.actual, p.expected} & optional))
    ]
    if report.findings:
        report.verdict = "fail"
    elif any(p.verdict == "skipped" for p in counted) or not counted:
        report.verdict = "incomplete"
        report.findings.append(
            "nothing was compared for "
            + (", ".join(p.key for p in counted if p.verdict == "skipped") or "any pair")
        )
    elif all(p.verdict == "not-meaningful" for p in counted):
        report.verdict = "inconclusive"
        report.findings.append(
            "every output is constant or ~0 on these inputs: give inputs that exercise the "
            "model (--inputs)"
        )
    else:
        report.verdict = "pass"


def _localize(
    data: bytes,
    model: ir.Model,
    sets: InputSets,
    options: ValidateOptions,
    comparisons: Sequence[PairComparison],
    names: Sequence[str],
    tflite: TfliteReference | None = None,
) -> Localization:
    """Localize on the runner of the first failing pair (a GPU, the emulation, the reference)."""
    runner = options.localize_runner
    if runner is None:
        failing = [p.actual for p in comparisons if p.verdict == "fail"]
        failing += [p.expected for p in comparisons if p.verdict == "fail"]
        ran = [n for n in names if n in _LOCALIZABLE or (n == "reference" and tflite)]
        candidates = [n for n in failing if n in ran] or ran or ["gpu-fp16"]
        runner = candidates[0]
    if runner == "reference":
        if tflite is None:
            raise UsageError("--localize against a reference works with a .tflite reference")
    elif runner not in _LOCALIZABLE:
        raise UsageError(
            f"--localize works on gpu-fp16, gpu-fp32, cpu-fp16 or a .tflite reference, not {runner}"
        )
    _, _, ins, _ = entry_point(model, options.signature)
    feed = {n: np.asarray(v) for n, v in sets.feeds[0].items()}
    precision = "fp16" if runner in ("gpu-fp16", "cpu-fp16") else "fp32"
    threshold = tolerance_for(runner, "cpu", overrides=options.tolerances).rtol or (
        DEFAULTS[precision].rtol
    )
    against = tflite if runner == "reference" else None
    return localize(
        data,
        feed,
        inputs=ins,
        runner=runner,
        threshold=threshold,
        timeout=options.timeout,
        reference=None if against is None else against.data,
        reference_feed=None if against is None else against.feed_for(ins, feed),
    )


_LOCALIZABLE = ("gpu-fp16", "gpu-fp32", "cpu-fp16")
