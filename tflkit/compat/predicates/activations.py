"""Fused activations and activation ops (PRELU)."""

from __future__ import annotations

from tflkit.compat.predicates.shapes import bhwc, fmt_shape
from tflkit.compat.reasons import Reason, Rejection, reject
from tflkit.compat.signature import OpSignature

#: Fused activations the GPU delegate implements (SIGN_BIT, code 5, is the one it does not).
GPU_ACTIVATIONS = frozenset({0, 1, 2, 3, 4})


ACTIVATION_NAMES = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}


def prelu_alpha(sig: OpSignature) -> Rejection | None:
    src, alpha = sig.input(0), sig.input(1)
    if src is None or alpha is None:
        return reject(Reason.INPUT_COUNT, sig.op_type, "It needs an input and alpha.")
    if not alpha.is_const:
        return reject(
            Reason.NON_CONST_INPUT, sig.op_type, "alpha is computed at runtime.", input_index=1
        )
    shape = bhwc(src.shape)
    if shape is None:
        return None
    _, h, w, c = shape
    if alpha.rank >= 1 and all(d == 1 for d in alpha.shape[:-1]):
        if alpha.shape[-1] == c:
            return None
        why = f"alpha has {alpha.shape[-1]} values for {c} channels."
        return reject(Reason.SHAPE, sig.op_type, why, input_index=1)
    hwc = alpha.shape[-3:] if alpha.rank >= 3 else None
    if hwc is not None and tuple(hwc) == (h, w, c) and all(d == 1 for d in alpha.shape[:-3]):
        return None
    why = f"alpha shape {fmt_shape(alpha.shape)} matches neither the channels nor HxWxC."
    return reject(Reason.SHAPE, sig.op_type, why, input_index=1)
