"""The int8-weight (hybrid, dynamic-range) family, built with the IR: float activations, int8
weights with per-channel or per-tensor scales, read directly by CONV_2D, DEPTHWISE_CONV_2D,
FULLY_CONNECTED and TRANSPOSE_CONV (what TensorFlow's converter writes with
``optimizations = [tf.lite.Optimize.DEFAULT]`` and no representative data: CONV_2D v5 with
per-channel int8 filters, FULLY_CONNECTED v12, TRANSPOSE_CONV v3).

Every case is one op between two float MULs (accelerated neighbours, as in a real network), its
axes named in the case's name: kernel size, stride, padding, dilation, per-channel or per-tensor
scales, batch. ``bench/int8_weights.py`` measures each on the accelerator (fp16 and fp32 against
the CPU); ``tests/test_int8_weights.py`` checks the static verdict and the rule on them. No
TensorFlow: each model builds in milliseconds.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import product
from zlib import crc32

import numpy as np

from tflkit import ir
from tflkit.ir.builder import OpBuilder
from tflkit.rewriter.example import graph_model, options, scale

fb = ir.schema.fb
F32 = np.float32
#: Spatial size of the image input: odd, as the model of the report (15x15 into a stride-2 1x1).
SIZE = 15
CHANNELS = 8
#: Hybrid op versions TensorFlow writes (per-channel, per-tensor).
VERSIONS = {
    "CONV_2D": (5, 2),
    "DEPTHWISE_CONV_2D": (6, 4),
    "FULLY_CONNECTED": (12, 3),
    "TRANSPOSE_CONV": (3, 3),
}


@dataclass(frozen=True)
class Form:
    """One member of the family."""

    op: str
    kernel: int = 1
    stride: int = 1
    padding: str = "SAME"
    dilation: int = 1
    per_channel: bool = True
    batch: int = 1
    #: Width stride when it differs from the height stride.
    stride_w: int | None = None
    size: int = SIZE

    @property
    def strides(self) -> tuple[int, int]:
        return self.stride, self.stride if self.stride_w is None else self.stride_w

    @property
    def name(self) -> str:
        scales = "pc" if self.per_channel else "pt"
        short = {"CONV_2D": "conv", "DEPTHWISE_CONV_2D": "dw", "FULLY_CONNECTED": "fc"}
        op = short.get(self.op, "tconv")
        if self.op == "FULLY_CONNECTED":
            return f"int8w_{op}_{scales}_b{self.batch}"
        dil = f"_d{self.dilation}" if self.op != "TRANSPOSE_CONV" else ""
        pad = self.padding.lower()
        stride = "x".join(map(str, self.strides)) if self.stride_w is not None else self.stride
        size = f"_in{self.size}" if self.size != SIZE else ""
        return f"int8w_{op}{size}_k{self.kernel}_s{stride}_{pad}{dil}_{scales}_b{self.batch}"

    def build(self, float_weights: bool = False) -> ir.Model:
        """The model; with ``float_weights`` its float twin (the same weights dequantized to
        float32, a plain float op): what the accelerator should compute."""
        return _BUILDERS[self.op](self, float_weights)


def forms() -> Iterator[Form]:
    """Every form of the family: the product of the axes, then the neighbours that tell the
    wrong forms' edges apart (a 1x1 CONV_2D strided on one axis, or by 3, on an even input;
    TRANSPOSE_CONV kernels 2 to 5 and strides 2 and 3 with SAME padding)."""
    for op in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        for k, s, pad, d, pc, b in product((1, 3), (1, 2), ("SAME", "VALID"), (1, 2), *_QB):
            yield Form(op, k, s, pad, d, pc, b)
    for k, s, pad, pc, b in product((1, 3), (1, 2), ("SAME", "VALID"), *_QB):
        yield Form("TRANSPOSE_CONV", k, s, pad, 1, pc, b)
    for pc, b in product(*_QB):
        yield Form("FULLY_CONNECTED", per_channel=pc, batch=b)
    for size, (sh, sw), pad in product((15, 16), ((2, 1), (1, 2), (3, 3)), ("SAME", "VALID")):
        yield Form("CONV_2D", 1, sh, pad, stride_w=sw, size=size)
    yield Form("CONV_2D", 1, 2, "SAME", size=16)
    yield Form("CONV_2D", 2, 2, "SAME")
    for size, k, s in product((15, 16), (2, 3, 4, 5), (2, 3)):
        if (size, k, s) != (SIZE, 3, 2):
            yield Form("TRANSPOSE_CONV", k, s, "SAME", size=size)


_QB = ((True, False), (1, 2))


def int8_weights(
    b: OpBuilder,
    values: np.ndarray,
    axis: int,
    per_channel: bool,
    name: str,
    float_weights: bool = False,
) -> ir.Tensor:
    """``values`` stored as symmetric int8 weights (scales per ``axis`` or one per tensor), or
    with ``float_weights`` the float32 values those int8 weights stand for."""
    if per_channel:
        moved = np.moveaxis(values, axis, 0).reshape(values.shape[axis], -1)
        peak = np.abs(moved).max(axis=1)
    else:
        peak = np.array([np.abs(values).max()])
    scales = np.maximum(peak, 1e-6) / 127.0
    shape = [1] * values.ndim
    if per_channel:
        shape[axis] = -1
    q = np.clip(np.round(values / scales.reshape(shape)), -127, 127).astype(np.int8)
    if float_weights:
        return b.const((q * scales.reshape(shape)).astype(F32), name)
    tensor = b.const(q, name)
    quant = fb.QuantizationParametersT()
    quant.scale = [float(s) for s in scales]
    quant.zeroPoint = [0] * len(scales)
    quant.quantizedDimension = axis if per_channel else 0
    tensor.quantization = quant
    return tensor


def _rng(form: Form) -> np.random.Generator:
    return np.random.default_rng(crc32(form.name.encode()))


def _out_size(size: int, kernel: int, stride: int, padding: str, dilation: int = 1) -> int:
    span = (kernel - 1) * dilation + 1
    if padding == "SAME":
        return -(-size // stride)
    return (size - span) // stride + 1


def _conv(form: Form, float_weights: bool) -> ir.Model:
    rng = _rng(form)
    cin, cout = CHANNELS, 2 * CHANNELS
    depthwise = form.op == "DEPTHWISE_CONV_2D"
    sh, sw = form.strides
    out_h = _out_size(form.size, form.kernel, sh, form.padding, form.dilation)
    out_w = _out_size(form.size, form.kernel, sw, form.padding, form.dilation)
    channels = cin if depthwise else cout
    filt_shape = (
        (1, form.kernel, form.kernel, cin) if depthwise else (cout, form.kernel, form.kernel, cin)
    )
    axis = 3 if depthwise else 0
    kind = "DepthwiseConv2DOptions" if depthwise else "Conv2DOptions"
    extra = {"depthMultiplier": 1} if depthwise else {}
    opts = options(
        kind,
        padding=getattr(fb.Padding, form.padding),
        strideH=sh,
        strideW=sw,
        dilationHFactor=form.dilation,
        dilationWFactor=form.dilation,
        fusedActivationFunction=fb.ActivationFunctionType.NONE,
        **extra,
    )
    weights = rng.normal(0, 0.5, filt_shape).astype(F32)
    bias = rng.normal(0, 0.1, channels).astype(F32)

    def body(b: OpBuilder, x: ir.Tensor) -> ir.Tensor:
        w = int8_weights(b, weights, axis, form.per_channel, "filter", float_weights)
        y = b.op(
            form.op,
            [scale(b, x), w, b.const(bias, "bias")],
            options=opts,
            shape=[form.batch, out_h, out_w, channels],
            dtype=F32,
            version=1 if float_weights else _version(form),
            name=form.op.lower(),
        )
        return scale(b, y)

    return graph_model(
        [((form.batch, form.size, form.size, cin), F32)], body, description=form.name
    )


def _transpose_conv(form: Form, float_weights: bool) -> ir.Model:
    rng = _rng(form)
    cin, cout = CHANNELS, CHANNELS
    if form.padding == "SAME":
        out = form.size * form.stride
    else:
        out = (form.size - 1) * form.stride + form.kernel
    weights = rng.normal(0, 0.5, (cout, form.kernel, form.kernel, cin)).astype(F32)
    opts = options(
        "TransposeConvOptions",
        padding=getattr(fb.Padding, form.padding),
        strideH=form.stride,
        strideW=form.stride,
    )
    shape = np.array([form.batch, out, out, cout], np.int32)

    def body(b: OpBuilder, x: ir.Tensor) -> ir.Tensor:
        w = int8_weights(b, weights, 0, form.per_channel, "filter", float_weights)
        y = b.op(
            "TRANSPOSE_CONV",
            [b.const(shape, "output_shape"), w, scale(b, x)],
            options=opts,
            shape=[int(v) for v in shape],
            dtype=F32,
            version=1 if float_weights else _version(form),
            name="transpose_conv",
        )
        return scale(b, y)

    return graph_model(
        [((form.batch, form.size, form.size, cin), F32)], body, description=form.name
    )


def _fully_connected(form: Form, float_weights: bool) -> ir.Model:
    rng = _rng(form)
    units, depth = 24, 40
    weights = rng.normal(0, 0.5, (units, depth)).astype(F32)
    bias = rng.normal(0, 0.1, units).astype(F32)
    opts = options(
        "FullyConnectedOptions",
        fusedActivationFunction=fb.ActivationFunctionType.NONE,
        asymmetricQuantizeInputs=True,
    )

    def body(b: OpBuilder, x: ir.Tensor) -> ir.Tensor:
        w = int8_weights(b, weights, 0, form.per_channel, "weights", float_weights)
        y = b.op(
            "FULLY_CONNECTED",
            [scale(b, x), w, b.const(bias, "bias")],
            options=opts,
            shape=[form.batch, units],
            dtype=F32,
            version=1 if float_weights else _version(form),
            name="fully_connected",
        )
        return scale(b, y)

    return graph_model([((form.batch, depth), F32)], body, description=form.name)


def _version(form: Form) -> int:
    per_channel, per_tensor = VERSIONS[form.op]
    return per_channel if form.per_channel else per_tensor


_BUILDERS = {
    "CONV_2D": _conv,
    "DEPTHWISE_CONV_2D": _conv,
    "TRANSPOSE_CONV": _transpose_conv,
    "FULLY_CONNECTED": _fully_connected,
}
FORMS: tuple[Form, ...] = tuple(forms())
FORM_BY_NAME = {f.name: f for f in FORMS}
