"""Reductions along axes: MEAN/SUM/REDUCE_*, ARG_MAX, TOPK_V2, CUMSUM, SOFTMAX."""

from __future__ import annotations

import math

from tflkit.compat.predicates.dtypes import FLOATS
from tflkit.compat.predicates.operands import no_output
from tflkit.compat.predicates.shapes import axes_out_of_range, axis_ok, const_ints
from tflkit.compat.reasons import Reason, Rejection, reject
from tflkit.compat.signature import OpSignature


def reduce_axes(sig: OpSignature) -> Rejection | None:
    bad = axes_out_of_range(sig)
    if bad is None:
        return None
    why = f"Axes {bad[1]} do not fit a {bad[0]}-D input."
    return reject(Reason.SHAPE, sig.op_type, why, input_index=1)


def arg_max_axis(sig: OpSignature) -> Rejection | None:
    src, axis = sig.input(0), const_ints(sig, 1)
    if src is None or axis is None or src.rank > 4:
        return None
    if axis and axis_ok(src.rank, axis[0]):
        return None
    return reject(Reason.SHAPE, sig.op_type, "The axis is out of range.", input_index=1)


def topk_k(sig: OpSignature) -> Rejection | None:
    k = sig.input(1)
    if k is None or not k.is_const:
        return reject(Reason.NON_CONST_INPUT, sig.op_type, "k must be a constant.", input_index=1)
    if k.num_elements != 1:
        return reject(Reason.SHAPE, sig.op_type, "k must be a scalar.", input_index=1)
    return None


def cumsum_types(sig: OpSignature) -> Rejection | None:
    src, dst = sig.input(0), sig.output(0)
    if dst is None:
        return no_output(sig)
    if src is not None and src.dtype in FLOATS and dst.dtype == src.dtype:
        return None
    return reject(Reason.DTYPE, sig.op_type, "Input and output must be one float type.")


def softmax_beta_one(sig: OpSignature) -> Rejection | None:
    beta = sig.option("beta", 0.0)
    if math.isclose(beta, 1.0):
        return None
    return reject(Reason.OPTIONS, sig.op_type, f"beta is {beta}; only 1.0 is supported.")
