"""BROADCAST_TO, which the GPU rejects (and whose version 1 the runtime cannot load), as TILE.

Measured (ai-edge-litert 2.3, lavapipe): BROADCAST_TO versions 2 and 3 load on the CPU and the
GPU rejects them ("Operation is not supported."); version 1 has no CPU kernel at all ("Didn't find
op for builtin opcode 'BROADCAST_TO' version '1'") and the GPU compile fails. RESHAPE (to the
output rank) + TILE produce the same elements by copying, so the rewrite is exact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tflkit.compat.reasons import Reason
from tflkit.ir.graph import Op
from tflkit.rewriter.example import graph_model, i32, numpy_reference, options, scale
from tflkit.rewriter.rule import Example, Match, OpRewrite, const_ints, replace, reshape

if TYPE_CHECKING:
    from tflkit.ir.builder import OpBuilder

#: The GPU's TILE (and every GPU tensor) is at most 4-D.
MAX_RANK = 4


def tile_plan(in_shape: tuple[int, ...], out_shape: tuple[int, ...]) -> list[int] | None:
    """TILE multiples turning ``in_shape`` (left-padded with 1s) into ``out_shape``, or None."""
    if len(in_shape) > len(out_shape):
        return None
    padded = (1,) * (len(out_shape) - len(in_shape)) + tuple(in_shape)
    multiples = []
    for have, want in zip(padded, out_shape, strict=True):
        if have == want:
            multiples.append(1)
        elif have == 1:
            multiples.append(want)
        else:
            return None
    return multiples


class BroadcastToTile(OpRewrite):
    name = "broadcast_to_tile"
    summary = "BROADCAST_TO -> RESHAPE (to the output rank) + TILE"
    fixes = ("BROADCAST_TO",)
    reasons = ("Operation is not supported",)
    codes = (Reason.UNSUPPORTED_OP, Reason.OP_VERSION)
    required_inputs = (0, 1)

    def match(self, op: Op) -> Match:
        x, out = op.inputs[0], op.outputs[0]
        if x is None or x.is_dynamic or out.is_dynamic:
            return Match.fail("the shape is dynamic (fix it with --input-shape first)")
        target = const_ints(op.inputs[1])
        if target is None:
            return Match.fail("the target shape is not a constant")
        if tuple(target) != tuple(out.shape):
            return Match.fail(
                f"the target shape {target} disagrees with the output shape {list(out.shape)}"
            )
        if out.rank > MAX_RANK:
            return Match.fail(
                f"output rank {out.rank} > {MAX_RANK} (the GPU's TILE is at most 4-D)"
            )
        if tile_plan(x.shape, out.shape) is None:
            return Match.fail(f"shape {list(x.shape)} does not broadcast to {target}")
        return Match(op)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        op = match.op
        x, out = op.inputs[0], op.outputs[0]
        multiples = tile_plan(x.shape, out.shape)
        assert multiples is not None
        padded = (1,) * (out.rank - x.rank) + tuple(x.shape)
        y = x if padded == tuple(x.shape) else reshape(b, x, padded, name="broadcast_rank")
        if any(m != 1 for m in multiples):
            y = b.TILE(y, i32(*multiples), shape=out.shape, options=options("TileOptions"))
        elif y is x:
            y = reshape(b, x, out.shape, name="broadcast_identity")
        replace(op, [y])

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def build(in_shape: tuple[int, ...], out_shape: tuple[int, ...], version: int):
            def body(b: OpBuilder, x):
                y = b.BROADCAST_TO(
                    scale(b, x, 2.0), i32(*out_shape), shape=out_shape, version=version
                )
                return scale(b, y)

            return lambda: graph_model([(in_shape, np.float32)], body)

        return (
            Example("rank2_to_rank3_v2", build((1, 4), (2, 3, 4), 2)),
            Example("rank4_inner_v3", build((1, 1, 5, 1), (1, 3, 5, 4), 3)),
            Example("rank1_to_rank4_v2", build((4,), (1, 2, 3, 4), 2)),
            # version 1 has no CPU kernel: the original's outputs come from numpy
            Example("rank2_to_rank3_v1", build((1, 4), (2, 3, 4), 1), reference=numpy_reference),
        )
