"""Rank-5+ tensors folded to rank <= 4 (the GPU takes at most 4 dimensions).

Each rule wraps the op in RESHAPEs that merge or drop axes; ``reshape_chain`` then cancels the
RESHAPE -> 5-D -> RESHAPE pairs that meet between two folded ops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tflkit.compat.reasons import Reason
from tflkit.ir.graph import Op, Tensor
from tflkit.rewriter.example import graph_model, i32, options, scale
from tflkit.rewriter.rule import (
    Example,
    Match,
    OpRewrite,
    const_ints,
    is_float,
    replace,
    reshape,
    well_formed,
)

if TYPE_CHECKING:
    from tflkit.ir.builder import OpBuilder

_RANK = "dimensions must be less than 5"
_BINARY = ("ADD", "MUL", "SUB", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE", "POW")
_UNARY = (
    "RELU",
    "RELU6",
    "TANH",
    "LOGISTIC",
    "EXP",
    "LOG",
    "ABS",
    "NEG",
    "SQRT",
    "RSQRT",
    "SQUARE",
    "GELU",
    "HARD_SWISH",
    "ELU",
    "LEAKY_RELU",
    "SIN",
    "COS",
    "FLOOR",
    "CEIL",
)


def _fold4(shape: tuple[int, ...]) -> list[int]:
    """Merge leading axes so that a shape has 4 dimensions."""
    import numpy as np

    return [int(np.prod(shape[:-3])), *shape[-3:]]


def _static(op: Op) -> bool:
    return not any(t.is_dynamic for t in (*op.inputs, *op.outputs) if t is not None)


class ReshapeChain(OpRewrite):
    name = "reshape_chain"
    summary = "RESHAPE(RESHAPE(x)) through a rank-5+ tensor -> one RESHAPE"
    fixes = ("RESHAPE",)
    reasons = (_RANK,)
    codes = (Reason.RANK,)

    def pattern(self, op: Op) -> bool:
        if not super().pattern(op) or op.inputs[0].rank <= 4:
            return False
        inner = op.inputs[0].producer
        return inner is not None and inner.type == "RESHAPE" and well_formed(inner, (0,))

    def match(self, op: Op) -> Match:
        return Match(op) if _static(op) else Match.fail("dynamic shape")

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        op = match.op
        source = op.inputs[0].producer.inputs[0]
        replace(op, [reshape(b, source, op.outputs[0].shape)])

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def build():
            return graph_model(
                [((1, 2, 3, 4), np.float32)],
                lambda b, x: scale(
                    b, reshape(b, reshape(b, scale(b, x), (1, 2, 3, 2, 2)), (1, 6, 2, 2))
                ),
            )

        return (Example("through_5d", build),)


class Rank5Elementwise(OpRewrite):
    name = "rank5_elementwise"
    summary = "elementwise op on rank-5+ tensors -> the same op on a 4-D view"
    fixes = _BINARY + _UNARY
    reasons = (_RANK,)
    codes = (Reason.RANK,)

    def pattern(self, op: Op) -> bool:
        return super().pattern(op) and op.outputs[0].rank > 4

    def match(self, op: Op) -> Match:
        import numpy as np

        if not _static(op):
            return Match.fail("dynamic shape")
        out = op.outputs[0]
        for t in op.inputs:
            if t is not None and t.shape != out.shape and int(np.prod(t.shape)) != 1:
                return Match.fail(f"input {t.name} broadcasts ({t.shape} -> {out.shape})")
        return Match(op)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        import numpy as np

        op = match.op
        out = op.outputs[0]
        folded = _fold4(out.shape)
        inputs: list[Tensor | None] = []
        for t in op.inputs:
            if t is None or t.shape == ():
                inputs.append(t)
            elif int(np.prod(t.shape)) == 1 and t.shape != out.shape:
                inputs.append(
                    reshape(b, t, [])
                    if not t.is_constant
                    else b.const(t.data.reshape(()), "scalar", like=t)
                )
            elif t.is_constant:
                inputs.append(b.const(t.data.reshape(folded), "folded", like=t))
            else:
                inputs.append(reshape(b, t, folded, "to4d"))
        result = b.op(
            op.type,
            inputs,
            shape=folded,
            dtype=out.type,
            options=op.options,
            quantization=out.quantization,
            name=op.type.lower(),
        )
        replace(op, [reshape(b, result, out.shape, "to5d")])

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def build():
            def body(b: OpBuilder, x, y):
                five = (1, 2, 3, 4, 5)
                x5, y5 = reshape(b, scale(b, x), five), reshape(b, scale(b, y), five)
                total = b.ADD(x5, y5, options=options("AddOptions"))
                return scale(b, reshape(b, total, (2, 3, 4, 5)))

            return graph_model([((2, 3, 4, 5), np.float32), ((2, 3, 4, 5), np.float32)], body)

        return (Example("add_5d", build),)


def _fold_transpose(shape: tuple[int, ...], perm: list[int]) -> tuple[list[int], list[int]]:
    """Drop size-1 axes and merge axes that stay adjacent: (folded input shape, folded perm)."""
    import numpy as np

    kept = [a for a in perm if shape[a] != 1]
    groups: list[list[int]] = []
    for a in kept:
        if groups and groups[-1][-1] + 1 == a:
            groups[-1].append(a)
        else:
            groups.append([a])
    order = sorted(range(len(groups)), key=lambda g: groups[g][0])
    in_shape = [int(np.prod([shape[a] for a in groups[g]])) for g in order]
    position = {g: i for i, g in enumerate(order)}
    return in_shape, [position[g] for g in range(len(groups))]


class Rank5Transpose(OpRewrite):
    name = "rank5_transpose"
    summary = "TRANSPOSE of a rank-5+ tensor -> TRANSPOSE of <= 4 merged axes between RESHAPEs"
    fixes = ("TRANSPOSE",)
    reasons = ("Permutation for transpose is invalid", _RANK)
    codes = (Reason.RANK, Reason.SHAPE)
    required_inputs = (0, 1)

    def pattern(self, op: Op) -> bool:
        return super().pattern(op) and op.inputs[0].rank > 4

    def match(self, op: Op) -> Match:
        perm = const_ints(op.inputs[1])
        if perm is None or not _static(op):
            return Match.fail("permutation not constant or dynamic shape")
        in_shape, _ = _fold_transpose(op.inputs[0].shape, perm)
        if len(in_shape) > 4:
            return Match.fail(f"still {len(in_shape)} axes after merging adjacent ones")
        return Match(op)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        op = match.op
        x = op.inputs[0]
        in_shape, perm = _fold_transpose(x.shape, const_ints(op.inputs[1]))
        moved = b.TRANSPOSE(
            reshape(b, x, in_shape, "merged"),
            i32(*perm),
            shape=[in_shape[p] for p in perm],
            name="transpose",
        )
        replace(op, [reshape(b, moved, op.outputs[0].shape, "to5d")])

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def build():
            def body(b: OpBuilder, x):
                x5 = reshape(b, scale(b, x), (1, 2, 3, 4, 5))
                moved = b.TRANSPOSE(x5, i32(0, 2, 1, 4, 3), shape=(1, 3, 2, 5, 4))
                return scale(b, reshape(b, moved, (6, 5, 4)))

            return graph_model([((2, 3, 4, 5), np.float32)], body)

        return (Example("swap_pairs", build),)


class Rank5Reduce(OpRewrite):
    name = "rank5_reduce"
    summary = "SUM/MEAN/REDUCE_MAX/REDUCE_MIN/REDUCE_PROD over rank-5+ -> a 4-D reduction"
    fixes = ("SUM", "MEAN", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD")
    reasons = ("Unknown layout", _RANK)
    codes = (Reason.RANK, Reason.SHAPE)
    required_inputs = (0, 1)

    def pattern(self, op: Op) -> bool:
        return super().pattern(op) and op.inputs[0].rank > 4

    def _plan(self, op: Op) -> tuple[list[int], list[int]] | None:
        shape = op.inputs[0].shape
        axes = const_ints(op.inputs[1])
        if axes is None:
            return None
        reduced = {a % len(shape) for a in axes}
        groups: list[tuple[bool, int]] = []  # (reduced?, merged size)
        for a, d in enumerate(shape):
            if d == 1:
                continue
            flag = a in reduced
            if groups and groups[-1][0] == flag:
                groups[-1] = (flag, groups[-1][1] * d)
            else:
                groups.append((flag, d))
        if not groups or len(groups) > 4:
            return None
        return [d for _, d in groups], [i for i, (flag, _) in enumerate(groups) if flag]

    def match(self, op: Op) -> Match:
        if not is_float(op.inputs[0]) or not _static(op):
            return Match.fail("not float32 or dynamic shape")
        plan = self._plan(op)
        if plan is None:
            return Match.fail("axes not constant, or more than 4 axes after merging")
        if not plan[1]:
            return Match.fail("reduces only size-1 axes")
        return Match(op)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        op = match.op
        shape, axes = self._plan(op)
        kept = [1 if i in axes else d for i, d in enumerate(shape)]
        reduced = b.op(
            op.type,
            [reshape(b, op.inputs[0], shape, "merged"), i32(*axes)],
            shape=kept,
            options=options("ReducerOptions", keepDims=True),
            quantization=op.outputs[0].quantization,
            name=op.type.lower(),
        )
        replace(op, [reshape(b, reduced, op.outputs[0].shape, "result")])

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def build():
            def body(b: OpBuilder, x):
                x5 = reshape(b, scale(b, x), (1, 2, 3, 4, 5))
                total = b.SUM(
                    x5,
                    i32(3, 4),
                    shape=(1, 2, 3, 1, 1),
                    options=options("ReducerOptions", keepDims=True),
                )
                return scale(b, reshape(b, total, (1, 2, 3)))

            return graph_model([((2, 3, 4, 5), np.float32)], body)

        return (Example("sum_last_two", build),)
