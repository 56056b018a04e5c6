"""Forms of ops that LiteRT's CPU kernels compute wrong while the GPU computes them right: not a
GPU finding, but the CPU is validate's baseline, so a GPU-vs-CPU failure on such a model is the
CPU's. Each form is measured (``PYTHONPATH=. python bench/int8_weights.py``, the "CPU hybrid"
column of docs/compat-rules.md) and named with the op: ``check`` lists it as a note, ``validate``
says it beside its verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from tflkit import ir
from tflkit.ir.schema import TensorType

__all__ = ["CpuKernelHazard", "cpu_kernel_hazards", "cpu_kernel_wrong", "per_tensor_int8_depthwise"]


@dataclass(frozen=True)
class CpuKernelHazard:
    """An op LiteRT's CPU kernels compute wrong, and why."""

    subgraph: int
    op_index: int
    op_type: str
    message: str

    def line(self) -> str:
        where = f"subgraph {self.subgraph} " if self.subgraph else ""
        return f"{where}op #{self.op_index} {self.op_type}: {self.message}"


def per_tensor_int8_depthwise(op: ir.Op) -> int | None:
    """The channel count of a DEPTHWISE_CONV_2D whose int8 weights have one scale for several
    channels, else None (whatever its activations)."""
    if op.type != "DEPTHWISE_CONV_2D" or len(op.inputs) < 2 or op.inputs[1] is None:
        return None
    w = op.inputs[1]
    params = w.quant_params if w.type == TensorType.INT8 else None
    channels = int(w.shape[-1]) if w.rank == 4 else 0
    if params is None or params.per_tensor is None or channels < 2:
        return None
    return channels


def cpu_kernel_wrong(op: ir.Op) -> str | None:
    """Why LiteRT's CPU kernels compute ``op`` wrong, or None.

    A DEPTHWISE_CONV_2D with float activations and int8 weights of one scale (per-tensor) for
    several channels: the CPU's hybrid kernel reads a scale per channel, past the one stored
    (the 32 per-tensor depthwise forms of the int8-weight family: 0.85 to 3.7e22 of the output's
    peak off; the 32 per-channel ones 0.0087 at most, the kernel's own rounding).
    """
    channels = per_tensor_int8_depthwise(op)
    x = op.inputs[0] if op.inputs else None
    if channels is None or x is None or x.type != TensorType.FLOAT32 or x.is_quantized:
        return None
    return (
        f"its int8 weights have one scale for {channels} channels and its activations are "
        "float: LiteRT's CPU hybrid kernel reads one scale per channel, past the one stored, "
        "and computes wrong values (0.85 to 3.7e22 of the output's peak, measured on this "
        "form); the GPU computes it right, so a GPU-vs-CPU failure on this model is the CPU's. "
        "`tflkit rewrite` (rule depthwise_int8_scale_per_channel) stores the scale per channel"
    )


def cpu_kernel_hazards(model: ir.Model) -> list[CpuKernelHazard]:
    """Every op of ``model`` in a form :func:`cpu_kernel_wrong` names."""
    found = []
    for sg_index, subgraph in enumerate(model.subgraphs):
        for op_index, op in enumerate(subgraph.ops):
            why = cpu_kernel_wrong(op)
            if why is not None:
                found.append(CpuKernelHazard(sg_index, op_index, op.type, why))
    return found
