"""Embedding lookups in forms the GPU takes, and the int64 index arithmetic before them.

A text model exported from PyTorch or ONNX reads int64 ids, normalises negative ids
(``where(ids < 0, ids + vocab, ids)``), derives positions and masks from them (CAST, LESS,
ADD, RANGE) and looks up embeddings. The GPU takes none of it in int64 and all of it in int32.
:class:`Int64ToInt32` narrows a connected region of such ops at once: every int64 tensor inside
becomes int32, an int64 input (a graph input, or a value an op outside the region computes) is
cast once at the region's edge, and a value the app or another op reads as int64 is cast back
only there (as ``arg_int64_to_int32`` does for an arg-max). :class:`GatherFlatIndices` then
gives the lookup the 1-D indices the GPU takes (``[1, T]`` ids reshaped to ``[T]``, the rows
reshaped back).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import TYPE_CHECKING

from tflkit.compat.reasons import Reason
from tflkit.ir import schema
from tflkit.ir.graph import Op, Tensor
from tflkit.rewriter.example import graph_model, options, scale
from tflkit.rewriter.rule import Example, Match, OpRewrite, replace, reshape

if TYPE_CHECKING:
    import numpy as np

    from tflkit.ir.builder import OpBuilder

INT64 = schema.TensorType.INT64
INT32 = schema.TensorType.INT32
_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1

#: Ops that compute the same on int32 as on int64 when every value fits int32 (elementwise
#: integer arithmetic and comparisons, selection, data movement, lookups by index).
NARROWABLE = frozenset(
    {
        "ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "FLOOR_DIV", "FLOOR_MOD", "ABS", "NEG",
        "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL",
        "SELECT", "SELECT_V2", "CAST", "RESHAPE", "EXPAND_DIMS", "SQUEEZE", "TRANSPOSE",
        "CONCATENATION", "PACK", "STRIDED_SLICE", "SLICE", "TILE", "BROADCAST_TO", "RANGE",
        "GATHER", "EMBEDDING_LOOKUP", "ONE_HOT",
    }
)  # fmt: skip


def _is64(tensor: Tensor | None) -> bool:
    return tensor is not None and tensor.type == INT64


def _boundary_cast(op: Op) -> bool:
    """A CAST that is itself the edge of a narrowed region: int64 in, int32 out, or int32 in,
    int64 out (a value widened for a reader that reads int64)."""
    if op.type != "CAST" or not op.inputs or op.inputs[0] is None or not op.outputs:
        return False
    src, dst = op.inputs[0].type, op.outputs[0].type
    return (src, dst) in ((INT64, INT32), (INT32, INT64))


def member(op: Op) -> bool:
    """``op`` computes on int64 and computes the same on int32."""
    if op.type not in NARROWABLE or op.subgraph is None or _boundary_cast(op):
        return False
    return any(_is64(t) for t in (*op.inputs, *op.outputs))


def region(anchor: Op) -> list[Op]:
    """The connected narrowable ops around ``anchor`` (linked by any tensor: an int64 value, or
    the mask a comparison of int64 values gives a CAST back to int64), in order."""
    found: dict[int, Op] = {}
    todo = [anchor]
    while todo:
        op = todo.pop()
        if id(op) in found or not member(op):
            continue
        found[id(op)] = op
        for tensor in (*op.inputs, *op.outputs):
            if tensor is None or tensor.is_constant:
                continue
            if tensor.producer is not None:
                todo.append(tensor.producer)
            todo.extend(reader for reader, _ in tensor.uses)
    return sorted(found.values(), key=lambda o: o.index)


def _too_wide(ops: Iterable[Op]) -> str | None:
    for op in ops:
        for tensor in op.inputs:
            if _is64(tensor) and tensor.is_constant and tensor.data is not None:
                data = tensor.data
                if data.size and (data.min() < _I32_MIN or data.max() > _I32_MAX):
                    return f"the int64 constant {tensor.name} of {op.type} does not fit int32"
    return None


class _Narrowing:
    """The narrow (int32) twin of every int64 tensor a region reads or writes."""

    def __init__(self, ops: list[Op]) -> None:
        self.ops = ops
        self.inside = {id(op) for op in ops}
        self.twins: dict[int, Tensor] = {}

    def narrow(self, tensor: Tensor | None, b: OpBuilder) -> Tensor | None:
        if not _is64(tensor):
            return tensor
        assert tensor is not None
        twin = self.twins.get(id(tensor))
        if twin is None:
            twin = self._edge(tensor, b)
            self.twins[id(tensor)] = twin
        return twin

    def _edge(self, tensor: Tensor, b: OpBuilder) -> Tensor:
        """An int64 value from outside the region in int32: a constant converted, a widened
        int32 value unwidened, else one CAST (an existing one reused)."""
        import numpy as np

        if tensor.is_constant:
            return b.const(tensor.data.astype(np.int32), "int32")
        producer = tensor.producer
        if producer is not None and _boundary_cast(producer):
            return producer.inputs[0]
        for reader, _ in tensor.uses:
            if _boundary_cast(reader) and reader.outputs[0].type == INT32:
                return reader.outputs[0]
        cast = options("CastOptions", inDataType=INT64, outDataType=INT32)
        return b.CAST(tensor, dtype=np.int32, options=cast, name="int32")

    def rebuild(self, op: Op) -> None:
        """``op`` again with int32 where it had int64; int64 kept for readers outside."""
        import numpy as np

        from tflkit.ir.builder import OpBuilder

        subgraph = op.subgraph
        assert subgraph is not None
        prefix = op.outputs[0].name if op.outputs else op.type
        b = OpBuilder(subgraph, before=op, prefix=prefix)
        inputs = [self.narrow(t, b) for t in op.inputs]
        specs = [(t.shape, np.int32 if _is64(t) else t.type) for t in op.outputs]
        opts = op.options
        if op.type == "CAST":
            out_type = INT32 if _is64(op.outputs[0]) else op.outputs[0].type
            opts = options("CastOptions", inDataType=inputs[0].type, outDataType=out_type)
        new = b.op(op.type, inputs, outputs=specs, options=opts, version=op.version)
        news = list(new) if isinstance(new, tuple) else [new]
        for old, narrow in zip(op.outputs, news, strict=True):
            narrow.shape_signature = old.shape_signature
            if _is64(old):
                self.twins[id(old)] = narrow
            else:
                narrow.quantization = copy.deepcopy(old.quantization)
        pairs = list(zip(op.outputs, news, strict=True))
        widened = [self._widen(old, narrow, b) for old, narrow in pairs]
        replace(op, widened)
        for old_narrow, wide in zip(news, widened, strict=True):
            if wide is not old_narrow:
                self.twins[id(wide)] = old_narrow

    def _widen(self, old: Tensor, narrow: Tensor, b: OpBuilder) -> Tensor:
        """What readers of ``old`` read now: ``narrow``, or int64 again where the app or an op
        outside the region reads it."""
        import numpy as np

        if not _is64(old):
            return narrow
        outside = any(id(reader) not in self.inside for reader, _ in old.uses)
        if not (old.is_observable or outside):
            return narrow
        cast = options("CastOptions", inDataType=INT32, outDataType=INT64)
        return b.CAST(narrow, dtype=np.int64, options=cast, name="int64")


class Int64ToInt32(OpRewrite):
    name = "int64_to_int32"
    summary = (
        "int64 index arithmetic (CAST, LESS, ADD, SELECT, RANGE, GATHER ids...) -> int32, cast "
        "once where int64 comes in and back only where int64 is read (ids must fit int32)"
    )
    fixes = tuple(sorted(NARROWABLE))
    reasons = ("INT64",)
    codes = (Reason.DTYPE,)
    required_inputs = ()
    num_outputs = None

    def pattern(self, op: Op) -> bool:
        return super().pattern(op) and member(op)

    def match(self, op: Op) -> Match:
        ops = region(op)
        return Match.unless(op, _too_wide(ops), ops=ops)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        narrowing = _Narrowing(match["ops"])
        for op in match["ops"]:
            narrowing.rebuild(op)

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        return (
            Example("negative_ids_lookup", lambda: _lookup_example(np.int64), residual=("CAST",)),
            Example("int32_ids_widened", lambda: _lookup_example(np.int32)),
            Example("mask_and_output", _mask_example, residual=("CAST",)),
        )


# --- examples ----------------------------------------------------------------------------------
VOCAB, LENGTH, WIDTH = 20, 6, 8


def _table() -> np.ndarray:
    import numpy as np

    return np.random.default_rng(5).standard_normal((VOCAB, WIDTH)).astype(np.float32)


def _normalised(b: OpBuilder, ids: Tensor) -> Tensor:
    """``where(ids < 0, ids + VOCAB, ids)`` in int64 (onnx2tf's ONNX Gather)."""
    import numpy as np

    zero, vocab = np.array(0, np.int64), np.array(VOCAB, np.int64)
    negative = b.LESS(ids, zero, dtype=np.bool_, name="negative")
    wrapped = b.ADD(ids, vocab, options=options("AddOptions"), name="wrapped")
    return b.SELECT_V2(negative, wrapped, ids, dtype=np.int64, name="ids64")


def _lookup_example(id_type: type) -> object:
    """Ids (int64, or int32 widened to int64 by a CAST) normalised, then a 1-D lookup."""
    import numpy as np

    def body(b: OpBuilder, ids: Tensor) -> Tensor:
        if id_type is np.int32:
            cast = options("CastOptions", inDataType=INT32, outDataType=INT64)
            ids = b.CAST(ids, dtype=np.int64, options=cast, name="widen")
        picked = b.GATHER(
            _table(), _normalised(b, ids), shape=(LENGTH, WIDTH), options=options("GatherOptions")
        )
        return scale(b, picked)

    return graph_model([((LENGTH,), id_type)], body)


def _mask_example() -> object:
    """A float mask cast from int64 ids (``ids != 0``), and the normalised ids an output the
    app reads as int64."""
    import numpy as np

    def body(b: OpBuilder, ids: Tensor, x: Tensor) -> list[Tensor]:
        keep = b.NOT_EQUAL(ids, np.array(0, np.int64), dtype=np.bool_, name="keep")
        cast = options("CastOptions", inDataType=schema.TensorType.BOOL, outDataType=INT64)
        keep64 = b.CAST(keep, dtype=np.int64, options=cast, name="keep64")
        to_float = options("CastOptions", inDataType=INT64, outDataType=schema.TensorType.FLOAT32)
        weight = b.CAST(keep64, dtype=np.float32, options=to_float, name="weight")
        masked = b.MUL(scale(b, x), weight, options=options("MulOptions"), name="masked")
        return [scale(b, masked), _normalised(b, ids)]

    return graph_model([((LENGTH,), np.int64), ((LENGTH,), np.float32)], body)


class GatherFlatIndices(OpRewrite):
    name = "gather_flat_indices"
    summary = "GATHER with [1, T] (any rank but 1) indices -> RESHAPE to [T], GATHER, RESHAPE back"
    fixes = ("GATHER",)
    reasons = ("only 1-D indices",)
    codes = (Reason.SHAPE,)
    required_inputs = (0, 1)

    def pattern(self, op: Op) -> bool:
        return super().pattern(op) and op.inputs[1].rank != 1

    def match(self, op: Op) -> Match:
        params, indices, out = op.inputs[0], op.inputs[1], op.outputs[0]
        if op.options is not None and getattr(op.options, "batchDims", 0):
            return Match.fail("batch_dims is set")
        if indices.is_dynamic or out.is_dynamic or params.is_dynamic:
            return Match.fail("the indices or rows have a dynamic shape (--input-shape fixes it)")
        if indices.type != INT32:
            return Match.fail(f"the indices are {indices.type_name}, not int32")
        axis = int(getattr(op.options, "axis", 0) or 0) if op.options is not None else 0
        return Match(op, axis=axis % max(params.rank, 1))

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        import numpy as np

        op = match.op
        params, indices, out = op.inputs[0], op.inputs[1], op.outputs[0]
        axis = match["axis"]
        count = int(np.prod(indices.shape, dtype=np.int64))
        flat = reshape(b, indices, (count,), name="flat_indices")
        rows = [*params.shape[:axis], count, *params.shape[axis + 1 :]]
        picked = b.GATHER(
            params,
            flat,
            shape=rows,
            dtype=out.type,
            options=op.options,
            quantization=copy.deepcopy(out.quantization),
        )
        replace(op, [reshape(b, picked, out.shape, name="rows")])

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def build(index_shape: tuple[int, ...], axis: int = 0) -> object:
            table = _table() if axis == 0 else np.ascontiguousarray(_table().T)
            out_shape = (*index_shape, WIDTH) if axis == 0 else (WIDTH, *index_shape)

            def body(b: OpBuilder, ids: Tensor) -> Tensor:
                picked = b.GATHER(
                    table, ids, shape=out_shape, options=options("GatherOptions", axis=axis)
                )
                return scale(b, picked)

            return graph_model([(index_shape, np.int32)], body)

        return (
            Example("ids_1xT", lambda: build((1, LENGTH))),
            Example("ids_2x3", lambda: build((2, 3))),
            Example("axis_1", lambda: build((1, LENGTH), axis=1)),
        )
