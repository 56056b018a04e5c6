"""Rough per-op cost in FLOPs (multiply-adds count 2), to weigh what stays on the GPU.

Exact for convolutions, fully connected and matmuls; one FLOP per output element for
everything else. Dynamic dimensions count as 1.
"""

from __future__ import annotations

import math

from tflkit.ir import Op, Tensor


def _elements(tensor: Tensor | None) -> int:
    if tensor is None:
        return 0
    return math.prod(max(d, 1) for d in tensor.shape)


def op_flops(op: Op) -> int:
    """Estimated floating point operations of one inference of ``op``."""
    output = op.outputs[0] if op.outputs else None
    out = _elements(output)
    kind = op.type
    inputs = op.inputs
    if kind == "CONV_2D" and len(inputs) >= 2 and inputs[1] is not None:
        weights = inputs[1].shape  # [out_c, kh, kw, in_c]
        if len(weights) == 4:
            return 2 * out * weights[1] * weights[2] * weights[3]
    if kind == "TRANSPOSE_CONV" and len(inputs) >= 3 and inputs[1] is not None:
        weights = inputs[1].shape  # inputs: output shape, [out_c, kh, kw, in_c], input, bias
        return 2 * _elements(inputs[2]) * math.prod(max(d, 1) for d in weights[:3])
    if kind == "DEPTHWISE_CONV_2D" and len(inputs) >= 2 and inputs[1] is not None:
        weights = inputs[1].shape  # [1, kh, kw, out_c]
        if len(weights) == 4:
            return 2 * out * weights[1] * weights[2]
    if kind == "CONV_3D" and len(inputs) >= 2 and inputs[1] is not None:
        weights = inputs[1].shape  # [kd, kh, kw, in_c, out_c]
        if len(weights) == 5:
            return 2 * out * math.prod(weights[:4])
    if kind == "FULLY_CONNECTED" and len(inputs) >= 2 and inputs[1] is not None:
        weights = inputs[1].shape  # [units, depth]
        if len(weights) == 2:
            return 2 * out * weights[1]
    if kind == "BATCH_MATMUL" and len(inputs) >= 2 and inputs[0] is not None:
        lhs = inputs[0].shape
        adj_x = bool(op.option_fields.get("adjX", False))
        if lhs:
            depth = lhs[-2] if adj_x and len(lhs) >= 2 else lhs[-1]
            return 2 * out * max(depth, 1)
    return out
