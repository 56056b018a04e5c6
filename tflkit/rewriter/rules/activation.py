"""Activations and normalizations the GPU rejects, decomposed into ops it takes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tflkit.compat.reasons import Reason
from tflkit.ir.graph import Op, Tensor
from tflkit.rewriter.contract import bound
from tflkit.rewriter.example import graph_model, i32, options, scale
from tflkit.rewriter.rule import Example, Match, OpRewrite, is_float, replace

if TYPE_CHECKING:
    from tflkit.ir.builder import OpBuilder


def _float_only(op: Op) -> str | None:
    if not is_float(op.inputs[0]):
        return f"input is {op.inputs[0].type_name}, not float32"
    return None


def _last_axis_reduce(b: OpBuilder, kind: str, x: Tensor, name: str) -> Tensor:
    shape = (*x.shape[:-1], 1)
    return b.op(
        kind,
        [x, i32(x.rank - 1)],
        shape=shape,
        options=options("ReducerOptions", keepDims=True),
        name=name,
    )


def _unary_example(op_type: str, shape: tuple[int, ...] = (1, 8), **kw) -> tuple[Example, ...]:
    import numpy as np

    def build():
        return graph_model(
            [(shape, np.float32)], lambda b, x: scale(b, b.op(op_type, [scale(b, x, 3.0)], **kw))
        )

    return (Example(f"{op_type.lower()}_{'x'.join(map(str, shape))}", build),)


class _Decomposition(OpRewrite):
    """An op the GPU does not implement, rebuilt from ops it does; float inputs only, and
    whatever else :meth:`limit` says the decomposition does not cover."""

    reasons = ("Operation is not supported",)
    codes = (Reason.UNSUPPORTED_OP,)

    def match(self, op: Op) -> Match:
        return Match.unless(op, _float_only(op) or self.limit(op))

    def limit(self, op: Op) -> str | None:
        """Why this decomposition does not cover ``op`` beyond its input type (None: it does)."""
        return None


class Relu0To1(_Decomposition):
    name = "relu_0_to_1"
    summary = "RELU_0_TO_1 -> MINIMUM(MAXIMUM(x, 0), 1)"
    fixes = ("RELU_0_TO_1",)
    reasons = ("Not supported op",)  # the accelerator's words for this op

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        import numpy as np

        op = match.op
        low = b.MAXIMUM(op.inputs[0], np.array(0.0, np.float32), name="relu_low")
        replace(op, [b.MINIMUM(low, np.array(1.0, np.float32), name="relu_high")])

    def examples(self) -> tuple[Example, ...]:
        return _unary_example("RELU_0_TO_1")


class SoftmaxBeta(OpRewrite):
    name = "softmax_beta"
    summary = "SOFTMAX(beta != 1) -> SOFTMAX(MUL(x, beta))"
    fixes = ("SOFTMAX",)
    reasons = ("beta != 1",)
    contract = bound(1e-6, 1e-5, "beta*x rounded before the max is subtracted")
    codes = (Reason.OPTIONS,)

    def pattern(self, op: Op) -> bool:
        return super().pattern(op) and op.options is not None and op.options.beta != 1.0

    def match(self, op: Op) -> Match:
        return Match.unless(op, _float_only(op))

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        import numpy as np

        op = match.op
        scaled = b.MUL(
            op.inputs[0],
            np.array(op.options.beta, np.float32),
            options=options("MulOptions"),
            name="beta",
        )
        replace(op, [b.SOFTMAX(scaled, options=options("SoftmaxOptions", beta=1.0))])

    def examples(self) -> tuple[Example, ...]:
        return _unary_example("SOFTMAX", (2, 10), options=options("SoftmaxOptions", beta=2.5))


class LogSoftmax(_Decomposition):
    name = "log_softmax"
    summary = "LOG_SOFTMAX -> (x - max) - LOG(SUM(EXP(x - max)))"
    fixes = ("LOG_SOFTMAX",)
    contract = bound(1e-5, 1e-5, "exp/log/sum rounding, same formula as the CPU kernel")

    def limit(self, op: Op) -> str | None:
        return "rank > 4" if op.inputs[0].rank > 4 else None

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        op = match.op
        x = op.inputs[0]
        top = _last_axis_reduce(b, "REDUCE_MAX", x, "max")
        shifted = b.SUB(x, top, options=options("SubOptions"), name="shifted")
        total = _last_axis_reduce(b, "SUM", b.EXP(shifted, name="exp"), "sum")
        log_total = b.LOG(total, name="log_sum")
        replace(op, [b.SUB(shifted, log_total, options=options("SubOptions"), name="log_softmax")])

    def examples(self) -> tuple[Example, ...]:
        return (
            *_unary_example("LOG_SOFTMAX", (2, 10), options=options("LogSoftmaxOptions")),
            *_unary_example("LOG_SOFTMAX", (1, 3, 4, 5), options=options("LogSoftmaxOptions")),
        )


class L2Normalization(_Decomposition):
    name = "l2_normalization"
    summary = "L2_NORMALIZATION -> x / SQRT(MAXIMUM(SUM(x*x), 1e-6))"
    fixes = ("L2_NORMALIZATION",)
    contract = bound(1e-6, 1e-5, "sum-of-squares rounding")

    def limit(self, op: Op) -> str | None:
        fused = op.options is not None and op.options.fusedActivationFunction
        return "fused activation" if fused else None

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        import numpy as np

        op = match.op
        x = op.inputs[0]
        squares = b.MUL(x, x, options=options("MulOptions"), name="square")
        total = _last_axis_reduce(b, "SUM", squares, "sum_squares")
        norm = b.SQRT(b.MAXIMUM(total, np.array(1e-6, np.float32), name="eps"), name="norm")
        replace(op, [b.DIV(x, norm, options=options("DivOptions"), name="l2_normalized")])

    def examples(self) -> tuple[Example, ...]:
        return _unary_example("L2_NORMALIZATION", (2, 16), options=options("L2NormOptions"))
