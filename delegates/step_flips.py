"""The 8-bit grid's own wobble: a quantized model run op by op on the CPU, every int8/uint8
value between ops moved by one quantization step on a random part of its elements.

A GPU runs a quantized model dequantized: it computes each op in float (fp16 by default) and
rounds the result back onto the op's 8-bit grid. Wherever the float value lands within the GPU's
rounding error of a half step, the GPU picks the neighbouring step, so any intermediate activation
may be one step off, and the model carries those steps to its outputs. Moving the inputs alone
misses that: a first layer whose grid is coarser than the input's absorbs a one-step input change
(mltk's ``audio_example1`` on photographs: its outputs do not move at all, while the GPU's fp16
run is 11 steps off and its fp32 run exact). This runner makes those flips happen on purpose,
each value moving by -1, 0 or +1 step with equal odds (the input perturbation's rule), so
``validate`` can measure how far one-step flips inside the model move each output: the noise the
verdicts of half-precision runners on quantized models scale by (docs/validate.md).
"""

from __future__ import annotations

import numpy as np

from .fp16_emulation import Fp16EmulationRunner

__all__ = ["StepFlipRunner"]


class StepFlipRunner(Fp16EmulationRunner):
    """Op by op on the CPU, float values kept as they are, int8/uint8 values flipped by a step."""

    fp16_constants = False

    def __init__(self, model: bytes, *, signature: str | None = None, seed: int = 0):
        super().__init__(model, signature=signature, name="cpu-step-flips")
        self._rng = np.random.default_rng(seed)

    def store(self, value: np.ndarray, zero_point: int | None = None) -> np.ndarray:
        """An op's int8/uint8 output, each element moved by -1, 0 or +1 step (equal odds).

        Graph inputs (the input perturbation moves them) and float values are left alone.
        """
        if zero_point is None or value.dtype not in (np.int8, np.uint8):
            return value
        info = np.iinfo(value.dtype)
        step = self._rng.integers(-1, 2, value.shape)
        return np.clip(value.astype(np.int64) + step, info.min, info.max).astype(value.dtype)
