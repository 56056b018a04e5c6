"""Arithmetic, arg-reductions and matrix products in forms the GPU takes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tflkit.compat.reasons import Reason
from tflkit.ir import schema
from tflkit.ir.graph import Op, Tensor
from tflkit.rewriter.example import graph_model, i32, options, scale
from tflkit.rewriter.rule import Example, Match, OpRewrite, is_float, replace

if TYPE_CHECKING:
    from tflkit.ir.builder import OpBuilder

INT64 = schema.TensorType.INT64
INT32 = schema.TensorType.INT32
#: (op type, input position) of readers that take int32 indices as well as int64.
_INDEX_READERS = frozenset({("GATHER", 1), ("ONE_HOT", 0), ("EMBEDDING_LOOKUP", 0)})


class AddNToAdd(OpRewrite):
    name = "add_n_to_add"
    summary = "ADD_N of n > 2 inputs -> a left-to-right chain of ADD"
    fixes = ("ADD_N",)
    reasons = ("only supports 2 inputs",)
    codes = (Reason.INPUT_COUNT,)

    def pattern(self, op: Op) -> bool:
        inputs = op.inputs
        return super().pattern(op) and len(inputs) > 2 and all(t is not None for t in inputs)

    def match(self, op: Op) -> Match:
        shapes = {t.shape for t in op.inputs}
        return Match(op) if len(shapes) == 1 else Match.fail("inputs have different shapes")

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        op = match.op
        total = op.inputs[0]
        for term in op.inputs[1:]:
            total = b.ADD(total, term, options=options("AddOptions"), name="add_n")
        replace(op, [total])

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def build():
            return graph_model(
                [((1, 6), np.float32)] * 4,
                lambda b, *xs: scale(b, b.ADD_N(*[scale(b, x) for x in xs])),
            )

        return (Example("four_inputs", build, no_int8="ADD_N has no int8 kernel"),)


class ArgMinToArgMax(OpRewrite):
    name = "arg_min_to_arg_max"
    summary = "ARG_MIN(x) -> ARG_MAX(NEG(x)) (first index of the minimum either way)"
    fixes = ("ARG_MIN",)
    reasons = ("Operation is not supported",)
    codes = (Reason.UNSUPPORTED_OP,)
    required_inputs = (0, 1)

    def match(self, op: Op) -> Match:
        if op.options is None:
            return Match.fail("no ArgMinOptions")
        return Match(op) if is_float(op.inputs[0]) else Match.fail("input is not float32")

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        op = match.op
        negated = b.NEG(op.inputs[0], name="neg")
        out = op.outputs[0]
        arg_options = options("ArgMaxOptions", outputType=op.options.outputType)
        replace(
            op,
            [
                b.ARG_MAX(
                    negated, op.inputs[1], shape=out.shape, dtype=out.type, options=arg_options
                )
            ],
        )

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def build():
            return graph_model(
                [((1, 4, 16), np.float32)],
                lambda b, x: b.ARG_MIN(
                    scale(b, x),
                    i32(2),
                    shape=(1, 4),
                    dtype=np.int32,
                    options=options("ArgMinOptions", outputType=INT32),
                ),
            )

        return (Example("int32_out", build),)


class ArgInt64ToInt32(OpRewrite):
    name = "arg_int64_to_int32"
    summary = "ARG_MAX/ARG_MIN with int64 output -> int32 output (+ CAST only where int64 is read)"
    fixes = ("ARG_MAX", "ARG_MIN")
    reasons = ("INT64",)
    codes = (Reason.DTYPE,)
    required_inputs = (0, 1)

    def pattern(self, op: Op) -> bool:
        return super().pattern(op) and op.outputs[0].type == INT64

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        import numpy as np

        op = match.op
        out = op.outputs[0]
        kind = "ArgMaxOptions" if op.type == "ARG_MAX" else "ArgMinOptions"
        narrow = b.op(
            op.type,
            list(op.inputs),
            shape=out.shape,
            dtype=np.int32,
            options=options(kind, outputType=INT32),
            name=op.type.lower(),
        )
        needs_int64 = out.is_observable or any(
            (reader.type, i) not in _INDEX_READERS for reader, i in out.uses
        )
        if not needs_int64:
            replace(op, [narrow])
            return
        index_readers = [(r, i) for r, i in out.uses if (r.type, i) in _INDEX_READERS]
        cast_options = options("CastOptions", inDataType=INT32, outDataType=INT64)
        wide = b.CAST(narrow, shape=out.shape, dtype=np.int64, options=cast_options, name="int64")
        replace(op, [wide])
        for reader, i in index_readers:
            reader.set_input(i, narrow)

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def graph_output():
            return graph_model(
                [((1, 4, 16), np.float32)],
                lambda b, x: b.ARG_MAX(
                    scale(b, x),
                    i32(2),
                    shape=(1, 4),
                    dtype=np.int64,
                    options=options("ArgMaxOptions", outputType=INT64),
                ),
            )

        def into_gather():
            def body(b: OpBuilder, x, table):
                idx = b.ARG_MAX(
                    scale(b, x),
                    i32(1),
                    shape=(4,),
                    dtype=np.int64,
                    options=options("ArgMaxOptions", outputType=INT64),
                )
                picked = b.GATHER(
                    scale(b, table), idx, shape=(4, 8), options=options("GatherOptions", axis=0)
                )
                return scale(b, picked)

            return graph_model([((4, 16), np.float32), ((16, 8), np.float32)], body)

        return (
            Example("graph_output", graph_output, residual=("CAST",)),
            Example("into_gather", into_gather),
        )


class GatherInt64Indices(OpRewrite):
    name = "gather_int64_indices"
    summary = "GATHER with constant int64 indices -> the same indices as int32"
    fixes = ("GATHER",)
    reasons = ("INT32 indices", "INT64")
    codes = (Reason.DTYPE,)
    required_inputs = (0, 1)

    def pattern(self, op: Op) -> bool:
        return super().pattern(op) and op.inputs[1].type == INT64

    def match(self, op: Op) -> Match:
        import numpy as np

        idx = op.inputs[1]
        if not idx.is_constant:
            return Match.fail("the int64 indices are computed, not constant")
        values = idx.data
        if values.size and (values.max() > np.iinfo(np.int32).max or values.min() < 0):
            return Match.fail("indices do not fit int32 or are negative")
        return Match(op)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        import numpy as np

        op = match.op
        idx = b.const(op.inputs[1].data.astype(np.int32), "indices")
        out = op.outputs[0]
        replace(
            op, [b.GATHER(op.inputs[0], idx, shape=out.shape, dtype=out.type, options=op.options)]
        )

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def build():
            return graph_model(
                [((5, 4), np.float32)],
                lambda b, x: scale(
                    b,
                    b.GATHER(
                        scale(b, x),
                        np.array([3, 1, 4], np.int64),
                        shape=(3, 4),
                        options=options("GatherOptions", axis=0),
                    ),
                ),
            )

        return (Example("constant_indices", build),)


def _swap_last(b: OpBuilder, x: Tensor, name: str) -> Tensor:
    import numpy as np

    perm = list(range(x.rank))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    shape = [x.shape[p] for p in perm]
    return b.TRANSPOSE(x, np.array(perm, np.int32), shape=shape, name=name)


class BatchMatMulConstLhs(OpRewrite):
    name = "batch_matmul_const_lhs"
    summary = "BATCH_MATMUL(const A, B) -> TRANSPOSE(BATCH_MATMUL(B^T, const A^T))"
    fixes = ("BATCH_MATMUL",)
    reasons = ("non-constant tensor", "mat mul")
    codes = (
        Reason.CONST_INPUT,
        Reason.NON_CONST_INPUT,
    )
    required_inputs = (0, 1)

    def pattern(self, op: Op) -> bool:
        return super().pattern(op) and op.inputs[0].is_constant

    def match(self, op: Op) -> Match:
        a, rhs = op.inputs[0], op.inputs[1]
        if rhs.is_constant:
            return Match.fail("both operands are constant")
        if not (is_float(a) and is_float(rhs)):
            return Match.fail("operands are not float32")
        if a.rank != rhs.rank or a.rank > 4:
            return Match.fail("operand ranks differ or exceed 4")
        return Match(op)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        import numpy as np

        op = match.op
        a, rhs = op.inputs[0], op.inputs[1]
        opts = op.options
        a_mat = a.data.astype(np.float32)
        if opts is not None and opts.adjX:
            a_mat = np.swapaxes(a_mat, -1, -2)
        # (A @ B)^T = B^T @ A^T; BATCH_MATMUL's adj_x transposes B for us.
        a_t = b.const(np.ascontiguousarray(np.swapaxes(a_mat, -1, -2)), "lhs_t")
        adj_x = not (opts is not None and opts.adjY)
        out = op.outputs[0]
        t_shape = [*out.shape[:-2], out.shape[-1], out.shape[-2]]
        product = b.BATCH_MATMUL(
            rhs,
            a_t,
            shape=t_shape,
            options=options("BatchMatMulOptions", adjX=adj_x),
            name="matmul_t",
        )
        replace(op, [_swap_last(b, product, "matmul")])

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def build():
            rng = np.random.default_rng(3)
            a = rng.standard_normal((1, 2, 3)).astype(np.float32)
            return graph_model(
                [((1, 3, 4), np.float32)],
                lambda b, y: scale(
                    b,
                    b.BATCH_MATMUL(
                        a,
                        scale(b, y),
                        shape=(1, 2, 4),
                        options=options("BatchMatMulOptions"),
                    ),
                ),
            )

        return (Example("const_lhs", build),)


class FullyConnectedConstInput(OpRewrite):
    name = "fully_connected_const_input"
    summary = "FULLY_CONNECTED(const X, W) -> TRANSPOSE(FULLY_CONNECTED(W, X))"
    fixes = ("FULLY_CONNECTED",)
    reasons = ("constant input",)
    codes = (Reason.CONST_INPUT,)
    required_inputs = (0, 1)

    def pattern(self, op: Op) -> bool:
        return super().pattern(op) and op.inputs[0].is_constant

    def match(self, op: Op) -> Match:
        x, w = op.inputs[0], op.inputs[1]
        bias = op.inputs[2] if len(op.inputs) > 2 else None
        if w.is_constant:
            return Match.fail("weights are constant too")
        if not (is_float(x) and is_float(w)) or x.rank != 2 or w.rank != 2:
            return Match.fail("needs float32 rank-2 input and weights")
        if bias is not None or (op.options and op.options.fusedActivationFunction):
            return Match.fail("has a bias or a fused activation")
        return Match(op)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        op = match.op
        x, w = op.inputs[0], op.inputs[1]
        flipped = b.FULLY_CONNECTED(
            w,
            x,
            None,
            shape=(w.shape[0], x.shape[0]),
            options=options("FullyConnectedOptions"),
            name="fc_t",
        )
        replace(op, [_swap_last(b, flipped, "fully_connected")])

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def build():
            x = np.random.default_rng(4).standard_normal((6, 8)).astype(np.float32)
            return graph_model(
                [((4, 8), np.float32)],
                lambda b, w: scale(
                    b,
                    b.FULLY_CONNECTED(
                        x,
                        scale(b, w),
                        None,
                        shape=(6, 4),
                        options=options("FullyConnectedOptions"),
                    ),
                ),
            )

        return (Example("const_input", build),)
