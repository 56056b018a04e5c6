"""TRANSPOSE_CONV above the version the GPU takes, rebuilt at a version it takes.

Measured (ai-edge-litert 2.3, lavapipe; one-op float32 models, inputs output_shape, weights
[O,H,W,I], input, optional bias; stride 2, SAME): versions 1 to 3 are accepted with and without
bias and with and without a fused RELU; versions 4 and 5 are rejected ("Max version supported: 3.
Requested version N."), whatever the inputs. The rewrite keeps the bias inside the op (version 3
is the bias version) and moves a fused activation into its own op, which the GPU takes and the
CPU computes with the same clamp: exact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tflkit.compat.reasons import Reason
from tflkit.ir.graph import Op
from tflkit.rewriter.example import graph_model, i32, options, scale
from tflkit.rewriter.rule import Example, Match, OpRewrite, is_float, replace

if TYPE_CHECKING:
    from tflkit.ir.builder import OpBuilder

#: Highest TRANSPOSE_CONV version the GPU accelerator takes (measured).
GPU_MAX_VERSION = 3
#: Fused activation code -> the op that applies it alone (TANH/SIGN_BIT are not fusable here).
ACTIVATION_OPS = {0: None, 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6"}


class TransposeConvVersion(OpRewrite):
    name = "transpose_conv_version"
    summary = "TRANSPOSE_CONV version > 3 -> TRANSPOSE_CONV version 3 (+ its fused activation op)"
    fixes = ("TRANSPOSE_CONV",)
    reasons = ("Max version supported",)
    codes = (Reason.OP_VERSION,)
    required_inputs = (0, 1, 2)

    def pattern(self, op: Op) -> bool:
        return super().pattern(op) and op.version > GPU_MAX_VERSION

    def match(self, op: Op) -> Match:
        if op.options is None:
            return Match.fail("no TransposeConvOptions")
        if len(op.inputs) < 3 or not is_float(op.inputs[2]) or not is_float(op.outputs[0]):
            return Match.fail(
                "not a float32 TRANSPOSE_CONV (quantized forms need their own version)"
            )
        weights = op.inputs[1]
        if weights is None or weights.type_name != "FLOAT32":
            return Match.fail(
                f"weights are {weights.type_name if weights else 'missing'}, not float32"
            )
        if op.outputs[0].is_dynamic:
            return Match.fail("the shape is dynamic (fix it with --input-shape first)")
        activation = _activation(op)
        if activation not in ACTIVATION_OPS:
            return Match.fail(f"fused activation {activation} has no standalone op here")
        return Match(op)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        op = match.op
        out = op.outputs[0]
        activation = ACTIVATION_OPS[_activation(op)]
        fields = {
            "padding": op.options.padding,
            "strideH": op.options.strideH,
            "strideW": op.options.strideW,
            "fusedActivationFunction": 0,
        }
        y = b.op(
            "TRANSPOSE_CONV",
            list(op.inputs),
            options=options("TransposeConvOptions", **fields),
            shape=out.shape,
            dtype=out.type,
            version=GPU_MAX_VERSION,
            name="transpose_conv",
        )
        if activation is not None:
            y = b.op(activation, [y], name=activation.lower())
        replace(op, [y])

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def build(version: int, use_bias: bool, activation: int, padding: int = 0):
            rng = np.random.default_rng(version * 10 + activation)
            weights = rng.standard_normal((6, 3, 3, 4)).astype(np.float32)
            bias = rng.standard_normal(6).astype(np.float32)
            out_hw = 16 if padding == 0 else 17

            def body(b: OpBuilder, x):
                opts = options(
                    "TransposeConvOptions",
                    padding=padding,
                    strideH=2,
                    strideW=2,
                    fusedActivationFunction=activation,
                )
                inputs = [i32(1, out_hw, out_hw, 6), weights, scale(b, x, 2.0)]
                y = b.TRANSPOSE_CONV(
                    *inputs,
                    *([bias] if use_bias else []),
                    shape=(1, out_hw, out_hw, 6),
                    dtype=np.float32,
                    options=opts,
                    version=version,
                )
                return scale(b, y)

            return lambda: graph_model([((1, 8, 8, 4), np.float32)], body)

        return (
            Example("v4_bias_relu", build(4, True, 1)),
            Example("v4_no_bias", build(4, False, 0)),
            Example("v5_bias_relu6_valid", build(5, True, 3, padding=1)),
        )


def _activation(op: Op) -> int:
    return int(getattr(op.options, "fusedActivationFunction", 0) or 0) if op.options else 0
