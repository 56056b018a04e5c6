"""Shape ops the GPU rejects, turned into RESHAPE (which it takes)."""

from __future__ import annotations

import numpy as np

from tflkit.ir.builder import OpBuilder
from tflkit.ir.graph import Op
from tflkit.rewrite.example import graph_model, i32, options, scale
from tflkit.rewrite.rule import Example, Rule, replace, reshape


def _static_output(op: Op) -> str | None:
    if any(t.is_dynamic for t in (*op.outputs, op.inputs[0])):
        return "the shape is dynamic (fix it with --input-shape first)"
    return None


class ExpandDimsToReshape(Rule):
    name = "expand_dims_to_reshape"
    summary = "EXPAND_DIMS -> RESHAPE to the same static shape"
    fixes = ("EXPAND_DIMS",)
    reasons = ("Operation is not supported",)
    codes = ("UNSUPPORTED_OP",)

    def check(self, op: Op) -> str | None:
        return _static_output(op)

    def rewrite(self, op: Op, b: OpBuilder) -> None:
        replace(op, [reshape(b, op.inputs[0], op.outputs[0].shape)])

    def examples(self) -> tuple[Example, ...]:
        def build():
            return graph_model(
                [((2, 3), np.float32)],
                lambda b, x: scale(b, b.EXPAND_DIMS(scale(b, x), i32(1), shape=(2, 1, 3))),
            )

        return (Example("middle_axis", build),)


class SqueezeToReshape(Rule):
    name = "squeeze_to_reshape"
    summary = "SQUEEZE -> RESHAPE to the same static shape"
    fixes = ("SQUEEZE",)
    reasons = ("Operation is not supported",)
    codes = ("UNSUPPORTED_OP",)

    def check(self, op: Op) -> str | None:
        return _static_output(op)

    def rewrite(self, op: Op, b: OpBuilder) -> None:
        replace(op, [reshape(b, op.inputs[0], op.outputs[0].shape)])

    def examples(self) -> tuple[Example, ...]:
        def build():
            return graph_model(
                [((1, 4, 1, 3), np.float32)],
                lambda b, x: scale(
                    b,
                    b.SQUEEZE(
                        scale(b, x),
                        shape=(4, 3),
                        options=options("SqueezeOptions", squeezeDims=[0, 2]),
                    ),
                ),
            )

        return (Example("two_axes", build),)


class ReshapeStaticShape(Rule):
    name = "reshape_static_shape"
    summary = "RESHAPE whose shape input is computed -> a constant shape (static output only)"
    fixes = ("RESHAPE",)
    codes = (
        "NON_CONST_INPUT",
        "DYNAMIC_SHAPE",
    )

    def pattern(self, op: Op) -> bool:
        shape = op.inputs[1] if len(op.inputs) > 1 else None
        return op.type == "RESHAPE" and shape is not None and not shape.is_constant

    def check(self, op: Op) -> str | None:
        return _static_output(op)

    def rewrite(self, op: Op, b: OpBuilder) -> None:
        replace(op, [reshape(b, op.inputs[0], op.outputs[0].shape)])

    def examples(self) -> tuple[Example, ...]:
        def build():
            def body(b: OpBuilder, x):
                y = scale(b, x)
                dims = b.CONCATENATION(
                    i32(3),
                    i32(2),
                    shape=(2,),
                    options=options("ConcatenationOptions", axis=0),
                )
                return scale(b, b.RESHAPE(y, dims, shape=(3, 2)))

            return graph_model([((2, 3), np.float32)], body)

        return (Example("computed_shape", build),)
