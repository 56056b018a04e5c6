"""Convolutions, pooling and resizing: strides, dilations, kernels, depth multipliers."""

from __future__ import annotations

from tflkit.compat.predicates.operands import Check, no_output
from tflkit.compat.reasons import Reason, Rejection, reject
from tflkit.compat.signature import OpSignature


def _positive_pair(what: str, h_option: str, w_option: str, default: int) -> Check:
    """A check that the options ``h_option`` x ``w_option`` (e.g. strides) are both positive;
    ``what`` is the rejection's sentence, with ``{h}`` and ``{w}``."""

    def check(sig: OpSignature) -> Rejection | None:
        h, w = sig.option(h_option, default), sig.option(w_option, default)
        if h > 0 and w > 0:
            return None
        return reject(Reason.OPTIONS, sig.op_type, what.format(h=h, w=w))

    return check


positive_strides = _positive_pair(
    "Strides are {h}x{w}; they must be positive.", "strideH", "strideW", 0
)


positive_dilations = _positive_pair(
    "Dilations are {h}x{w}; they must be positive.", "dilationHFactor", "dilationWFactor", 1
)


positive_kernel = _positive_pair(
    "Kernel is {h}x{w}; it must be positive.", "filterHeight", "filterWidth", 0
)


def depthwise_multiplier(sig: OpSignature) -> Rejection | None:
    """Classic delegate: a depth multiplier above 1 needs a single input channel."""
    mult = sig.option("depthMultiplier", 1)
    src = sig.input(0)
    if mult == 1 or src is None or src.rank != 4 or src.shape[3] == 1:
        return None
    why = f"depth_multiplier is {mult} with {src.shape[3]} input channels."
    return reject(Reason.OPTIONS, sig.op_type, why)


def depthwise_shapes(sig: OpSignature) -> Rejection | None:
    src, weights, out = sig.input(0), sig.input(1), sig.output(0)
    if out is None:
        return no_output(sig)
    if src is None or weights is None:
        return None
    if src.rank != 4 or weights.rank != 4 or out.rank != 4:
        return reject(Reason.SHAPE, sig.op_type, "Input, filter and output must be 4-D.")
    if weights.shape[3] != out.shape[3]:
        return reject(Reason.SHAPE, sig.op_type, "Filter and output channels differ.")
    return depthwise_multiplier(sig)


def resize_corners(sig: OpSignature) -> Rejection | None:
    if sig.op_type != "RESIZE_BILINEAR":
        return None
    if sig.option("alignCorners", False) and sig.option("halfPixelCenters", False):
        return reject(
            Reason.OPTIONS, sig.op_type, "align_corners and half_pixel_centers are both set."
        )
    return None
