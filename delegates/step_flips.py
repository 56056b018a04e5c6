"""The 8-bit grid's wobble in half precision: a quantized model run op by op on the CPU, every
int8/uint8 op output moved by one quantization step with the odds fp16 gives it.

A GPU runs a quantized model dequantized: it computes each op in float (fp16 by default) and
rounds the result back onto the op's 8-bit grid. Where the float value lands within the GPU's
rounding error of a half step, the GPU picks the neighbouring step, so any intermediate
activation may be one step off, and the model carries those steps to its outputs. Moving the
inputs alone misses that: a first layer whose grid is coarser than the input's absorbs a one-step
input change (mltk's ``audio_example1`` on photographs: its outputs do not move at all, while
the GPU's fp16 run is 11 steps off and its fp32 run exact). This runner makes those flips happen
on purpose, so ``validate`` can measure how far they move each output: the noise the verdicts
of half-precision runners on quantized models scale by (docs/validate.md).
"""

from __future__ import annotations

import math

import numpy as np

from .fp16_emulation import Fp16EmulationRunner

__all__ = ["FP16_ROUNDOFF", "StepFlipRunner"]

#: fp16's unit roundoff (``tflkit.compare.sensitivity.EPS["fp16"]``)
FP16_ROUNDOFF = 2.0**-11


class StepFlipRunner(Fp16EmulationRunner):
    """Op by op on the CPU, float values kept as they are, int8/uint8 op outputs flipped a step
    with fp16's odds."""

    fp16_constants = False

    def __init__(self, model: bytes, *, signature: str | None = None, seed: int = 0):
        super().__init__(model, signature=signature, name="cpu-step-flips")
        self._rng = np.random.default_rng(seed)

    def store(self, value: np.ndarray, zero_point: int | None = None, terms: int = 1) -> np.ndarray:
        """An op's int8/uint8 output, each element one step off with the odds fp16 gives it.

        In fp16 the value of an element ``m = |q - zero_point|`` steps from zero is off by up to
        ``m * 2^-11`` steps (fp16's unit roundoff, the fp16 input perturbation's ``eps``), so it
        rounds to a neighbouring step with probability ``m * 2^-10`` (a window of ``2 m 2^-11``
        in a period of one step), towards either side. An element that sums ``terms`` products
        (a convolution, a dense layer) accumulates ``sqrt(terms)`` roundings in fp16 (the
        probabilistic bound of a sum's rounding error), so its odds grow by that factor; and
        its partial sums were of the size of the tensor's elements even where the sum ends near
        zero, so ``m`` is at least the tensor's RMS. A 4,000-long dense layer flips most of its
        outputs. Graph inputs (the input perturbation moves them) and float values are left
        alone.
        """
        if zero_point is None or value.dtype not in (np.int8, np.uint8):
            return value
        info = np.iinfo(value.dtype)
        magnitude = np.abs(value.astype(np.int64) - zero_point)
        if terms > 1 and magnitude.size:  # a sum near 0 had partial sums of the tensor's size
            magnitude = np.maximum(magnitude, math.sqrt(np.mean(magnitude.astype(np.float64) ** 2)))
        odds = magnitude * (2 * FP16_ROUNDOFF * math.sqrt(terms))
        flip = self._rng.random(value.shape) < odds
        step = np.where(flip, self._rng.choice((-1, 1), value.shape), 0)
        return np.clip(value.astype(np.int64) + step, info.min, info.max).astype(value.dtype)
