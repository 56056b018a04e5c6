"""Fold ops whose result is known before the model runs (the GPU rejects FILL, SHAPE, RANGE...).

The value is computed by running the op alone on the CPU interpreter (the same kernel the
model would use), so the folded constant is bit-identical to what the op produced.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING

from tflkit import ir
from tflkit.compat.reasons import Reason
from tflkit.compat.targets.common import SHAPE_DEFINING_INPUTS
from tflkit.errors import ModelLoadError
from tflkit.ir import op_traits
from tflkit.ir.graph import Op
from tflkit.rewriter.example import graph_model, i32, options, scale
from tflkit.rewriter.rule import Example, Match, OpRewrite, replace

if TYPE_CHECKING:
    import numpy as np

    from tflkit.ir.builder import OpBuilder


def evaluate(op: Op) -> list[np.ndarray]:
    """Run ``op`` alone on the CPU; its non-constant inputs must have static shapes (fed 0)."""
    return evaluate_chain([op], list(op.outputs))


def evaluate_chain(ops: list[Op], wanted: list[ir.Tensor]) -> list[np.ndarray]:
    """Run ``ops`` cut out together on the CPU and return the ``wanted`` tensors' values.

    Their non-constant inputs must have static shapes and must not matter to the result: they
    are fed zeros (e.g. the input of a SHAPE op).
    """
    from tflkit.delegates.litert_cpu import run_once

    model = ir.extract_model(ops)
    graph = model.main
    unread = {t.name for t in wanted} - {t.name for t in graph.outputs}
    extra = [t for t in graph.tensors if t.name in unread]  # e.g. a SPLIT output nothing reads
    if extra:
        graph.outputs = [*graph.outputs, *extra]
        model.signatures[0].outputs.update({t.name: t for t in extra})
    position = {t.name: i for i, t in enumerate(graph.outputs)}
    missing = [t.name for t in wanted if t.name not in position]
    if missing:
        raise ValueError(f"{missing} are not outputs of the cut-out ops")
    try:
        run = run_once(ir.dumps(model), kernels="builtin", fill="zeros")
    except (RuntimeError, ValueError) as exc:  # the model's own op fails: an input problem
        what = " ".join(str(exc).split())[:300]
        raise ModelLoadError(f"the CPU interpreter cannot run {ops[0].type}: {what}") from None
    # by position: the interpreter renames some outputs (DENSIFY's becomes "Densify_output")
    return [run.ordered[position[t.name]].copy() for t in wanted]


#: Ops whose result depends only on their inputs' values (and, for SHAPE, on a static shape).
_PURE_SHAPE_OPS = frozenset(
    {
        "SHAPE",
        "STRIDED_SLICE",
        "SLICE",
        "CONCATENATION",
        "CAST",
        "PACK",
        "GATHER",
        "RESHAPE",
        "SQUEEZE",
        "EXPAND_DIMS",
        "ADD",
        "SUB",
        "MUL",
        "DIV",
        "FLOOR_DIV",
        "MAXIMUM",
        "MINIMUM",
        "REDUCE_PROD",
        "SUM",
        "FILL",
        "RANGE",
        "TRANSPOSE",
        "SPLIT",
        "SPLIT_V",
        "UNPACK",
        "FLOOR_MOD",
        "NEG",
    }
)


def is_empty_constant(tensor: ir.Tensor) -> bool:
    """A 0-element tensor nothing produces: TFLite stores the scalar shape ``[]`` that way, with
    no buffer data, and it is no less constant than one with data."""
    return tensor.producer is None and not tensor.is_graph_input and 0 in tensor.shape


def _chain_back(
    tensors: Iterable[ir.Tensor | None],
    limit: int,
    *,
    known: Callable[[ir.Tensor], bool],
    through: Callable[[ir.Tensor, Op], bool],
    shape_only: Collection[str],
) -> list[Op] | None:
    """The ops (in graph order) that compute ``tensors`` from tensors whose value is ``known``,
    walking back through producers ``through`` accepts (an op in ``shape_only`` reads only its
    input's shape, so a static one ends the branch); None when some tensor is dynamic or
    depends on anything else, or the chain is longer than ``limit``."""
    chain: dict[int, Op] = {}
    pending = [t for t in tensors if t is not None]
    while pending:
        tensor = pending.pop()
        if known(tensor):
            continue
        producer = tensor.producer
        if producer is None or tensor.is_dynamic or not through(tensor, producer):
            return None
        if id(producer) in chain:
            continue
        chain[id(producer)] = producer
        if len(chain) > limit:
            return None
        if producer.type in shape_only:
            source = producer.inputs[0] if producer.inputs else None
            if source is None or source.is_dynamic:
                return None
            continue
        pending.extend(t for t in producer.inputs if t is not None)
    return sorted(chain.values(), key=lambda found: found.index)


def constant_value(tensor: ir.Tensor, limit: int = 32) -> np.ndarray | None:
    """``tensor``'s value when it follows from constants and static shapes alone, else None.

    Walks back through at most ``limit`` pure ops (SHAPE of a static-shape tensor ends a
    branch) and evaluates them together on the CPU interpreter.
    """
    if tensor.is_constant:
        return tensor.data
    ops = _chain_back(
        [tensor],
        limit,
        known=lambda t: t.is_constant or is_empty_constant(t),
        through=lambda _t, producer: producer.type in _PURE_SHAPE_OPS,
        shape_only=("SHAPE",),
    )
    return None if ops is None else evaluate_chain(ops, [tensor])[0]


class _Fold(OpRewrite):
    """Replace the op by constants; needs every input constant (``_needs_values``). Each fixes
    an op the GPU does not implement at all."""

    reasons = ("Operation is not supported",)
    codes = (Reason.UNSUPPORTED_OP,)
    required_inputs = ()
    num_outputs = None
    _needs_values: tuple[int, ...] | None = None  # input positions that must be constant

    def match(self, op: Op) -> Match:
        positions = range(len(op.inputs)) if self._needs_values is None else self._needs_values
        for i in positions:
            tensor = op.inputs[i]
            if tensor is not None and not tensor.is_constant:
                return Match.fail(f"input {i} ({tensor.name}) is not a constant")
        if any(t.is_dynamic for t in (*op.inputs, *op.outputs) if t is not None):
            return Match.fail("a shape is dynamic (fix it with --input-shape first)")
        if any(t.is_observable for t in op.outputs):
            return Match.fail(
                "its output is a graph output (a constant output would change the interface)"
            )
        return Match(op)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        op = match.op
        values = evaluate(op)
        replace(op, [b.const(v, "folded", like=t) for v, t in zip(values, op.outputs, strict=True)])


def _fold_example(body, no_int8: str | None = None) -> tuple[Example, ...]:
    import numpy as np

    build = lambda: graph_model([((2, 3), np.float32)], body)  # noqa: E731
    return (Example("constant_inputs", build, no_int8=no_int8),)


class FoldFill(_Fold):
    name = "fold_fill"
    summary = "FILL with constant dims and value -> a constant"
    fixes = ("FILL",)
    required_inputs = (0, 1)

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        return _fold_example(
            lambda b, x: b.ADD(
                scale(b, x),
                b.FILL(i32(2, 3), np.array(1.5, np.float32), shape=(2, 3)),
                options=options("AddOptions"),
            )
        )


class FoldRange(_Fold):
    name = "fold_range"
    summary = "RANGE with constant start/limit/delta -> a constant"
    fixes = ("RANGE",)
    required_inputs = (0, 1, 2)

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        f = np.float32
        return _fold_example(
            lambda b, x: b.ADD(
                scale(b, x),
                b.RANGE(np.array(0.1, f), np.array(0.7, f), np.array(0.2, f), shape=(3,)),
                options=options("AddOptions"),
            ),
            no_int8="RANGE has no int8 kernel",
        )


class _FoldFromShape(_Fold):
    """An op whose output depends on its input's shape, not its values: folded once that shape
    is static, whatever computes the input."""

    required_inputs = (0,)
    _needs_values = ()


class FoldShape(_FoldFromShape):
    name = "fold_shape"
    summary = "SHAPE of a static-shape tensor -> a constant"
    fixes = ("SHAPE",)

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def body(b: OpBuilder, x, y):
            dims = b.SHAPE(
                scale(b, y), shape=(2,), dtype=np.int32, options=options("ShapeOptions", outType=2)
            )
            return scale(b, b.RESHAPE(scale(b, x), dims, shape=(3, 2)))

        inputs = [((2, 3), np.float32), ((3, 2), np.float32)]
        return (Example("shape_into_reshape", lambda: graph_model(inputs, body)),)


class FoldZerosLike(_FoldFromShape):
    name = "fold_zeros_like"
    summary = "ZEROS_LIKE of a static-shape tensor -> a constant"
    fixes = ("ZEROS_LIKE",)

    def examples(self) -> tuple[Example, ...]:
        return _fold_example(
            lambda b, x: b.ADD(
                scale(b, x), b.ZEROS_LIKE(scale(b, x, 2.0)), options=options("AddOptions")
            ),
            no_int8="ZEROS_LIKE has no int8 kernel",
        )


def sparse_csr(dense: np.ndarray) -> tuple[np.ndarray, object]:
    """A 2-D array in TFLite's sparse layout (rows dense, columns CSR): (values, sparsity)."""
    import numpy as np

    fb = ir.schema.fb
    rows, segments, indices = dense.shape[0], [0], []
    for row in dense:
        nonzero = np.flatnonzero(row)
        indices.extend(int(i) for i in nonzero)
        segments.append(len(indices))
    values = dense[dense != 0].reshape(-1)

    def vector(items: list[int]) -> object:
        v = fb.Int32VectorT()
        v.values = list(items)
        return v

    outer, inner = fb.DimensionMetadataT(), fb.DimensionMetadataT()
    outer.format, outer.denseSize = fb.DimensionType.DENSE, rows
    inner.format = fb.DimensionType.SPARSE_CSR
    inner.arraySegmentsType = inner.arrayIndicesType = fb.SparseIndexVector.Int32Vector
    inner.arraySegments, inner.arrayIndices = vector(segments), vector(indices)
    sparsity = fb.SparsityParametersT()
    sparsity.traversalOrder, sparsity.dimMetadata = [0, 1], [outer, inner]
    return values, sparsity


class FoldDensify(_Fold):
    name = "fold_densify"
    summary = "DENSIFY of constant sparse weights -> the dense constant (fp16 DEQUANTIZE after it)"
    fixes = ("DENSIFY",)
    reasons = ("Operation is not supported", "DENSIFY")
    required_inputs = (0,)

    def match(self, op: Op) -> Match:
        if op.inputs[0].sparsity is None:
            return Match.fail("its input is not a sparse constant")
        return super().match(op)

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def build() -> ir.Model:
            rng = np.random.default_rng(7)
            dense = rng.standard_normal((6, 8)).astype(np.float16)
            dense[rng.random(dense.shape) < 0.7] = 0  # pruned: 70 % zeros
            values, sparsity = sparse_csr(dense)

            def body(b: OpBuilder, x):
                weights = b.tensor(dense.shape, np.float16, "sparse_weights")
                weights.buffer = b.subgraph.model.intern_buffer(values)
                weights.sparsity = sparsity
                dense_fp16 = b.DENSIFY(weights, name="densify")
                w = b.DEQUANTIZE(dense_fp16, dtype=np.float32, name="weights")
                fc = b.FULLY_CONNECTED(
                    scale(b, x), w, None, shape=(1, 6), options=options("FullyConnectedOptions")
                )
                return scale(b, fc)

            return graph_model([((1, 8), np.float32)], body)

        return (Example("fp16_weights_fc", build, no_int8="the weights stay fp16"),)


#: Inputs that must be constants for the GPU: the shape-defining ones, and SLICE's begin and
#: size (its output shape too, though TFLite resolves a computed SLICE size while running).
_SHAPE_INPUTS = {**SHAPE_DEFINING_INPUTS, "SLICE": (1, 2)}


class FoldShapeInputs(OpRewrite):
    name = "fold_shape_inputs"
    summary = (
        "shape-defining inputs (slice bounds, RANGE limits, pads, axes...) computed from static "
        "shapes and constants -> those constants"
    )
    fixes = tuple(t for t in _SHAPE_INPUTS if t != "RESHAPE")  # reshape_static_shape
    codes = (Reason.DYNAMIC_SHAPE, Reason.NON_CONST_INPUT)
    required_inputs = ()
    num_outputs = None

    def pattern(self, op: Op) -> bool:
        return super().pattern(op) and bool(self._computed(op))

    def _computed(self, op: Op) -> list[int]:
        """Positions of shape-defining inputs that are computed integer tensors."""
        found = []
        for i in _SHAPE_INPUTS.get(op.type, ()):
            t = op.inputs[i] if i < len(op.inputs) else None
            computed = t is not None and not t.is_constant and t.producer is not None
            if computed and t.type_name in ("INT32", "INT64") and not t.is_dynamic:
                found.append(i)
        return found

    def match(self, op: Op) -> Match:
        for i in self._computed(op):
            if constant_value(op.inputs[i]) is None:
                return Match.fail(
                    f"input {i} ({op.inputs[i].name}) depends on data, not only on shapes"
                )
        if any(t.is_dynamic for t in op.outputs):
            return Match.fail(
                "its output shape is dynamic (fix the inputs with --input-shape first)"
            )
        return Match(op)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        import numpy as np

        op = match.op
        inputs = list(op.inputs)
        for i in self._computed(op):
            value = np.asarray(constant_value(op.inputs[i]))
            inputs[i] = b.const(value.astype(op.inputs[i].dtype), f"input{i}", like=op.inputs[i])
        outputs = [(t.shape, t.type) for t in op.outputs]
        new = b.op(
            op.type,
            inputs,
            options=op.options,
            outputs=outputs,
            version=op.version,
            name=op.type.lower(),
        )
        new = list(new) if isinstance(new, tuple) else [new]
        for old, fresh in zip(op.outputs, new, strict=True):
            fresh.quantization = copy.deepcopy(old.quantization)
        replace(op, new)

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def build() -> ir.Model:
            # STFT-style framing: the slice end is SHAPE arithmetic (as TensorFlow writes it),
            # also read by the app (a graph output: fold_constants leaves that SUB alone)
            def body(b: OpBuilder, x):
                y = scale(b, x)
                dims = b.SHAPE(
                    y, shape=(2,), dtype=np.int32, options=options("ShapeOptions", outType=2)
                )
                end = b.SUB(dims, i32(0, 4), options=options("SubOptions"), name="end")
                frame = b.STRIDED_SLICE(
                    y, i32(0, 0), end, i32(1, 1), shape=(1, 12),
                    options=options("StridedSliceOptions"), name="frame",
                )  # fmt: skip
                return scale(b, frame), end

            return graph_model([((1, 16), np.float32)], body)

        return (Example("slice_end_from_shape", build, residual=("SUB",)),)


# --- any op of constants ------------------------------------------------------------------------

#: Largest folded output (bytes, all outputs together) a fold may add to the model. Shape
#: arithmetic writes a few int32s (a [4] shape is 16 bytes); 4 KiB (1024 int32 or float32
#: values) covers shape vectors, slice bounds, gather indices and small tables with room to
#: spare, and bounds what one fold adds to the file by about what one op's flatbuffer entry and
#: a small constant cost anyway. Larger outputs fold only when the constants they free (inputs
#: read by nothing else) are at least as large: the model does not grow.
FOLD_MAX_BYTES = 4096

#: Never folded: ops whose outputs are not a function of their inputs alone
#: (``op_traits.IMPURE``: random ops, resource variables and hash tables, control flow,
#: stateful sequence ops), and DEQUANTIZE (fp16/int8 weights the delegate reads as they are:
#: folding would only grow the file) and DENSIFY (``fold_densify``).
NEVER_FOLD = op_traits.IMPURE | frozenset({"DEQUANTIZE", "DENSIFY"})
#: Ops whose result depends only on the input's (static) shape, not its values.
SHAPE_ONLY = frozenset({"SHAPE", "RANK"})
#: Types a folded constant can hold.
_FOLDABLE_TYPES = frozenset(
    {"FLOAT32", "FLOAT16", "FLOAT64", "INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32",
     "INT64", "UINT64", "BOOL"}
)  # fmt: skip


def _known_value(tensor: ir.Tensor) -> bool:
    return (tensor.is_constant and tensor.sparsity is None) or is_empty_constant(tensor)


def chain_to_constants(op: Op, limit: int = 32) -> list[Op] | None:
    """The ops (in graph order) that compute ``op``'s non-constant inputs from constants and
    static shapes alone: [] when every input is a constant, None when some input depends on
    data (or on an op never folded, or the chain is longer than ``limit``).

    The rewrite folds producers first, so it sees []; ``check`` on a model not yet rewritten
    (its advice) sees the chain a rewrite would fold, and evaluates it with ``op``.
    """
    return _chain_back(
        op.inputs,
        limit,
        known=_known_value,
        through=lambda tensor, producer: (
            not (tensor.is_variable or producer.type in NEVER_FOLD or producer.opcode.is_custom)
        ),
        shape_only=SHAPE_ONLY,
    )


class FoldConstants(OpRewrite):
    """Any op whose inputs are all constants runs once, on the CPU, while rewriting.

    Runs on ops the target accepts too (``ungated``): an op of constants costs a kernel launch
    per inference wherever it runs, and keeps what reads it from seeing a constant (a SLICE
    size, a RESHAPE shape, weights). Folding repeats to the fixed point: each fold makes the
    ops reading the result ops of constants in turn.
    """

    name = "fold_constants"
    summary = (
        "any op whose inputs are all constants (SHAPE/RANK: of a static-shape tensor) -> its "
        f"outputs as constants (up to {FOLD_MAX_BYTES // 1024} KiB, or no larger than the "
        "constants it frees)"
    )
    #: What it usually folds (shape arithmetic); ``pattern`` accepts any op of constants.
    fixes = (
        "SHAPE", "RANK", "STRIDED_SLICE", "SLICE", "GATHER", "REDUCE_PROD", "SUM", "PACK",
        "UNPACK", "CONCATENATION", "CAST", "ADD", "SUB", "MUL", "DIV", "FLOOR_DIV",
        "FLOOR_MOD", "MAXIMUM", "MINIMUM", "RESHAPE", "EXPAND_DIMS", "SQUEEZE", "TRANSPOSE",
    )  # fmt: skip
    any_op_type = True
    required_inputs = ()
    num_outputs = None
    #: The pass manager lets it fire on ops the target accepts too (see the class docstring).
    ungated = True

    def pattern(self, op: Op) -> bool:
        if op.type in NEVER_FOLD or op.opcode.is_custom or not op.outputs:
            return False
        present = [t for t in op.inputs if t is not None]
        if not present:
            return False  # nothing to compute from (e.g. VAR_HANDLE)
        uses = [use for t in op.outputs for use in t.uses]
        if not uses and not any(t.is_observable for t in op.outputs):
            return False  # dead: removed as unused
        if uses and all(reader.type == "RESHAPE" and i == 1 for reader, i in uses):
            return False  # a RESHAPE shape: reshape_static_shape folds it and fixes the output
        if op.type in SHAPE_ONLY:
            return op.inputs[0] is not None and not op.inputs[0].is_dynamic
        return chain_to_constants(op) is not None

    def match(self, op: Op) -> Match:
        graph = op.subgraph
        model = graph.model if graph is not None else None
        if model is None or not model.runs_as_graph(graph):
            return Match.fail(
                "it is inside a control-flow body or a decomposition (not folded there)"
            )
        if any(t is not None and t.is_variable for t in op.inputs):
            return Match.fail("it reads a variable tensor")
        if any(t.is_dynamic for t in (*op.inputs, *op.outputs) if t is not None):
            return Match.fail("a shape is dynamic (fix it with --input-shape first)")
        if any(t.is_observable for t in op.outputs):
            return Match.fail(
                "its output is a graph output (a constant output would change the interface)"
            )
        if any(t.type_name not in _FOLDABLE_TYPES for t in op.outputs):
            return Match.fail("an output type cannot be stored as a constant")
        size = sum(t.nbytes or 0 for t in op.outputs)
        freed = self._freed_bytes(op)
        if size > FOLD_MAX_BYTES and size > freed:
            return Match.fail(
                f"its output ({size} bytes) is larger than {FOLD_MAX_BYTES} bytes and than the "
                f"constants it frees ({freed} bytes): folding would grow the model"
            )
        values = self._evaluate(op)
        return Match.fail(values) if isinstance(values, str) else Match(op, values=values)

    @staticmethod
    def _freed_bytes(op: Op) -> int:
        """Bytes of the constant inputs nothing but ``op`` reads (dropped once it folds)."""
        alone = {
            id(t): t
            for t in op.inputs
            if t is not None and t.is_constant and all(reader is op for reader, _ in t.uses)
        }
        return sum(t.buffer.nbytes for t in alone.values() if not t.is_observable)

    @staticmethod
    def _evaluate(op: Op) -> list[np.ndarray] | str:
        """The op's output values, or why they cannot be computed."""
        chain = chain_to_constants(op) or []
        try:
            found: list[np.ndarray] | str = evaluate_chain([*chain, op], list(op.outputs))
        except (ModelLoadError, ValueError, RuntimeError) as exc:
            found = f"the CPU interpreter cannot run it alone ({' '.join(str(exc).split())[:160]})"
        if not isinstance(found, str):
            for value, tensor in zip(found, op.outputs, strict=True):
                if tuple(value.shape) != tuple(tensor.shape):
                    found = (
                        f"it computes shape {list(value.shape)} for {tensor.name}, which the "
                        f"model declares as {list(tensor.shape)}"
                    )
                    break
        return found

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        op, values = match.op, match["values"]
        consts = [
            b.const(v.astype(t.dtype, copy=False), "folded", like=t)
            for v, t in zip(values, op.outputs, strict=True)
        ]
        replace(op, consts)

    def examples(self) -> tuple[Example, ...]:
        import numpy as np

        def body(b: OpBuilder, x):
            # a SLICE whose size is computed: REDUCE_PROD of constant frame counts
            counts = np.array([[2, 1], [1, 2]], np.int32)
            size = b.REDUCE_PROD(
                counts, i32(0), shape=(2,), dtype=np.int32,
                options=options("ReducerOptions"), name="size",
            )  # fmt: skip
            return scale(b, b.SLICE(scale(b, x), i32(0, 1), size, shape=(2, 2)))

        build = lambda: graph_model([((2, 3), np.float32)], body)  # noqa: E731
        return (Example("reduce_prod_of_constants", build),)
