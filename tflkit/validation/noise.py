"""The model's own noise, which scales the verdicts (:mod:`tflkit.compare.sensitivity`): the CPU
run again on inputs perturbed at each precision the pairs need, next to the reference kernels;
one-step flips of a quantized model's activations; a quantized ``.tflite`` reference's own noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tflkit import ir
from tflkit.compare.comparator import OutputInfo
from tflkit.compare.sensitivity import EPS, FLIPS, SAME_GRID, OutputNoise, measure, perturb
from tflkit.compare.tolerances import precision_of, tolerance_for
from tflkit.delegates.base import BuildRequest, RunResult, execute, find_spec
from tflkit.delegates.registry import build
from tflkit.delegates.step_flips import StepFlipRunner
from tflkit.validation.inputs import InputSets, is_quantized, quantize_step
from tflkit.validation.inputs.indices import INDEX_KINDS
from tflkit.validation.options import ValidateOptions, say
from tflkit.validation.runners import Entry, reference_runner
from tflkit.validation.tflite_reference import TfliteReference

__all__ = ["FLIP_TRIALS", "Grading", "add_reference_noise", "calibrate", "sensitivity"]

#: trials of one-step flips (their largest effect counts): a flip that moves an output is a rare
#: event (mltk audio_example1 on photographs: 0 or 1 step on most seeds, 11 to 15 on a quarter)
FLIP_TRIALS = 4
#: the CPU runners whose outputs the noise is measured on: XNNPACK, LiteRT's reference kernels
_CPU, _CPU_REF = find_spec(kernels="xnnpack"), find_spec(kernels="reference")
_REFERENCE = find_spec(device="framework").name


@dataclass(frozen=True)
class Grading:
    """What the pairs are held to: ``quantized`` (the model has int8/uint8 tensors),
    ``same_grid`` (a ``.tflite`` reference on the model's own 8-bit grid) and
    ``quantized_reference`` (a quantized ``.tflite`` reference holds the pairs against it to the
    quantization contract even when this model is float: checked against the int8 model it
    replaces)."""

    quantized: bool
    same_grid: bool
    quantized_reference: bool

    @classmethod
    def of(cls, model: ir.Model, tflite: TfliteReference | None, signature: str | None) -> Grading:
        quantized = is_quantized(model)
        same_grid = quantized and tflite is not None and tflite.same_grid(model, signature)
        return cls(quantized, same_grid, tflite is not None and tflite.quantized)

    def pair_quantized(self, expected: str) -> bool:
        """Whether a pair against ``expected`` is held to the quantization contract."""
        return self.quantized or (expected == _REFERENCE and self.quantized_reference)


def calibrate(
    data: bytes,
    sets: InputSets,
    by_name: dict[str, RunResult],
    entry: Entry,
    outputs: list[OutputInfo],
    pairs: Sequence[tuple[str, str]],
    grading: Grading,
    options: ValidateOptions,
    tflite: TfliteReference | None = None,
) -> dict[str, dict[str, OutputNoise]]:
    """Per precision the ``pairs`` need, per output: the model's own noise."""
    say(options, "measuring the model's own noise on the CPU")
    quantized = grading.quantized
    precisions = {
        tolerance_for(
            a, e, quantized=grading.pair_quantized(e), same_grid=grading.same_grid
        ).precision
        for a, e in pairs
    } | ({"int8"} if quantized else set())
    if quantized and any("fp16" in (precision_of(a), precision_of(e)) for a, e in pairs):
        precisions.add(FLIPS)
    noise = sensitivity(data, sets, by_name, outputs, precisions, options)
    if grading.quantized_reference and not quantized and "int8" in noise:
        assert tflite is not None
        add_reference_noise(noise["int8"], sets, by_name, entry, outputs, options, tflite)
    return noise


def sensitivity(
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
    base = by_name.get(_CPU.name)
    if base is None:
        base = execute(build(_CPU, BuildRequest(data, key)), sets.feeds)
    if not base.ok:
        return {}
    spread = by_name.get(_CPU_REF.name)
    if spread is None:
        spread = execute(build(_CPU_REF, BuildRequest(data, key)), sets.feeds)
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
        moved = _held(
            sets,
            perturb(sets.feeds, EPS[precision], options.seed + 1 + seed_offset, quant, grid_steps),
        )
        trial = execute(build(_CPU, BuildRequest(data, key)), moved)
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
            flips = _flip_noise(data, sets, base, trial, steps, options)
            if flips is not None:
                noise[FLIPS] = flips
    return noise


def _held(sets: InputSets, moved: list[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
    """``moved`` with the index-like inputs (ids, lengths: :mod:`~tflkit.validation.inputs.
    indices`) as they were: a relative perturbation would move an id to another row."""
    held = [name for name, kind in sets.kinds.items() if kind in INDEX_KINDS]
    return [{**m, **{n: feed[n] for n in held}} for m, feed in zip(moved, sets.feeds, strict=True)]


def _flip_noise(
    data: bytes,
    sets: InputSets,
    base: RunResult,
    trial: RunResult,
    steps: dict[str, tuple[float, int]],
    options: ValidateOptions,
) -> dict[str, OutputNoise] | None:
    """The larger of the one-step input perturbation (``trial``) and :data:`FLIP_TRIALS` runs
    with one-step flips of every quantized activation; None when a flip run fails."""
    flips = [
        execute(
            StepFlipRunner(data, signature=options.signature, seed=options.seed + 1 + n),
            sets.feeds,
        )
        for n in range(FLIP_TRIALS)
    ]
    if not all(f.ok for f in flips):
        return None
    label = "one-step flips of quantized activations (fp16 odds)"
    return measure(
        base.outputs,
        [trial.outputs, *(f.outputs for f in flips)],
        FLIPS,
        dequantize=steps,
        labels=["inputs one step", *([label] * FLIP_TRIALS)],
    )


def add_reference_noise(
    noise: dict[str, OutputNoise],
    sets: InputSets,
    by_name: dict[str, RunResult],
    entry: Entry,
    outputs: list[OutputInfo],
    options: ValidateOptions,
    tflite: TfliteReference,
) -> None:
    """A float model against a quantized ``.tflite`` reference: the reference's own noise counts
    too (the quantization error is the reference's, not this model's): its response to a
    one-step input change and the spread of its two CPU kernel sets, element-wise the larger."""
    base = by_name.get(_REFERENCE)
    if base is None or not base.ok:
        return
    steps = tflite.steps_for(entry.inputs)
    moved = perturb(sets.feeds, EPS["int8"], options.seed + 1, None, steps)
    trial = execute(reference_runner(options, entry, outputs, tflite), moved)
    spread = execute(reference_runner(options, entry, outputs, tflite, "reference"), sets.feeds)
    if not trial.ok or not spread.ok:
        return
    labels = ["the quantized reference's inputs one step", "its XNNPACK vs reference kernels"]
    theirs = measure(base.outputs, [trial.outputs, spread.outputs], "int8", labels=labels)
    for name, extra in theirs.items():
        if name in noise:
            noise[name] = noise[name].widened(extra)
