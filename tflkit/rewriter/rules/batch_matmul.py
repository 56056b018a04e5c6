"""BATCH_MATMUL with one runtime operand broadcast over the other's batch, in a form the GPU
computes right.

LiteRT 2.3's GPU accelerator takes ``x [4,1,32] @ y [32,16]`` with ``y`` computed at runtime
(gemma's attention: 4 query heads' probabilities times the one KV head's values) but computes
only the first batch and returns zeros for the others, fp32 and fp16 alike (the table's
``WRONG_RESULT``, ``compat/targets/litert_gpu.py``). Equal batches are right. So:

* ``y`` broadcast whole (its batch dimensions all 1): fold ``x``'s batch into its rows,
  ``reshape(reshape(x, [1, B*M, K]) @ y, [B..., M, N])`` (``adj_x``: a TRANSPOSE first);
* otherwise (``x`` broadcast, or a partial broadcast such as ``[2,4,1,K] @ [2,1,K,N]``): TILE
  each operand to the common batch, then the same BATCH_MATMUL with equal batches.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tflkit.compat.reasons import Reason
from tflkit.ir import schema
from tflkit.ir.graph import Op, Tensor
from tflkit.rewriter.contract import Contract
from tflkit.rewriter.example import graph_model, options, scale
from tflkit.rewriter.rule import Example, Match, OpRewrite, replace, reshape

if TYPE_CHECKING:
    from tflkit.ir.builder import OpBuilder

#: Element types the rewrite handles: the fold and TILE only move data, so quantized operands
#: keep their encoding and the product takes the replaced output's.
_TYPES = frozenset({schema.TensorType.FLOAT32, schema.TensorType.INT8})


def padded_batches(x: Tensor, y: Tensor) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The batch dimensions of both operands, padded with leading 1s to one length."""
    width = max(x.rank, y.rank) - 2
    bx = (1,) * (width - x.rank + 2) + tuple(int(d) for d in x.shape[:-2])
    by = (1,) * (width - y.rank + 2) + tuple(int(d) for d in y.shape[:-2])
    return bx, by


def broadcast_batch(op: Op) -> bool:
    """Both operands computed at runtime, of rank >= 2, with batches that differ."""
    x, y = op.inputs[0], op.inputs[1]
    if x is None or y is None or x.is_constant or y.is_constant:
        return False
    if x.rank < 2 or y.rank < 2:
        return False
    bx, by = padded_batches(x, y)
    return bx != by


class BatchMatMulBroadcast(OpRewrite):
    name = "batch_matmul_broadcast"
    summary = (
        "BATCH_MATMUL of two runtime operands whose batches differ -> the batch folded into "
        "the rows (RESHAPE, BATCH_MATMUL, RESHAPE), or both operands TILEd to one batch "
        "(LiteRT 2.3's GPU computes only the first batch of the broadcast form)"
    )
    fixes = ("BATCH_MATMUL",)
    codes = (Reason.WRONG_RESULT,)
    reasons = ("computes wrong values",)
    contract = Contract(0.0, 0.0, "bit-identical on the CPU kernels (measured)")
    required_inputs = (0, 1)

    def pattern(self, op: Op) -> bool:
        return super().pattern(op) and broadcast_batch(op)

    def match(self, op: Op) -> Match:
        x, y, out = op.inputs[0], op.inputs[1], op.outputs[0]
        tensors = (x, y, out)
        if any(t.is_dynamic for t in tensors):
            return Match.fail("a shape is dynamic (fix it with --input-shape first)")
        if any(t.type not in _TYPES for t in tensors) or len({t.type for t in tensors}) > 1:
            return Match.fail("operands and output are not all float32 or all int8")
        if out.rank > 4 or x.rank > 4 or y.rank > 4:
            return Match.fail("a tensor has more than 4 dimensions")
        bx, by = padded_batches(x, y)
        if any(a != b and 1 not in (a, b) for a, b in zip(bx, by, strict=True)):
            return Match.fail(f"the batches {list(bx)} and {list(by)} do not broadcast")
        return Match(op)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        op = match.op
        x, y = op.inputs[0], op.inputs[1]
        _, by = padded_batches(x, y)
        if set(by) <= {1}:
            replace(op, [_fold_rows(op, b)])
        else:
            replace(op, [_tile_to_one_batch(op, b)])

    def examples(self) -> tuple[Example, ...]:
        return (
            Example("rhs_broadcast", lambda: _example((4, 2, 8), (8, 4))),
            Example("rhs_batch1_adj_x", lambda: _example((3, 8, 2), (1, 8, 4), adj_x=True)),
            Example("rhs_broadcast_adj_y", lambda: _example((4, 2, 6), (8, 6), adj_y=True)),
            Example("lhs_broadcast", lambda: _example((1, 2, 8), (3, 8, 4))),
            Example("rank4_partial", lambda: _example((2, 3, 1, 8), (2, 1, 8, 4))),
        )


def _flags(op: Op) -> tuple[bool, bool]:
    opts = op.options
    return bool(getattr(opts, "adjX", False)), bool(getattr(opts, "adjY", False))


def _fold_rows(op: Op, b: OpBuilder) -> Tensor:
    """``x [b..., M, K] @ y [1..., K, N]`` as ``reshape(reshape(x, [1, B*M, K]) @ y)``."""
    x, y, out = op.inputs[0], op.inputs[1], op.outputs[0]
    adj_x, adj_y = _flags(op)
    if adj_x:
        x = _swap_last(b, x)
    rows = math.prod(int(d) for d in x.shape[:-1])
    lead = (1,) * (max(y.rank, 3) - 2)
    flat = reshape(b, x, [*lead, rows, int(x.shape[-1])], name="rows")
    product = b.BATCH_MATMUL(
        flat,
        y,
        options=options("BatchMatMulOptions", adjY=adj_y),
        shape=[*lead, rows, int(out.shape[-1])],
        dtype=out.type,
        quantization=out.quantization,
        name="matmul_rows",
    )
    return reshape(b, product, out.shape, name="matmul")


def _tile_to_one_batch(op: Op, b: OpBuilder) -> Tensor:
    """Both operands TILEd to the common batch, then the BATCH_MATMUL with equal batches."""
    x, y, out = op.inputs[0], op.inputs[1], op.outputs[0]
    adj_x, adj_y = _flags(op)
    bx, by = padded_batches(x, y)
    batch = tuple(max(a, c) for a, c in zip(bx, by, strict=True))
    product = b.BATCH_MATMUL(
        _tile(b, x, bx, batch, "lhs"),
        _tile(b, y, by, batch, "rhs"),
        options=options("BatchMatMulOptions", adjX=adj_x, adjY=adj_y),
        shape=list(out.shape),
        dtype=out.type,
        quantization=out.quantization,
        name="matmul",
    )
    return product


def _tile(b: OpBuilder, t: Tensor, have: Sequence[int], want: Sequence[int], name: str) -> Tensor:
    """``t`` with batch ``have`` (padded) repeated to batch ``want``."""
    import numpy as np

    if tuple(have) == tuple(want):
        return t
    matrix = [int(d) for d in t.shape[-2:]]
    full = reshape(b, t, [*have, *matrix], name=f"{name}_rank") if t.rank != len(have) + 2 else t
    multiples = np.array([w // h for h, w in zip(have, want, strict=True)] + [1, 1], np.int32)
    return b.TILE(full, multiples, shape=[*want, *matrix], name=f"{name}_tiled")


def _swap_last(b: OpBuilder, x: Tensor) -> Tensor:
    import numpy as np

    perm = list(range(x.rank))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    shape = [int(x.shape[p]) for p in perm]
    return b.TRANSPOSE(x, np.array(perm, np.int32), shape=shape, name="lhs_t")


def _example(
    lhs: tuple[int, ...], rhs: tuple[int, ...], *, adj_x: bool = False, adj_y: bool = False
):
    """``scale(x) @ scale(y)``: both operands computed at runtime (as in an attention block)."""
    import numpy as np

    xa = (*lhs[:-2], lhs[-1], lhs[-2]) if adj_x else lhs
    ya = (*rhs[:-2], rhs[-1], rhs[-2]) if adj_y else rhs
    shape = (*np.broadcast_shapes(xa[:-2], ya[:-2]), xa[-2], ya[-1])
    opts = options("BatchMatMulOptions", adjX=adj_x, adjY=adj_y)
    return graph_model(
        [(lhs, np.float32), (rhs, np.float32)],
        lambda b, x, y: scale(
            b, b.BATCH_MATMUL(scale(b, x), scale(b, y), options=opts, shape=shape)
        ),
    )
