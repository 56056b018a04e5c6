"""Convolutions the GPU computes wrong for their geometry, rewritten into forms it computes right
(the table's ``WRONG_RESULT`` of ``tflkit/compat/predicates/conv.py``, measured by
``bench/int8_weights.py``).

* ``int8_pointwise_float_weights``: a CONV_2D reading int8 weights directly (dynamic-range
  quantization) with a 1x1 kernel and a stride > 1, which LiteRT 2.3's GPU runs as a stride-1
  1x1 convolution, becomes the same CONV_2D with the weights dequantized to float32 (each int8
  value times its channel's scale), which the GPU computes right. On the CPU the hybrid kernel
  rounded the activations to int8 on the fly; the float op does not, so the CPU's output moves
  by that rounding: at most 1.1% of the output's peak over the family (column "CPU hybrid"),
  bound :data:`HYBRID_ROUNDING`. The GPU computed the dequantized weights anyway: its output
  is now what the CPU's float op computes. In a trained network those roundings add up through
  the layers past that bound (0.025-0.039 of a softmax's peak, ``tests/int8_trained_models.py``):
  the rule's proof then holds the rewritten model to the original's meaning instead, no farther
  from it than the original (:mod:`tflkit.rewriter.rules.hybrid_meaning`).
* ``transpose_conv_same_to_valid``: a SAME TRANSPOSE_CONV whose padding before the input the GPU
  computes otherwise becomes a VALID TRANSPOSE_CONV (no padding: ``(in - 1) * stride + kernel``
  rows) and a SLICE of the rows TFLite keeps (from its padding before). Every output value is the
  same sum of the same products: bit-identical on the CPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tflkit.compat.predicates.conv import (
    int8_weights_strided_pointwise,
    tflite_transpose_padding_before,
    transpose_conv_same_offset,
)
from tflkit.compat.reasons import Reason
from tflkit.compat.signature import OpSignature
from tflkit.ir import schema
from tflkit.ir.graph import Model, Op, Tensor
from tflkit.rewriter.contract import Contract
from tflkit.rewriter.example import graph_model, i32, options, scale
from tflkit.rewriter.rule import Example, Match, OpRewrite, OwnProof, replace
from tflkit.rewriter.rules.hybrid_meaning import closer_to_meaning
from tflkit.rewriter.verify import Verification, verify

if TYPE_CHECKING:
    import numpy as np

    from tflkit.ir.builder import OpBuilder

#: How far the float op may move the CPU's output from the hybrid kernel's, as a share of the
#: output's peak: the hybrid kernel's int8 rounding of activations (measured at most 0.011 over
#: the 193 forms of ``bench/int8_weights.py``).
HYBRID_ROUNDING = 0.02
_WRONG = ("computes wrong values",)


class Int8PointwiseFloatWeights(OpRewrite, OwnProof):
    name = "int8_pointwise_float_weights"
    summary = (
        "CONV_2D with int8 weights read directly, a 1x1 kernel and a stride > 1 -> the same "
        "CONV_2D with the weights dequantized to float32 (LiteRT 2.3's GPU runs the int8 form "
        "as a stride-1 1x1 convolution)"
    )
    fixes = ("CONV_2D",)
    codes = (Reason.WRONG_RESULT,)
    reasons = _WRONG
    contract = Contract(
        0.0,
        0.0,
        "the CPU's hybrid kernel rounds activations to int8, the float op does not "
        "(measured at most 0.011 of the peak)",
        HYBRID_ROUNDING,
    )
    required_inputs = (0, 1)

    def pattern(self, op: Op) -> bool:
        if not super().pattern(op):
            return False
        weights = op.inputs[1]
        return (
            weights.type == schema.TensorType.INT8
            and weights.is_constant
            and weights.is_quantized
            and weights.rank == 4
            and tuple(weights.shape[1:3]) == (1, 1)
            and _strides(op) != (1, 1)
        )

    def match(self, op: Op) -> Match:
        weights = op.inputs[1]
        if op.inputs[0].type != schema.TensorType.FLOAT32 or op.inputs[0].is_quantized:
            return Match.fail(
                f"input is {op.inputs[0].type_name}, not float32 (not the hybrid form)"
            )
        if int8_weights_strided_pointwise(OpSignature.from_op(op)) is None:
            return Match.fail("the GPU computes this form right")
        if weights.sparsity is not None or weights.data is None:
            return Match.fail("its int8 weights are sparse (fold_densify first)")
        return Match(op, weights=weights)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        import numpy as np

        op, weights = match.op, match["weights"]
        params = weights.quant_params
        assert params is not None
        values = params.dequantize(weights.data).astype(np.float32)
        floats = b.const(values, f"{weights.name}/float32")
        out = op.outputs[0]
        new = b.op(
            "CONV_2D",
            [op.inputs[0], floats, *op.inputs[2:]],
            options=op.options,
            shape=list(out.shape),
            dtype=out.type,
            version=2,
            name="conv_2d",
        )
        replace(op, [new])

    def verify_rewrite(
        self, original: bytes, rewritten: bytes, contract: Contract, seeds: tuple[int, ...]
    ) -> Verification:
        """Within one op's rounding of the original; else no farther from the original's
        meaning than the original itself (a trained network adds the roundings up:
        :mod:`~tflkit.rewriter.rules.hybrid_meaning`)."""
        direct = verify(original, rewritten, contract, seeds=seeds)
        if direct.ok or direct.problem is None or "differ beyond" not in direct.problem:
            return direct
        return closer_to_meaning(original, rewritten, seeds, direct)

    def examples(self) -> tuple[Example, ...]:
        return (
            Example("stride2_per_channel", lambda: _pointwise((2, 2), True)),
            Example("stride2x1_per_tensor", lambda: _pointwise((2, 1), False)),
        )


class TransposeConvSameToValid(OpRewrite):
    name = "transpose_conv_same_to_valid"
    summary = (
        "SAME TRANSPOSE_CONV the GPU pads otherwise than TFLite -> VALID TRANSPOSE_CONV + SLICE "
        "of the rows TFLite keeps (LiteRT 2.3's GPU pads it as a forward convolution)"
    )
    fixes = ("TRANSPOSE_CONV",)
    codes = (Reason.WRONG_RESULT,)
    reasons = _WRONG
    contract = Contract(0.0, 0.0, "bit-identical: the same sums, cropped")
    required_inputs = (0, 1, 2)

    def pattern(self, op: Op) -> bool:
        return (
            super().pattern(op) and transpose_conv_same_offset(OpSignature.from_op(op)) is not None
        )

    def match(self, op: Op) -> Match:
        if op.options is None:
            return Match.fail("no TransposeConvOptions")
        if int(getattr(op.options, "fusedActivationFunction", 0) or 0):
            return Match.fail("a fused activation (rule transpose_conv_version first)")
        return Match(op)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        import numpy as np

        op = match.op
        weights, data, out = op.inputs[1], op.inputs[2], op.outputs[0]
        strides = _strides(op)
        full = [int(out.shape[0])]
        begin = [0]
        for axis, stride in zip((1, 2), strides, strict=True):
            size, kernel = int(data.shape[axis]), int(weights.shape[axis])
            full.append((size - 1) * stride + kernel)
            begin.append(tflite_transpose_padding_before(size, kernel, stride, out.shape[axis]))
        full.append(int(out.shape[3]))
        begin.append(0)
        valid = options(
            "TransposeConvOptions",
            padding=schema.fb.Padding.VALID,
            strideH=strides[0],
            strideW=strides[1],
            fusedActivationFunction=0,
        )
        wide = b.op(
            "TRANSPOSE_CONV",
            [np.array(full, np.int32), *op.inputs[1:]],
            options=valid,
            shape=full,
            dtype=out.type,
            quantization=out.quantization,
            version=op.version,
            name="transpose_conv_valid",
        )
        cropped = b.SLICE(
            wide,
            np.array(begin, np.int32),
            np.array(out.shape, np.int32),
            shape=list(out.shape),
            dtype=out.type,
            name="crop",
        )
        replace(op, [cropped])

    def examples(self) -> tuple[Example, ...]:
        return (
            Example("k3_s2_odd_input", lambda: _transpose(15, 3, 2, bias=True)),
            Example("k5_s2_dcgan_7x7", lambda: _transpose(7, 5, 2, bias=False)),
            Example("k4_s3_even_input", lambda: _transpose(16, 4, 3, bias=True)),
        )


def _strides(op: Op) -> tuple[int, int]:
    opts = op.options
    return int(getattr(opts, "strideH", 1) or 1), int(getattr(opts, "strideW", 1) or 1)


# --- examples -------------------------------------------------------------------------------


def _int8(b: OpBuilder, values: np.ndarray, per_channel: bool) -> Tensor:
    import numpy as np

    peak = np.abs(values.reshape(values.shape[0], -1)).max(axis=1) if per_channel else None
    scales = (peak if per_channel else np.array([np.abs(values).max()])) / 127.0
    shape = [-1, 1, 1, 1] if per_channel else [1, 1, 1, 1]
    q = np.clip(np.round(values / scales.reshape(shape)), -127, 127).astype(np.int8)
    tensor = b.const(q, "filter_int8")
    quant = schema.fb.QuantizationParametersT()
    quant.scale, quant.zeroPoint = [float(s) for s in scales], [0] * len(scales)
    quant.quantizedDimension = 0
    tensor.quantization = quant
    return tensor


def _pointwise(strides: tuple[int, int], per_channel: bool) -> Model:
    """A 1x1 CONV_2D with int8 weights (hybrid, version 5 or 2) on a 15x15 image."""
    import numpy as np

    rng = np.random.default_rng(strides[0] * 7 + strides[1])
    weights = rng.normal(0, 0.5, (12, 1, 1, 6)).astype(np.float32)
    out = [1, -(-15 // strides[0]), -(-15 // strides[1]), 12]

    def body(b: OpBuilder, x: Tensor) -> Tensor:
        conv = b.CONV_2D(
            scale(b, x),
            _int8(b, weights, per_channel),
            rng.normal(0, 0.1, 12).astype(np.float32),
            options=options(
                "Conv2DOptions",
                padding=schema.fb.Padding.SAME,
                strideH=strides[0],
                strideW=strides[1],
            ),
            shape=out,
            dtype=np.float32,
            version=5 if per_channel else 2,
        )
        return scale(b, conv)

    return graph_model([((1, 15, 15, 6), np.float32)], body)


def _transpose(size: int, kernel: int, stride: int, bias: bool) -> Model:
    """A SAME TRANSPOSE_CONV (float weights) the GPU pads otherwise than TFLite."""
    import numpy as np

    rng = np.random.default_rng(size * 100 + kernel * 10 + stride)
    weights = rng.normal(0, 0.5, (5, kernel, kernel, 4)).astype(np.float32)
    out = [1, size * stride, size * stride, 5]

    def body(b: OpBuilder, x: Tensor) -> Tensor:
        extra = [rng.normal(0, 0.1, 5).astype(np.float32)] if bias else []
        y = b.TRANSPOSE_CONV(
            i32(*out),
            weights,
            scale(b, x),
            *extra,
            options=options(
                "TransposeConvOptions",
                padding=schema.fb.Padding.SAME,
                strideH=stride,
                strideW=stride,
            ),
            shape=out,
            dtype=np.float32,
            version=3 if bias else 1,
        )
        return scale(b, y)

    return graph_model([((1, size, size, 4), np.float32)], body)
