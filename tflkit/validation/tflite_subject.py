"""``validate`` on a ``.tflite``: run it on several runners with the same inputs, compare, localize.

The runners only produce outputs and say what ran (:mod:`tflkit.delegates`); the comparison
only sees arrays (:mod:`tflkit.compare`); this module wires them and builds the report.

Verdicts are scaled by the model's own noise (:mod:`tflkit.compare.sensitivity`): the CPU is
run again on inputs perturbed at each precision the pairs need, next to the reference kernels,
and each output may differ by a measured multiple of how much it moves on its own.

Modules: :mod:`~tflkit.validation.options` (what to do), :mod:`~tflkit.validation.runners`
(building and running the runners), :mod:`~tflkit.validation.noise` (the model's own noise),
:mod:`~tflkit.validation.verdicts` (findings, notes, verdict); this one wires them into the
stages of :mod:`tflkit.validation.pipeline`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from tflkit import ir
from tflkit.compare.comparator import OutputInfo, PairComparison, compare_pair, default_pairs
from tflkit.compare.groups import ChannelGroup, detect_groups, fit_groups
from tflkit.compare.sensitivity import OutputNoise
from tflkit.compare.tolerances import DEFAULTS, tolerance_for
from tflkit.compat.custom_ops import refuse_edgetpu
from tflkit.delegates.base import RunResult, find_spec, precision_of, runner_spec, spec_names
from tflkit.delegates.tf_reference import is_reference_file, load_reference, save_reference
from tflkit.errors import UsageError
from tflkit.ir.entry import IoSpec
from tflkit.proc.cpu_smoke import ensure_cpu_safe
from tflkit.report.validate_report import ValidateReport
from tflkit.validation.inputs import InputSets
from tflkit.validation.inputs.indices import INDEX_KINDS
from tflkit.validation.localize import Localization, localize
from tflkit.validation.noise import Grading, calibrate
from tflkit.validation.options import ValidateOptions, say
from tflkit.validation.runners import (
    RUNNERS,
    Entry,
    check_pairs,
    is_tflite,
    resolve_entry,
    run_all,
    runner_names,
)
from tflkit.validation.tflite_reference import TfliteReference
from tflkit.validation.verdicts import conclude

__all__ = ["RUNNERS", "TfliteSubject", "output_kind", "output_kind_rule"]

_THROUGH = {"RESHAPE", "SQUEEZE", "IDENTITY", "QUANTIZE", "DEQUANTIZE", "CAST"}
_LOCALIZABLE = spec_names(localize=True)
#: the ground truths an output's channel groups are read from, best first
_REFERENCE = find_spec(device="framework").name
_CPU = find_spec(kernels="xnnpack").name
_GROUND = (*spec_names(device="cpu", emulated=False), _REFERENCE)


class TfliteSubject:
    """A ``.tflite`` as ``validate``'s subject: its input sets on every runner, each pair of
    runners compared output by output against the model's own noise
    (:mod:`tflkit.validation.pipeline` runs the stages)."""

    kind = "tflite"

    def __init__(self, model_path: str | os.PathLike[str], options: ValidateOptions) -> None:
        self.path = model_path
        self.options = options

    def prepare(self) -> None:
        """The model read (fixed to ``--input-shape``), the input sets sized to the memory
        budget before any inference, the runners and pairs named, the outputs described."""
        options = self.options
        data, self.label, self.file_sha256, model = _load(self.path, options)
        names = runner_names(options)
        options, fitted = _fit_memory(data, model, options, len(names))  # before any inference
        self.data, self.model = _fix_shapes(data, model, options)
        reference = options.reference
        self.tflite = TfliteReference.load(reference) if is_tflite(reference) else None
        self.extra = {r.name: r for r in options.extra_runners}
        names += [n for n in self.extra if n not in names]
        if options.localize or any(_in_process(n) for n in names):
            ensure_cpu_safe(self.data, self.label, timeout=options.timeout)
        # a default that may not apply to a model: the fp16 emulation
        self.optional = set(spec_names(emulated=True)) - set(options.runners)
        self.pairs = list(options.pairs) or default_pairs(names)
        check_pairs(self.pairs, names)
        self.entry = resolve_entry(self.model, options.signature)
        self.sets = _inputs(self.model, self.entry, options, self.tflite)
        self.sets.notes += fitted
        outputs = _output_infos(self.entry.outputs, list(self.entry.inputs.values()))
        self.outputs = _given_groups(outputs, options.output_groups)  # before running
        self.grading = Grading.of(self.model, self.tflite, options.signature)
        self.names, self.options = names, options

    def measure(self) -> None:
        """Every runner on every input set; the channel groups read from the ground truth's
        values; the model's noise measured; every pair compared."""
        options, grading = self.options, self.grading
        self.results = run_all(
            self.names, self.extra, self.data, options, self.entry, self.outputs, self.sets,
            self.tflite,
        )  # fmt: skip
        by_name = {r.runner: r for r in self.results}
        ground = [by_name.get(n) for n in _GROUND] + self.results
        self.outputs = _with_groups(
            self.outputs, next((r for r in ground if r and r.ok), None), options.output_groups
        )
        self.saved_reference = _save_reference(options, self.sets, by_name.get("reference"))
        self.noise: dict[str, dict[str, OutputNoise]] = {}
        if options.calibrate:
            self.noise = calibrate(
                self.data, self.sets, by_name, self.entry, self.outputs, self.pairs, grading,
                options, self.tflite,
            )  # fmt: skip
        self.comparisons = [
            compare_pair(
                by_name[a],
                by_name[e],
                self.outputs,
                overrides=options.tolerances,
                noise=self.noise,
                quantized=grading.pair_quantized(e),
                same_grid=grading.same_grid,
            )
            for a, e in self.pairs
        ]

    def judge(self) -> ValidateReport:
        """The report: findings, unverified and not-meaningful outputs, notes, the verdict."""
        report = ValidateReport(
            model=self.label,
            model_sha256=self.file_sha256,
            signature=self.entry.key,
            inputs=self.sets.to_json(),
            outputs=[_output_json(o) for o in self.outputs],
            runners=self.results,
            pairs=self.comparisons,
            reference_file=self.saved_reference,
            sensitivity={
                p: {n: v.to_json() for n, v in per.items()} for p, per in self.noise.items()
            },
        )
        conclude(
            report, self.data, self.sets, self.results, self.comparisons, self.optional,
            self.grading.quantized, self.options,
        )  # fmt: skip
        return report

    def wants_localization(self, report: ValidateReport) -> bool:
        """``--localize`` (or an option that implies it: ``--repro``, ``--localize-on``)."""
        return self.options.localize

    def localize(self, report: ValidateReport) -> None:
        """The op where the failing runner parts; with ``--repro``, its smallest chunk."""
        options = self.options
        say(options, "localizing: running every op on its own")
        report.localization = _localize(
            self.data, self.entry, self.sets, options, self.comparisons, self.names, self.tflite
        )
        if options.repro is not None:
            say(options, "writing the repro: shrinking the culprit's chunk on the GPU")
            failing = [p.key for p in self.comparisons if p.verdict == "fail"]
            report.notes.append(
                _repro(self.data, self.entry, self.sets, options, report.localization, self.label)
                if failing
                else "repro: nothing written: no pair fails, so there is no divergence to reproduce"
            )


def _load(
    model_path: str | os.PathLike[str], options: ValidateOptions
) -> tuple[bytes, str, str, ir.Model]:
    """The model's bytes, label, file hash and graph."""
    data, label = ir.serde.read_model_bytes(model_path)
    file_sha256 = hashlib.sha256(data).hexdigest()
    model = ir.load(data, label=label)
    refuse_edgetpu(model, label)
    return data, label, file_sha256, model


def _fix_shapes(data: bytes, model: ir.Model, options: ValidateOptions) -> tuple[bytes, ir.Model]:
    """With ``input_shapes``: the model's inputs fixed to them (every runner, the GPU's
    included, then runs the model at that shape)."""
    if options.input_shapes:
        from tflkit.delegates.litert_cpu import computed_shapes
        from tflkit.ir.shapes import fix_input_shapes

        fix_input_shapes(model, options.input_shapes, infer=computed_shapes)
        data = ir.dumps(model)
    return data, model


def _fit_memory(
    data: bytes, model: ir.Model, options: ValidateOptions, runners: int
) -> tuple[ValidateOptions, list[str]]:
    """The options with as many generated input sets as fit the memory budget, and the notes
    (:mod:`tflkit.validation.budget`; raises ``OverBudget`` when one inference does not fit)."""
    from tflkit.validation.budget import fit_input_sets, input_specs

    count, notes = fit_input_sets(
        data,
        model,
        input_specs(model, options),
        options.num_inputs if options.inputs is None else 1,
        signature=options.signature,
        runners=runners,
        budget=options.memory_budget,
        timeout=options.timeout,
        say=lambda line: say(options, line),
    )
    if options.inputs is None and count != options.num_inputs:
        options = replace(options, num_inputs=count)
    return options, notes


def _save_reference(
    options: ValidateOptions, sets: InputSets, reference: RunResult | None
) -> str | None:
    """With ``--save-reference``: the reference's outputs saved as a reference file; its path."""
    if options.save_reference is None or reference is None or not reference.ok:
        return None
    return str(
        save_reference(
            options.save_reference,
            sets.feeds,
            reference.outputs,
            source=str(options.reference),
            framework=str(reference.executed.get("runtime")),
        )
    )


def _output_json(output: OutputInfo) -> dict[str, object]:
    return {
        "name": output.name,
        "dtype": output.dtype,
        "shape": list(output.shape),
        "scale": output.scale,
        "kind": output.kind,
        "kind_rule": output.kind_rule,
        "groups": [g.to_json() for g in output.groups],
    }


def _in_process(name: str) -> bool:
    """The runner runs the CPU interpreter's kernels in this process."""
    spec = runner_spec(name)
    return spec is not None and spec.integer_kernels


def _inputs(
    model: ir.Model, entry: Entry, options: ValidateOptions, tflite: TfliteReference | None = None
) -> InputSets:
    ranges = None
    if tflite is not None:  # a float input this model states no range for: the reference's
        ranges = tflite.ranges_for(entry.inputs)
    sets = options.make_sets(model, fallback_ranges=ranges)
    reference = options.reference
    if reference is not None and is_reference_file(reference) and options.inputs is None:
        recorded = load_reference(reference)
        names = [s.name for s in sets.specs]
        if sorted(recorded.manifest["inputs"]) != sorted(names):
            raise UsageError(
                f"the reference file's inputs {recorded.manifest['inputs']} are not the "
                f"model's {names}"
            )
        # ids and lengths stay what they were: the noise calibration must not move them
        recorded_kinds = recorded.manifest.get("input_sets", {}).get("data", {})
        kinds = {n: k if (k := recorded_kinds.get(n)) in INDEX_KINDS else "file" for n in names}
        return InputSets(recorded.feeds, sets.specs, f"reference file:{reference}", kinds=kinds)
    return sets


#: strides at which a segmentation head's output may sit below its image input (deeplabv3: 1)
MASK_STRIDES = (1, 2, 4, 8, 16)
#: the fewest classes per step of a sequence of logits: a CTC vocabulary (ddddocr: 8,210; a
#: character-level ASR head: about 30), above the few values per anchor of a box regressor
SEQUENCE_MIN_CLASSES = 24
#: the heads whose per-step output is one classifier's logits (not a detector's concatenation of
#: boxes and sigmoid scores, not a multi-label LOGISTIC)
_SEQUENCE_HEADS = {"FULLY_CONNECTED", "BATCH_MATMUL", "LOG_SOFTMAX"}


def output_kind(tensor: ir.Tensor, inputs: Sequence[ir.Tensor] = ()) -> str:
    """What an output holds, from its dtype, shape and the op that makes it (see
    :func:`output_kind_rule` for the rule that decides; ``inputs``: the model's inputs, whose
    image sizes a mask must match)."""
    return output_kind_rule(tensor, inputs)[0]


def output_kind_rule(tensor: ir.Tensor, inputs: Sequence[ir.Tensor] = ()) -> tuple[str, str]:
    """(kind, the rule that decided it), first rule that holds (docs/validate.md):

    "bool"; "index" (integers without quantization); "mask" (NHWC, >= 2 channels, at least 8x8
    pixels, at an image input's own size or a stride of it, :data:`MASK_STRIDES`: per-pixel
    classes; a box regression over anchors, such as MTCNN's p-net's 27x27 on a 64x64 input, is
    not); "probabilities" (made by SOFTMAX or LOGISTIC, through RESHAPE/QUANTIZE/...);
    "sequence" ([T, 1, C] or [1, T, C], T >= 2, C >= :data:`SEQUENCE_MIN_CLASSES`, made by a
    classifier head: per-step logits, e.g. CTC); "scores" (rank 2 with >= 2 columns); "float".
    """
    dtype = tensor.dtype
    if dtype is not None and np.dtype(dtype).kind == "b":
        return "bool", "a bool output"
    if dtype is not None and np.dtype(dtype).kind in "iu" and not tensor.is_quantized:
        return "index", "an integer output without quantization"
    shape = tensor.shape
    if len(shape) == 4 and shape[-1] >= 2 and min(shape[1], shape[2]) >= 8:
        stride = _mask_stride(shape, inputs)
        if stride is not None:
            return "mask", f"NHWC with {shape[-1]} channels at 1/{stride} of an image input's size"
    producer = tensor.producer
    while producer is not None and producer.type in _THROUGH and producer.inputs:
        source = producer.inputs[0]
        producer = source.producer if source is not None else None
    if producer is not None and producer.type in ("SOFTMAX", "LOGISTIC"):
        return "probabilities", f"made by {producer.type}"
    head = producer
    while head is not None and head.type == "TRANSPOSE" and head.inputs:
        source = head.inputs[0]
        head = source.producer if source is not None else None
    if (
        len(shape) == 3
        and 1 in shape[:2]
        and max(shape[:2]) >= 2
        and shape[2] >= SEQUENCE_MIN_CLASSES
        and head is not None
        and head.type in _SEQUENCE_HEADS
    ):
        return "sequence", f"{list(shape)}: one {head.type} classifier's logits per step"
    if len(shape) == 2 and shape[1] >= 2:
        return "scores", "rank 2 with at least 2 columns"
    return "float", "no rule above holds"


def _mask_stride(shape: Sequence[int], inputs: Sequence[ir.Tensor]) -> int | None:
    """The stride at which an NHWC output's pixels sit on an image input's, or None."""
    for tensor in inputs:
        size = tensor.shape
        if len(size) != 4:
            continue
        spatial = size[1:3] if size[3] <= 4 else size[2:4]
        for stride in MASK_STRIDES:
            fits = [
                out in (dim // stride, -(-dim // stride))
                for out, dim in zip(shape[1:3], spatial, strict=True)
            ]
            if all(fits):
                return stride
    return None


def _output_infos(
    outputs: Mapping[str, ir.Tensor], inputs: Sequence[ir.Tensor] = ()
) -> list[OutputInfo]:
    infos = []
    for name, tensor in outputs.items():
        spec = IoSpec(name, tensor, tensor.shape)
        quant = spec.quant
        kind, rule = output_kind_rule(tensor, inputs)
        infos.append(
            OutputInfo(
                name,
                spec.dtype.name,
                tensor.shape,
                scale=quant[0] if quant else None,
                zero_point=quant[1] if quant else 0,
                kind=kind,
                kind_rule=rule,
            )
        )
    return infos


def _given_groups(
    outputs: Sequence[OutputInfo], given: Mapping[str, tuple[ChannelGroup, ...]]
) -> list[OutputInfo]:
    """The user's channel groups (``--output-groups``) placed on their outputs' axes."""
    unknown = sorted(set(given) - {o.name for o in outputs})
    if unknown:
        raise UsageError(
            f"--output-groups names no output of the model: {', '.join(unknown)} (outputs: "
            f"{', '.join(o.name for o in outputs)})"
        )
    return [
        replace(o, groups=fit_groups(o.name, o.shape, given[o.name])) if o.name in given else o
        for o in outputs
    ]


def _with_groups(
    outputs: Sequence[OutputInfo],
    reference: RunResult | None,
    given: Mapping[str, tuple[ChannelGroup, ...]],
) -> list[OutputInfo]:
    """Each output's channel groups: the user's (``--output-groups``, placed already), else
    detected from the CPU's values (:func:`tflkit.compare.groups.detect_groups`). A sequence
    whose values split into groups is a detector's output, not logits: judged as "float"."""
    found = []
    for info in outputs:
        if info.name in given:
            groups = info.groups
        elif info.kind in ("index", "bool") or reference is None or not reference.ok:
            groups = ()
        else:
            values = [np.asarray(out[info.name]) for out in reference.outputs if info.name in out]
            stacked = np.stack(values) if values else None
            if stacked is not None and info.scale and stacked.dtype.kind in "iu":
                stacked = (stacked.astype(np.float64) - info.zero_point) * info.scale
            groups = detect_groups(stacked, info.shape) if stacked is not None else ()
        if groups and info.kind == "sequence":
            info = replace(info, kind="float", kind_rule="a sequence's shape, but channel groups")
        found.append(replace(info, groups=groups) if groups else info)
    return found


def _repro(
    data: bytes,
    entry: Entry,
    sets: InputSets,
    options: ValidateOptions,
    loc: Localization,
    label: str,
) -> str:
    """``--repro DIR``: the culprit's smallest reproducing chunk written there; one line."""
    from tflkit.validation.repro import write_repro

    assert options.repro is not None
    feed = {n: np.asarray(v) for n, v in sets.feeds[0].items()}  # the set localize used
    return write_repro(
        data,
        feed,
        entry.inputs,
        loc,
        options.repro,
        command=options.repro_command,
        label=os.path.basename(label),
        timeout=options.timeout,
    ).message


def _localize(
    data: bytes,
    entry: Entry,
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
        ran = [n for n in names if n in _LOCALIZABLE or (n == _REFERENCE and tflite)]
        fallback = find_spec(device="gpu", precision="fp16").name
        runner = next(iter([n for n in failing if n in ran] or ran), fallback)
    if runner == _REFERENCE:
        if tflite is None:
            raise UsageError("--localize against a reference works with a .tflite reference")
    elif runner not in _LOCALIZABLE:
        raise UsageError(
            f"--localize works on gpu-fp16, gpu-fp32, cpu-fp16 or a .tflite reference, not {runner}"
        )
    ins = entry.inputs
    feed = {n: np.asarray(v) for n, v in sets.feeds[0].items()}
    threshold = tolerance_for(runner, _CPU, overrides=options.tolerances).rtol or (
        DEFAULTS[precision_of(runner)].rtol
    )
    against = tflite if runner == _REFERENCE else None
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
