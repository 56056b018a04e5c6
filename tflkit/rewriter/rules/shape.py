"""Shape ops the GPU rejects, turned into RESHAPE (which it takes)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tflkit.compat.reasons import Reason
from tflkit.ir.graph import Op, Tensor
from tflkit.rewriter.example import graph_model, i32, options, scale
from tflkit.rewriter.rule import Example, Match, OpRewrite, replace, reshape
from tflkit.rewriter.rules.constant import constant_value, is_empty_constant

if TYPE_CHECKING:
    from tflkit.ir.builder import OpBuilder


def _computed_shape(op: Op) -> list[int] | None:
    """The RESHAPE's target shape computed from its (constant-foldable) shape input, -1 resolved."""
    import numpy as np

    data, shape = op.inputs[0], op.inputs[1] if len(op.inputs) > 1 else None
    if shape is None or data is None or data.is_dynamic:
        return None
    value = constant_value(shape)
    if value is None:
        return None
    dims = [int(d) for d in np.asarray(value).reshape(-1)]
    total = int(np.prod(data.shape, dtype=np.int64))
    known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
    if dims.count(-1) == 1 and known > 0 and total % known == 0:
        dims = [total // known if d == -1 else d for d in dims]
    if -1 in dims or int(np.prod(dims, dtype=np.int64)) != total:
        return None
    return dims


def _fixed(shape: Tensor) -> bool:
    """A constant shape (an empty one without a buffer included)."""
    return shape.is_constant or is_empty_constant(shape)


def _static_output(op: Op) -> str | None:
    if any(t.is_dynamic for t in (*op.outputs, op.inputs[0])):
        return "the shape is dynamic (fix it with --input-shape first)"
    return None


class _ToStaticReshape(OpRewrite):
    """An op that only changes the shape -> RESHAPE to its (static) output shape."""

    reasons = ("Operation is not supported",)
    codes = (Reason.UNSUPPORTED_OP,)

    def match(self, op: Op) -> Match:
        return Match.unless(op, _static_output(op))

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        op = match.op
        replace(op, [reshape(b, op.inputs[0], op.outputs[0].shape)])


class ExpandDimsToReshape(_ToStaticReshape):
    name = "expand_dims_to_reshape"
    summary = "EXPAND_DIMS -> RESHAPE to the same static shape"
    fixes = ("EXPAND_DIMS",)

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def build():
            return graph_model(
                [((2, 3), np.float32)],
                lambda b, x: scale(b, b.EXPAND_DIMS(scale(b, x), i32(1), shape=(2, 1, 3))),
            )

        return (Example("middle_axis", build),)


class SqueezeToReshape(_ToStaticReshape):
    name = "squeeze_to_reshape"
    summary = "SQUEEZE -> RESHAPE to the same static shape"
    fixes = ("SQUEEZE",)

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

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


class ReshapeStaticShape(OpRewrite):
    name = "reshape_static_shape"
    summary = "RESHAPE whose shape input is computed -> a constant shape (static output only)"
    fixes = ("RESHAPE",)
    codes = (Reason.NON_CONST_INPUT, Reason.DYNAMIC_SHAPE)
    required_inputs = (0, 1)

    def pattern(self, op: Op) -> bool:
        return super().pattern(op) and not _fixed(op.inputs[1])

    def match(self, op: Op) -> Match:
        if _computed_shape(op) is not None:
            return Match(op)
        return Match.unless(op, _static_output(op))

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        op = match.op
        shape = _computed_shape(op)
        replace(op, [reshape(b, op.inputs[0], shape or op.outputs[0].shape)])

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def wrong_stored_shape():
            # A converter (onnx2tf) wrote (1, 1) for a RESHAPE that really gives (1, 6): the
            # shape must come from the computed shape input, not from the stored output shape.
            def body(b: OpBuilder, x):
                y = scale(b, x)
                batch = b.STRIDED_SLICE(
                    b.SHAPE(
                        y, shape=(2,), dtype=np.int32, options=options("ShapeOptions", outType=2)
                    ),
                    i32(0),
                    i32(1),
                    i32(1),
                    shape=(1,),
                    options=options("StridedSliceOptions"),
                )
                dims = b.CONCATENATION(
                    batch, i32(-1), shape=(2,), options=options("ConcatenationOptions", axis=0)
                )
                flat = b.RESHAPE(y, dims, shape=(1, 1))
                return scale(b, b.RESHAPE(flat, i32(2, 3), shape=(2, 3)))

            return graph_model([((2, 3), np.float32)], body)

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

        return (
            Example("computed_shape", build),
            Example("wrong_stored_shape", wrong_stored_shape),
        )
