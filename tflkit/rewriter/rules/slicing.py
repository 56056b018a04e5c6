"""Slicing, gathering, packing and padding in forms the GPU takes."""

from __future__ import annotations

import copy
import itertools
from typing import TYPE_CHECKING

from tflkit.compat.reasons import Reason
from tflkit.ir.graph import Op
from tflkit.rewriter.example import graph_model, i32, options, scale
from tflkit.rewriter.rule import Example, Match, OpRewrite, const_ints, replace, reshape

if TYPE_CHECKING:
    from tflkit.ir.builder import OpBuilder

_MASKS = ("ellipsisMask", "newAxisMask", "shrinkAxisMask")


def _bit(mask: int, i: int) -> bool:
    return bool((mask >> i) & 1)


def dense_slice(op: Op) -> list[list[int]] | None:
    """The input indices a STRIDED_SLICE selects, one list per input axis (None: unsupported)."""
    o = op.options
    begin, end, strides = (const_ints(t) for t in op.inputs[1:4])
    if begin is None or end is None or strides is None or o is None:
        return None
    if not len(begin) == len(end) == len(strides) or 0 in strides:
        return None
    if getattr(o, "offset", False):  # end counts from begin
        end = [b + e for b, e in zip(begin, end, strict=True)]
    shape = op.inputs[0].shape
    spec = len(begin)
    consuming = spec - sum(_bit(o.newAxisMask, i) for i in range(spec))
    ellipses = sum(_bit(o.ellipsisMask, i) for i in range(spec))
    if ellipses > 1 or consuming - ellipses > len(shape):
        return None  # a spec the stored rank cannot hold: the runtime rejects it, not us
    picks: list[list[int]] = []
    axis = 0
    for i in range(spec):
        if _bit(o.ellipsisMask, i):
            for _ in range(len(shape) - (consuming - 1)):
                picks.append(list(range(shape[axis])))
                axis += 1
            continue
        if _bit(o.newAxisMask, i):
            continue
        n = shape[axis]
        if _bit(o.shrinkAxisMask, i):
            index = begin[i] + n if begin[i] < 0 else begin[i]
            if not 0 <= index < n:
                return None
            picks.append([index])
        else:
            start = None if _bit(o.beginMask, i) else begin[i]
            stop = None if _bit(o.endMask, i) else end[i]
            picks.append(list(range(n))[slice(start, stop, strides[i])])
        axis += 1
    picks.extend(list(range(shape[a])) for a in range(axis, len(shape)))
    if any(not p for p in picks):
        return None
    return picks


def _regular(pick: list[int]) -> int | None:
    """The stride of an arithmetic sequence of indices, else None."""
    if len(pick) == 1:
        return 1
    steps = {b - a for a, b in itertools.pairwise(pick)}
    return steps.pop() if len(steps) == 1 else None


class _StridedSlice(OpRewrite):
    fixes = ("STRIDED_SLICE",)
    required_inputs = (0, 1, 2, 3)

    def match(self, op: Op) -> Match:
        if op.options is None:
            return Match.fail("no StridedSliceOptions")
        x = op.inputs[0]
        if x.rank > 4 or op.outputs[0].is_dynamic or x.is_dynamic:
            return Match.fail("input rank > 4 or dynamic shape")
        picks = dense_slice(op)
        if picks is None or any(_regular(p) is None for p in picks):
            return Match.fail(
                "begin/end/strides are not constant, or the slice is empty or irregular"
            )
        return Match(op)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        op = match.op
        x = op.inputs[0]
        picks = dense_slice(op)
        reversed_axes = [a for a, p in enumerate(picks) if len(p) > 1 and p[1] < p[0]]
        if reversed_axes:
            for a in reversed_axes:  # one axis per REVERSE_V2: the GPU takes that form
                x = b.REVERSE_V2(x, i32(a), name="reverse")
            picks = [
                [x.shape[a] - 1 - i for i in p] if a in reversed_axes else p
                for a, p in enumerate(picks)
            ]
        starts = [p[0] for p in picks]
        steps = [_regular(p) for p in picks]
        stops = [p[-1] + 1 for p in picks]
        sliced_shape = [len(p) for p in picks]
        if sliced_shape != list(x.shape):
            x = b.STRIDED_SLICE(
                x,
                i32(*starts),
                i32(*stops),
                i32(*steps),
                shape=sliced_shape,
                options=options("StridedSliceOptions"),
                name="slice",
            )
        if list(x.shape) != list(op.outputs[0].shape) or x is op.inputs[0]:
            x = reshape(b, x, op.outputs[0].shape)
        replace(op, [x])


class StridedSliceMasks(_StridedSlice):
    name = "strided_slice_masks"
    summary = "STRIDED_SLICE with ellipsis/new-axis/shrink masks -> plain STRIDED_SLICE + RESHAPE"
    reasons = ("shrink_axis_mask", "new_axis_mask", "ellipsis_mask")
    codes = (Reason.OPTIONS,)

    def pattern(self, op: Op) -> bool:
        return (
            super().pattern(op)
            and op.options is not None
            and any(getattr(op.options, m, 0) for m in _MASKS)
        )

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def make(shape, begin, end, strides, out, **masks):
            return lambda: graph_model(
                [(shape, np.float32)],
                lambda b, x: scale(
                    b,
                    b.STRIDED_SLICE(
                        scale(b, x),
                        i32(*begin),
                        i32(*end),
                        i32(*strides),
                        shape=out,
                        options=options("StridedSliceOptions", **masks),
                    ),
                ),
            )

        return (
            Example(
                "shrink", make((1, 4, 6), (0, 1, 0), (1, 2, 6), (1, 1, 1), (1, 6), shrinkAxisMask=2)
            ),
            Example(
                "new_axis", make((4, 6), (0, 0, 0), (0, 4, 6), (1, 1, 1), (1, 4, 6), newAxisMask=1)
            ),
            Example("ellipsis", make((1, 4, 6), (0, 1), (0, 5), (1, 2), (1, 4, 2), ellipsisMask=1)),
        )


class StridedSliceReverse(_StridedSlice):
    name = "strided_slice_reverse"
    summary = "STRIDED_SLICE with negative strides -> REVERSE_V2 + plain STRIDED_SLICE"
    reasons = ("Reverse slices",)
    codes = (Reason.OPTIONS,)

    def pattern(self, op: Op) -> bool:
        strides = const_ints(op.inputs[3]) if super().pattern(op) else None
        return strides is not None and any(s < 0 for s in strides)

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def build():
            return graph_model(
                [((1, 4, 6), np.float32)],
                lambda b, x: scale(
                    b,
                    b.STRIDED_SLICE(
                        scale(b, x),
                        i32(0, 0, -1),
                        i32(1, 4, -7),
                        i32(1, 1, -2),
                        shape=(1, 4, 3),
                        options=options("StridedSliceOptions"),
                    ),
                ),
            )

        return (Example("reverse_last_axis", build),)


def _refused_form(op: Op) -> str | None:
    """The plain-slice forms the accelerator refuses (measured with ``check --probe``)."""
    o = op.options
    begin, end = const_ints(op.inputs[1]), const_ints(op.inputs[2])
    if o is None or begin is None or end is None:
        return None
    shape = op.inputs[0].shape
    if getattr(o, "offset", False):
        return "offset"  # "Output shape mismatch": the GPU reads end as absolute
    if len(begin) != len(shape):
        return "short spec"  # "STRIDED_SLICE input/params dimensions mismatch."
    for axis, (e, n) in enumerate(zip(end, shape, strict=False)):
        if not _bit(o.endMask, axis) and e > n:
            return "end past bound"  # "Output shape mismatch": the GPU does not clamp
    return None


class StridedSliceCanonical(_StridedSlice):
    name = "strided_slice_canonical"
    summary = "STRIDED_SLICE with offset, a short spec or ends past the bounds -> a full plain one"
    reasons = ("Output shape mismatch", "dimensions mismatch")
    codes = (Reason.OPTIONS, Reason.SHAPE)

    def pattern(self, op: Op) -> bool:
        if not super().pattern(op) or op.options is None:
            return False
        if any(getattr(op.options, m, 0) for m in _MASKS):
            return False  # strided_slice_masks
        strides = const_ints(op.inputs[3])
        if strides is None or any(s < 0 for s in strides):
            return False  # strided_slice_reverse
        return _refused_form(op) is not None

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def make(begin, end, out, **fields):
            return lambda: graph_model(
                [((1, 4, 6, 8), np.float32)],
                lambda b, x: scale(
                    b,
                    b.STRIDED_SLICE(
                        scale(b, x),
                        i32(*begin),
                        i32(*end),
                        i32(*[1] * len(begin)),
                        shape=out,
                        options=options("StridedSliceOptions", **fields),
                    ),
                ),
            )

        return (
            Example("end_past_bound", make((0, 1, 0, 0), (1, 100, 6, 8), (1, 3, 6, 8))),
            Example("short_spec", make((0, 1), (1, 3), (1, 2, 6, 8))),
            Example("offset", make((0, 1, 0, 0), (1, 2, 6, 8), (1, 2, 6, 8), offset=True)),
        )


class GatherNdConstIndices(OpRewrite):
    name = "gather_nd_const_indices"
    summary = "GATHER_ND with constant indices -> RESHAPE + GATHER on flattened leading axes"
    fixes = ("GATHER_ND",)
    reasons = ("Operation is not supported",)
    codes = (Reason.UNSUPPORTED_OP,)
    required_inputs = (0, 1)

    def match(self, op: Op) -> Match:
        import numpy as np

        params, idx = op.inputs[:2]
        if len(op.inputs) != 2:
            return Match.fail(f"{len(op.inputs)} inputs, not 2")
        if not idx.is_constant or idx.data is None or idx.rank == 0:
            return Match.fail("indices are not constant")
        k = idx.shape[-1]
        values = idx.data.reshape(-1, k).astype(np.int64)
        if k > params.rank or np.any(values < 0) or np.any(values >= np.array(params.shape[:k])):
            return Match.fail("indices are out of range or negative")
        if op.outputs[0].rank > 4 or params.rank - k + 1 > 4:
            return Match.fail("result rank > 4")
        return Match(op)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        import numpy as np

        op = match.op
        params, idx = op.inputs
        k = idx.shape[-1]
        lead = params.shape[:k]
        flat_params = reshape(b, params, [int(np.prod(lead)), *params.shape[k:]], "flatten")
        values = idx.data.reshape(-1, k).astype(np.int64)
        flat = np.ravel_multi_index(tuple(values.T), lead).astype(np.int32)
        flat = flat.reshape(idx.shape[:-1])
        out = op.outputs[0]
        gathered = b.GATHER(
            flat_params,
            b.const(flat, "flat_indices"),
            shape=out.shape,
            options=options("GatherOptions", axis=0),
        )
        replace(op, [gathered])

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def build():
            return graph_model(
                [((3, 5, 4), np.float32)],
                lambda b, x: scale(
                    b,
                    b.GATHER_ND(
                        scale(b, x),
                        np.array([[2, 1], [0, 4]], np.int32),
                        shape=(2, 4),
                    ),
                ),
            )

        return (Example("two_index_axes", build),)


class PackRepeated(OpRewrite):
    name = "pack_repeated_input"
    summary = "PACK of one runtime tensor repeated -> RESHAPE + TILE (the accelerator aborts on it)"
    fixes = ("PACK",)
    reasons = ("IsInput",)
    codes = (Reason.CRASH,)

    def pattern(self, op: Op) -> bool:
        if not super().pattern(op) or None in op.inputs:
            return False
        runtime = [id(t) for t in op.inputs if not t.is_constant]  # constants may repeat
        return len(set(runtime)) < len(runtime)

    def match(self, op: Op) -> Match:
        if op.options is None:
            return Match.fail("no PackOptions")
        if not 0 < op.outputs[0].rank <= 4 or op.outputs[0].is_dynamic:
            return Match.fail("result rank is 0 or > 4, or dynamic")
        return Match(op)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        op = match.op
        axis = op.options.axis % op.outputs[0].rank
        out_shape = list(op.outputs[0].shape)
        one = list(out_shape)
        one[axis] = 1
        if len({id(t) for t in op.inputs}) == 1:
            multiples = [1] * len(out_shape)
            multiples[axis] = len(op.inputs)
            tiled = b.TILE(reshape(b, op.inputs[0], one), i32(*multiples), shape=out_shape)
            replace(op, [tiled])
            return
        # Mixed: a separate RESHAPE per position makes every CONCATENATION input distinct.
        parts = [reshape(b, t, one, f"part{i}") for i, t in enumerate(op.inputs)]
        joined = b.CONCATENATION(
            *parts, shape=out_shape, options=options("ConcatenationOptions", axis=axis)
        )
        replace(op, [joined])

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def same():
            def body(b: OpBuilder, x):
                y = scale(b, x)
                return scale(
                    b,
                    b.PACK(
                        y, y, shape=(2, 1, 8), options=options("PackOptions", valuesCount=2, axis=0)
                    ),
                )

            return graph_model([((1, 8), np.float32)], body)

        def mixed():
            def body(b: OpBuilder, x, z):
                y, w = scale(b, x), scale(b, z)
                return scale(
                    b,
                    b.PACK(
                        y,
                        w,
                        y,
                        shape=(1, 3, 8),
                        options=options("PackOptions", valuesCount=3, axis=1),
                    ),
                )

            return graph_model([((1, 8), np.float32), ((1, 8), np.float32)], body)

        return (Example("same_twice", same), Example("mixed", mixed))


class PadLowRank(OpRewrite):
    name = "pad_low_rank"
    summary = "PAD/PADV2/MIRROR_PAD of a rank-1/2 tensor -> RESHAPE to 4-D, pad H/W, RESHAPE back"
    fixes = ("PAD", "PADV2", "MIRROR_PAD")
    reasons = ("paddings tensor shape",)
    codes = (Reason.SHAPE,)
    required_inputs = (0, 1)

    def pattern(self, op: Op) -> bool:
        return super().pattern(op) and op.inputs[0].rank in (1, 2)

    def match(self, op: Op) -> Match:
        if const_ints(op.inputs[1]) is None:
            return Match.fail("paddings are not constant")
        if op.inputs[0].is_dynamic:
            return Match.fail("dynamic shape")
        return Match(op)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        import numpy as np

        op = match.op
        x = op.inputs[0]
        pads = np.array(const_ints(op.inputs[1]), np.int32).reshape(x.rank, 2)
        dims = [1] * (2 - x.rank) + list(x.shape)
        pads2 = np.concatenate([np.zeros((2 - x.rank, 2), np.int32), pads])
        four_pads = np.concatenate([[[0, 0]], pads2, [[0, 0]]]).astype(np.int32)
        padded_dims = [d + int(p.sum()) for d, p in zip(dims, pads2, strict=True)]
        x4 = reshape(b, x, [1, *dims, 1], "to4d")
        inputs = [x4, b.const(four_pads, "paddings4d"), *op.inputs[2:]]
        padded = b.op(op.type, inputs, shape=[1, *padded_dims, 1], options=op.options, name="pad")
        replace(op, [reshape(b, padded, op.outputs[0].shape, "from4d")])

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def make(shape, pads, out):
            return lambda: graph_model(
                [(shape, np.float32)],
                lambda b, x: scale(b, b.PAD(scale(b, x), np.array(pads, np.int32), shape=out)),
            )

        return (
            Example("rank2", make((3, 4), [[1, 1], [2, 0]], (5, 6))),
            Example("rank1", make((4,), [[1, 2]], (7,))),
        )


class OneHotLastAxis(OpRewrite):
    """The GPU takes ONE_HOT with its one-hot dimension last only; onnx2tf writes magika 0.5.1's
    one-hot at axis 1 (channels-first guess), which left it and its feeders on the CPU."""

    name = "one_hot_last_axis"
    summary = "ONE_HOT(axis=k) -> TRANSPOSE(ONE_HOT(axis=-1)) moving the one-hot dimension to k"
    fixes = ("ONE_HOT",)
    codes = (Reason.OPTIONS,)
    reasons = ("OneHot axis must be -1",)
    required_inputs = (0, 1, 2, 3)

    def pattern(self, op: Op) -> bool:
        if not super().pattern(op) or op.options is None:
            return False
        rank = len(op.inputs[0].shape)
        return op.options.axis not in (-1, rank)

    def match(self, op: Op) -> Match:
        rank, axis = len(op.inputs[0].shape), op.options.axis
        if not -rank - 1 <= axis <= rank:
            return Match.fail(f"axis {axis} is out of range for rank {rank} indices")
        out = op.outputs[0]
        if len(out.shape) != rank + 1 or any(d < 1 for d in out.shape):
            return Match.fail("the output shape is not static")
        return Match(op)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        op = match.op
        indices, out = op.inputs[0], op.outputs[0]
        rank = len(indices.shape)
        axis = op.options.axis % (rank + 1)
        hot = b.ONE_HOT(
            *op.inputs[:4],
            shape=[*indices.shape, out.shape[axis]],
            dtype=out.type,
            options=options("OneHotOptions", axis=-1),
            quantization=copy.deepcopy(out.quantization),  # same values, same encoding
            name="one_hot_last",
        )
        perm = list(range(rank))
        perm.insert(axis, rank)
        replace(op, [b.TRANSPOSE(hot, i32(*perm), shape=out.shape, dtype=out.type)])

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def build():
            return graph_model(
                [((1, 8), np.int32)],
                lambda b, x: scale(
                    b,
                    b.ONE_HOT(
                        x,
                        i32(5),
                        np.array(1.0, np.float32),
                        np.array(0.0, np.float32),
                        shape=(1, 5, 8),
                        dtype=np.float32,
                        options=options("OneHotOptions", axis=1),
                    ),
                ),
            )

        return (Example("axis_1", build),)
