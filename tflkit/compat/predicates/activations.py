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


#: Op types whose CPU kernels leave a fused TANH out while the GPU applies it (measured).
TANH_IGNORED_ON_CPU = frozenset(
    {"CONV_2D", "DEPTHWISE_CONV_2D", "ADD", "SUB", "MUL", "DIV", "AVERAGE_POOL_2D", "MAX_POOL_2D"}
)


def fused_tanh_ignored_on_cpu(sig: OpSignature) -> Rejection | None:
    """A fused TANH on an op whose LiteRT CPU kernel ignores it while the GPU applies it.

    Measured (ai-edge-litert 2.3, lavapipe, fp32): ``PYTHONPATH=. python
    bench/fused_activations.py`` runs every op type with a fused activation option x every
    fused activation on the CPU and the GPU. Exactly the TANH form of the ops in
    :data:`TANH_IGNORED_ON_CPU` parts (by 83% to 99% of the CPU output's peak): the CPU output
    is the op without the TANH and the GPU output is tanh of it. Every other pair agrees within
    1e-6; FULLY_CONNECTED and CONCATENATION's CPU kernels refuse a fused TANH outright. TF's
    converter never writes the form; hand-built models and other converters can.
    """
    if sig.op_type not in TANH_IGNORED_ON_CPU:
        return None
    if sig.option("fusedActivationFunction", 0) != 4:
        return None
    why = (
        "Its fused TANH: LiteRT's CPU kernels ignore it and the GPU applies it, so the two "
        "compute different results (measured: the GPU's output is tanh of the CPU's). No "
        "rewrite fixes it: moving the TANH into its own op would change what the CPU computes; "
        "decide which result the model means and rebuild it with a separate TANH op (or none)."
    )
    return reject(Reason.WRONG_RESULT, sig.op_type, why)
