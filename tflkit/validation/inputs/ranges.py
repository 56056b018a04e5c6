"""The values an input covers: the range random data is drawn from (:func:`value_range`), the real
range the model states (metadata, a quantized grid, a QUANTIZE op's grid), the grid step of a
float input a QUANTIZE op reads, and whether a model is quantized at all."""

from __future__ import annotations

import re

import numpy as np

from tflkit import ir
from tflkit.ir.entry import IoSpec, entry_point
from tflkit.ir.feeds import integer_range
from tflkit.validation.inputs.specs import input_metadata_of
from tflkit.validation.samples import InputMetadata

__all__ = ["input_real_ranges", "is_quantized", "quantize_step", "real_range", "value_range"]

_SIGNED_HINT = re.compile(r"norm|signed|audio|wave|pcm|sample|centered|minus", re.IGNORECASE)


def value_range(
    spec: IoSpec, meta: InputMetadata | None = None, fallback: tuple[float, float] | None = None
) -> tuple[float, float]:
    """The range random values for ``spec`` are drawn from (inclusive for integers).

    ``fallback``: the real-valued range of a float input the model itself says nothing about
    (no metadata, no QUANTIZE), from a caller that knows better (a quantized reference's grid).
    """
    dtype = spec.dtype
    tensor = spec.tensor
    if dtype.kind in "biu":
        return integer_range(dtype, tensor)
    known = real_range(spec, meta)
    if known is not None:
        return known
    if fallback is not None:
        return fallback
    if _SIGNED_HINT.search(spec.name) or _SIGNED_HINT.search(tensor.name):
        return -1.0, 1.0
    return 0.0, 1.0


def real_range(spec: IoSpec, meta: InputMetadata | None = None) -> tuple[float, float] | None:
    """The real values an input covers by the model's own account: its metadata's value range,
    the grid of a quantized input or of the QUANTIZE op that reads a float one; else None."""
    if spec.dtype.kind in "iu" and spec.quant is not None:
        info = np.iinfo(spec.dtype)
        scale, zero = spec.quant
        return (info.min - zero) * scale, (info.max - zero) * scale
    if spec.dtype.kind != "f":
        return None
    if meta is not None and meta.value_min is not None and meta.value_max is not None:
        return meta.value_min, max(meta.value_max, meta.value_min)
    grid = _quantized_by(spec.tensor)
    if grid is None:
        return None
    info = np.iinfo(grid.dtype)
    scale, zero = grid.scale_zero_point
    return (info.min - zero) * scale, (info.max - zero) * scale


def _quantized_by(tensor: ir.Tensor) -> ir.Tensor | None:
    """The per-tensor quantized output of the QUANTIZE op that reads ``tensor`` (a quantized
    model with float inputs), else None."""
    for op in tensor.consumers:
        if op.type == "QUANTIZE" and op.outputs and op.outputs[0].scale_zero_point is not None:
            return op.outputs[0]
    return None


def input_real_ranges(
    model: ir.Model, signature: str | None = None
) -> dict[str, tuple[float, float] | None]:
    """:func:`real_range` of every input of the entry point, by feed name."""
    _, subgraph, inputs, _ = entry_point(model, signature)
    specs = [IoSpec(name, t, t.shape) for name, t in inputs.items()]
    metas = input_metadata_of(model, subgraph, specs)
    return {s.name: real_range(s, m) for s, m in zip(specs, metas, strict=True)}


def is_quantized(model: ir.Model) -> bool:
    """Int8/uint8 weights or activations anywhere in the main subgraph."""
    return any(
        t.is_quantized and t.dtype is not None and np.dtype(t.dtype).kind in "iu"
        for t in model.main.tensors
    )


def quantize_step(tensor: ir.Tensor) -> float | None:
    """The step of the 8-bit grid a float input is put on by the QUANTIZE op that reads it (a
    quantized model with float inputs), else None."""
    if tensor.dtype is None or np.dtype(tensor.dtype).kind != "f":
        return None
    grid = _quantized_by(tensor)
    return None if grid is None else grid.scale_zero_point[0]
