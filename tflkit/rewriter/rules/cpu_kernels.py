"""Forms LiteRT's CPU kernels compute wrong (``tflkit.compat.cpu_kernels``), restated in forms
they compute right. The GPU computed the original right; the CPU is the fallback path and
validate's baseline.

* ``depthwise_int8_scale_per_channel``: a DEPTHWISE_CONV_2D with float activations and int8
  weights of one scale for several channels, which the CPU's hybrid kernel reads as one scale
  per channel (past the one stored), becomes the same op with that scale stored once per
  channel (quantized dimension 3, the per-channel hybrid version): the same weights, the form
  the kernel reads right. Its proof is its own: the original's CPU output is the bug, so the
  rewritten model is compared with what the original means, its weights dequantized to float32
  (a float DEPTHWISE_CONV_2D), within the hybrid kernel's own int8 rounding of activations
  (:data:`~tflkit.rewriter.rules.conv_geometry.HYBRID_ROUNDING`).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from tflkit import ir
from tflkit.compat.cpu_kernels import cpu_kernel_wrong, per_tensor_int8_depthwise
from tflkit.compat.reasons import Reason
from tflkit.ir import schema
from tflkit.ir.graph import Op
from tflkit.rewriter.contract import Contract
from tflkit.rewriter.rule import Example, Match, OpRewrite, OwnProof, replace
from tflkit.rewriter.rules.conv_geometry import HYBRID_ROUNDING
from tflkit.rewriter.rules.hybrid_meaning import float_meaning
from tflkit.rewriter.verify import Verification, verify

if TYPE_CHECKING:
    from tflkit.ir.builder import OpBuilder

#: TensorFlow's DEPTHWISE_CONV_2D version for int8 weights with per-channel scales (hybrid).
PER_CHANNEL_VERSION = 6


class DepthwiseScalePerChannel(OpRewrite, OwnProof):
    name = "depthwise_int8_scale_per_channel"
    summary = (
        "DEPTHWISE_CONV_2D with float activations and int8 weights of one scale for several "
        "channels -> the same weights with that scale stored per channel (LiteRT's CPU hybrid "
        "kernel reads one scale per channel and computes the original wrong; the GPU does not)"
    )
    fixes = ("DEPTHWISE_CONV_2D",)
    codes = (Reason.CPU_WRONG_RESULT,)
    #: the GPU checker has nothing against the op: the CPU kernel is what is wrong
    ungated = True
    contract = Contract(
        0.0,
        0.0,
        "against the original's weights dequantized to float32: the CPU's hybrid kernel rounds "
        "activations to int8 (measured at most 0.0087 of the peak on the per-channel forms)",
        HYBRID_ROUNDING,
    )
    required_inputs = (0, 1)

    def pattern(self, op: Op) -> bool:
        return super().pattern(op) and per_tensor_int8_depthwise(op) is not None

    def match(self, op: Op) -> Match:
        if cpu_kernel_wrong(op) is None:
            return Match.fail(
                f"its activations are {op.inputs[0].type_name}: only the hybrid (float "
                "activation) kernel reads the scale wrong"
            )
        weights = op.inputs[1]
        if not weights.is_constant or weights.data is None:
            return Match.fail("its int8 weights are not a constant")
        if weights.sparsity is not None:
            return Match.fail("its int8 weights are sparse (fold_densify first)")
        return Match(op, weights=weights)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        import numpy as np

        op, weights = match.op, match["weights"]
        params = weights.quant_params
        assert params is not None and params.per_tensor is not None
        scale, zero = params.per_tensor
        channels = int(weights.shape[-1])
        tensor = b.const(np.asarray(weights.data), f"{weights.name}/per_channel")
        quant = schema.fb.QuantizationParametersT()
        quant.scale = [scale] * channels
        quant.zeroPoint = [zero] * channels
        quant.quantizedDimension = 3
        tensor.quantization = quant
        out = op.outputs[0]
        new = b.op(
            "DEPTHWISE_CONV_2D",
            [op.inputs[0], tensor, *op.inputs[2:]],
            options=copy.deepcopy(op.options),
            shape=list(out.shape),
            dtype=out.type,
            version=max(op.version, PER_CHANNEL_VERSION),
            name="depthwise_conv_2d",
        )
        replace(op, [new])

    def verify_rewrite(
        self, original: bytes, rewritten: bytes, contract: Contract, seeds: tuple[int, ...]
    ) -> Verification:
        return verify(meaning(original), rewritten, contract, seeds=seeds)

    def examples(self) -> tuple[Example, ...]:
        return (Example("depthwise_3x3_per_tensor", _example),)


def meaning(data: bytes) -> bytes:
    """``data`` with the weights of every op :func:`cpu_kernel_wrong` names dequantized to a
    float32 constant (a float DEPTHWISE_CONV_2D): what the original computes when computed
    right."""
    return float_meaning(data, lambda op: cpu_kernel_wrong(op) is not None)


def _example() -> ir.Model:
    """x [1, 8, 8, 4] -> DEPTHWISE_CONV_2D 3x3 SAME with per-tensor int8 weights -> y."""
    import numpy as np

    from tflkit.rewriter.example import graph_model, options

    rng = np.random.default_rng(0)
    values = rng.normal(0, 0.5, (1, 3, 3, 4))
    scale = float(np.abs(values).max() / 127)
    q = np.clip(np.round(values / scale), -127, 127).astype(np.int8)

    def body(b: OpBuilder, x: ir.Tensor) -> ir.Tensor:
        w = b.const(q, "filter")
        quant = schema.fb.QuantizationParametersT()
        quant.scale, quant.zeroPoint, quant.quantizedDimension = [scale], [0], 0
        w.quantization = quant
        bias = b.const(np.zeros(4, np.float32), "bias")
        opts = options(
            "DepthwiseConv2DOptions", padding=schema.fb.Padding.SAME, strideH=1, strideW=1,
            depthMultiplier=1, dilationHFactor=1, dilationWFactor=1,
        )  # fmt: skip
        return b.op(
            "DEPTHWISE_CONV_2D", [x, w, bias], options=opts, shape=[1, 8, 8, 4],
            dtype=schema.TensorType.FLOAT32, version=4, name="depthwise",
        )  # fmt: skip

    return graph_model([((1, 8, 8, 4), np.float32)], body)
