"""Fold ops whose result is known before the model runs (the GPU rejects FILL, SHAPE, RANGE...).

The value is computed by running the op alone on the CPU interpreter (the same kernel the
model would use), so the folded constant is bit-identical to what the op produced.
"""

from __future__ import annotations

import copy

import numpy as np

from tflkit import ir
from tflkit.compat.targets.common import SHAPE_DEFINING_INPUTS
from tflkit.errors import ModelLoadError
from tflkit.ir.builder import OpBuilder
from tflkit.ir.graph import Op
from tflkit.rewriter.example import graph_model, i32, options, scale
from tflkit.rewriter.rule import Example, Rule, replace


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
    position = {t.name: i for i, t in enumerate(model.main.outputs)}
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


def constant_value(tensor: ir.Tensor, limit: int = 32) -> np.ndarray | None:
    """``tensor``'s value when it follows from constants and static shapes alone, else None.

    Walks back through at most ``limit`` pure ops (SHAPE of a static-shape tensor ends a
    branch) and evaluates them together on the CPU interpreter.
    """
    if tensor.is_constant:
        return tensor.data
    chain: dict[int, Op] = {}
    pending = [tensor]
    while pending:
        current = pending.pop()
        if current.is_constant or is_empty_constant(current):
            continue
        producer = current.producer
        if producer is None or producer.type not in _PURE_SHAPE_OPS or current.is_dynamic:
            return None
        if id(producer) in chain:
            continue
        chain[id(producer)] = producer
        if len(chain) > limit:
            return None
        if producer.type == "SHAPE":
            if producer.inputs[0] is None or producer.inputs[0].is_dynamic:
                return None
            continue
        pending.extend(t for t in producer.inputs if t is not None)
    ops = sorted(chain.values(), key=lambda op: op.index)
    return evaluate_chain(ops, [tensor])[0]


class _Fold(Rule):
    """Replace the op by constants; needs every input constant (``_needs_values``)."""

    reasons = ("Operation is not supported",)
    required_inputs = ()
    num_outputs = None
    _needs_values: tuple[int, ...] | None = None  # input positions that must be constant

    def check(self, op: Op) -> str | None:
        positions = range(len(op.inputs)) if self._needs_values is None else self._needs_values
        for i in positions:
            tensor = op.inputs[i]
            if tensor is not None and not tensor.is_constant:
                return f"input {i} ({tensor.name}) is not a constant"
        if any(t.is_dynamic for t in (*op.inputs, *op.outputs) if t is not None):
            return "a shape is dynamic (fix it with --input-shape first)"
        if any(t.is_graph_output for t in op.outputs):
            return "its output is a graph output (a constant output would change the interface)"
        return None

    def rewrite(self, op: Op, b: OpBuilder) -> None:
        values = evaluate(op)
        replace(op, [b.const(v, "folded", like=t) for v, t in zip(values, op.outputs, strict=True)])


def _fold_example(body, no_int8: str | None = None) -> tuple[Example, ...]:
    build = lambda: graph_model([((2, 3), np.float32)], body)  # noqa: E731
    return (Example("constant_inputs", build, no_int8=no_int8),)


class FoldFill(_Fold):
    name = "fold_fill"
    summary = "FILL with constant dims and value -> a constant"
    fixes = ("FILL",)
    codes = ("UNSUPPORTED_OP",)
    required_inputs = (0, 1)

    def examples(self) -> tuple[Example, ...]:
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
    codes = ("UNSUPPORTED_OP",)
    required_inputs = (0, 1, 2)

    def examples(self) -> tuple[Example, ...]:
        f = np.float32
        return _fold_example(
            lambda b, x: b.ADD(
                scale(b, x),
                b.RANGE(np.array(0.1, f), np.array(0.7, f), np.array(0.2, f), shape=(3,)),
                options=options("AddOptions"),
            ),
            no_int8="RANGE has no int8 kernel",
        )


class FoldShape(_Fold):
    name = "fold_shape"
    summary = "SHAPE of a static-shape tensor -> a constant"
    fixes = ("SHAPE",)
    codes = ("UNSUPPORTED_OP",)
    required_inputs = (0,)
    _needs_values = ()

    def examples(self) -> tuple[Example, ...]:
        def body(b: OpBuilder, x, y):
            dims = b.SHAPE(
                scale(b, y), shape=(2,), dtype=np.int32, options=options("ShapeOptions", outType=2)
            )
            return scale(b, b.RESHAPE(scale(b, x), dims, shape=(3, 2)))

        inputs = [((2, 3), np.float32), ((3, 2), np.float32)]
        return (Example("shape_into_reshape", lambda: graph_model(inputs, body)),)


class FoldZerosLike(_Fold):
    name = "fold_zeros_like"
    summary = "ZEROS_LIKE of a static-shape tensor -> a constant"
    fixes = ("ZEROS_LIKE",)
    codes = ("UNSUPPORTED_OP",)
    required_inputs = (0,)
    _needs_values = ()

    def examples(self) -> tuple[Example, ...]:
        return _fold_example(
            lambda b, x: b.ADD(
                scale(b, x), b.ZEROS_LIKE(scale(b, x, 2.0)), options=options("AddOptions")
            ),
            no_int8="ZEROS_LIKE has no int8 kernel",
        )


def sparse_csr(dense: np.ndarray) -> tuple[np.ndarray, object]:
    """A 2-D array in TFLite's sparse layout (rows dense, columns CSR): (values, sparsity)."""
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
    codes = ("UNSUPPORTED_OP",)
    reasons = ("Operation is not supported", "DENSIFY")
    required_inputs = (0,)

    def check(self, op: Op) -> str | None:
        if op.inputs[0].sparsity is None:
            return "its input is not a sparse constant"
        return super().check(op)

    def examples(self) -> tuple[Example, ...]:
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


class FoldShapeInputs(Rule):
    name = "fold_shape_inputs"
    summary = (
        "shape-defining inputs (slice bounds, RANGE limits, pads, axes...) computed from static "
        "shapes and constants -> those constants"
    )
    fixes = tuple(t for t in SHAPE_DEFINING_INPUTS if t != "RESHAPE")  # reshape_static_shape
    codes = ("DYNAMIC_SHAPE", "NON_CONST_INPUT")
    required_inputs = ()
    num_outputs = None

    def pattern(self, op: Op) -> bool:
        return super().pattern(op) and bool(self._computed(op))

    def _computed(self, op: Op) -> list[int]:
        """Positions of shape-defining inputs that are computed integer tensors."""
        found = []
        for i in SHAPE_DEFINING_INPUTS.get(op.type, ()):
            t = op.inputs[i] if i < len(op.inputs) else None
            computed = t is not None and not t.is_constant and t.producer is not None
            if computed and t.type_name in ("INT32", "INT64") and not t.is_dynamic:
                found.append(i)
        return found

    def check(self, op: Op) -> str | None:
        for i in self._computed(op):
            if constant_value(op.inputs[i]) is None:
                return f"input {i} ({op.inputs[i].name}) depends on data, not only on shapes"
        if any(t.is_dynamic for t in op.outputs):
            return "its output shape is dynamic (fix the inputs with --input-shape first)"
        return None

    def rewrite(self, op: Op, b: OpBuilder) -> None:
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
        def build() -> ir.Model:
            # STFT-style framing: the slice end is SHAPE arithmetic (as TensorFlow writes it)
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
                return scale(b, frame)

            return graph_model([((1, 16), np.float32)], body)

        return (Example("slice_end_from_shape", build),)
