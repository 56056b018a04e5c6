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


# --- forms the accelerator takes but computes wrong, told from their geometry ----------------
#
# Convolution forms the GPU accelerator takes but computes wrong, told from their geometry.
#
# Measured on ai-edge-litert 2.3's GPU accelerator (lavapipe), in fp32 and fp16, against the CPU,
# over the generated family of ``tests/int8_weight_models.py`` (``bench/int8_weights.py``: 193
# forms with int8 weights and their 193 float twins; the wrong ones part from the CPU by 93% to
# 210% of the output's peak, the right ones by at most 0.37%):
#
# * CONV_2D with int8 weights read directly (hybrid, dynamic-range quantization: float
#   activations) and a 1x1 kernel with any stride other than 1x1: the accelerator builds a
#   stride-1 1x1 convolution (its log: ``Shape mismatch in GpuModelBuilder::UpdateOutputTensors
#   (output of convolution1x1(conv_generic))``) and the output is wrong in both precisions. Per
#   channel or per tensor, any padding, dilation, batch or input size; the same weights in
#   float32, behind a DEQUANTIZE, or any other kernel size are right.
# * TRANSPOSE_CONV with SAME padding, int8 or float weights: the accelerator pads it as a forward
#   convolution of its input (``ceil(in / stride)``: ``(ceil(in/s) - 1) * s + k - in`` rows in
#   all), TFLite from the output (``(in - 1) * s + k - out``); when the rows before the first
#   input differ (half of each total, rounded down), the output is shifted: wrong in both
#   precisions (15x15 input, 3x3 or 5x5 kernel, stride 2; 16x16, kernels 3 to 5, stride 3). A
#   mere shape difference (kernel 2 or 4, stride 2 on 15x15) logs the same warning and is right.

_BOTH = "wrong in fp32 and fp16 alike (measured)"


def int8_weights_strided_pointwise(sig: OpSignature) -> Rejection | None:
    """A CONV_2D with int8 weights read directly (hybrid), a 1x1 kernel and a stride > 1."""
    data, weights, out = sig.input(0), sig.input(1), sig.output(0)
    if sig.op_type != "CONV_2D" or data is None or weights is None or out is None:
        return None
    if weights.dtype != "INT8" or not weights.is_const or data.dtype != "FLOAT32":
        return None
    if weights.rank != 4 or weights.shape[1:3] != (1, 1):
        return None
    strides = (int(sig.option("strideH", 1)), int(sig.option("strideW", 1)))
    if strides == (1, 1):
        return None
    why = (
        f"Input 1 is int8 weights read directly (dynamic-range quantization) of a 1x1 kernel "
        f"with stride {strides[0]}x{strides[1]}: LiteRT 2.3's GPU runs it as a stride-1 1x1 "
        f"convolution (its log says 'Shape mismatch in GpuModelBuilder'), so the output is "
        f"{_BOTH}; the same weights as float32 are right."
    )
    return reject(Reason.WRONG_RESULT, sig.op_type, why, input_index=1)


def tflite_transpose_padding_before(size: int, kernel: int, stride: int, out: int) -> int:
    """Rows TFLite's TRANSPOSE_CONV (SAME) pads before the first input row."""
    return max((size - 1) * stride + kernel - out, 0) // 2


def gpu_same_padding_before(size: int, kernel: int, stride: int) -> int:
    """Rows LiteRT 2.3's GPU pads before the first input row of a SAME TRANSPOSE_CONV (the
    padding of a forward convolution of the input)."""
    return max((-(-size // stride) - 1) * stride + kernel - size, 0) // 2


def transpose_conv_same_offset(sig: OpSignature) -> Rejection | None:
    """A SAME TRANSPOSE_CONV whose padding before the input the GPU computes differently."""
    weights, data, out = sig.input(1), sig.input(2), sig.output(0)
    if sig.op_type != "TRANSPOSE_CONV" or weights is None or data is None or out is None:
        return None
    if int(sig.option("padding", 0)) != 0 or data.rank != 4 or out.rank != 4:
        return None  # schema Padding: SAME = 0
    if weights.rank != 4 or data.is_dynamic or out.is_dynamic:
        return None
    strides = (int(sig.option("strideH", 1)), int(sig.option("strideW", 1)))
    shifts = []
    for axis, stride in zip((1, 2), strides, strict=True):
        size, kernel, length = data.shape[axis], weights.shape[axis], out.shape[axis]
        tflite = tflite_transpose_padding_before(size, kernel, stride, length)
        gpu = gpu_same_padding_before(size, kernel, stride)
        if tflite != gpu:
            shifts.append(f"{'HW'[axis - 1]}: {gpu} where TFLite pads {tflite}")
    if not shifts:
        return None
    why = (
        "With SAME padding LiteRT 2.3's GPU pads a transposed convolution as a forward one of "
        f"its input, here before the first row/column ({'; '.join(shifts)}), so the output "
        f"is shifted: {_BOTH}, float or int8 weights."
    )
    return reject(Reason.WRONG_RESULT, sig.op_type, why)
