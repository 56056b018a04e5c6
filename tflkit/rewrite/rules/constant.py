"""Fold ops whose result is known before the model runs (the GPU rejects FILL, SHAPE, RANGE...).

The value is computed by running the op alone on the CPU interpreter (the same kernel the
model would use), so the folded constant is bit-identical to what the op produced.
"""

from __future__ import annotations

import numpy as np

from tflkit import ir
from tflkit.ir.builder import OpBuilder
from tflkit.ir.graph import Op
from tflkit.rewrite.example import graph_model, i32, options, scale
from tflkit.rewrite.rule import Example, Rule, replace


def evaluate(op: Op) -> list[np.ndarray]:
    """Run ``op`` alone on the CPU; its non-constant inputs must have static shapes (fed 0)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    model = op.subgraph.model.extract([op])
    interpreter = Interpreter(
        model_content=ir.dumps(model),
        experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    interpreter.allocate_tensors()
    for detail in interpreter.get_input_details():
        interpreter.set_tensor(detail["index"], np.zeros(detail["shape"], detail["dtype"]))
    interpreter.invoke()
    by_name = {d["name"]: d["index"] for d in interpreter.get_output_details()}
    return [interpreter.get_tensor(by_name[t.name]).copy() for t in model.main.outputs]


class _Fold(Rule):
    """Replace the op by constants; needs every input constant (``_needs_values``)."""

    reasons = ("Operation is not supported",)
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
        replace(op, [b.const(v, "folded") for v in values])


def _fold_example(body) -> tuple[Example, ...]:
    return (Example("constant_inputs", lambda: graph_model([((2, 3), np.float32)], body)),)


class FoldFill(_Fold):
    name = "fold_fill"
    summary = "FILL with constant dims and value -> a constant"
    fixes = ("FILL",)
    codes = ("UNSUPPORTED_OP",)

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

    def examples(self) -> tuple[Example, ...]:
        f = np.float32
        return _fold_example(
            lambda b, x: b.ADD(
                scale(b, x),
                b.RANGE(np.array(0.1, f), np.array(0.7, f), np.array(0.2, f), shape=(3,)),
                options=options("AddOptions"),
            )
        )


class FoldShape(_Fold):
    name = "fold_shape"
    summary = "SHAPE of a static-shape tensor -> a constant"
    fixes = ("SHAPE",)
    codes = ("UNSUPPORTED_OP",)
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
    _needs_values = ()

    def examples(self) -> tuple[Example, ...]:
        return _fold_example(
            lambda b, x: b.ADD(
                scale(b, x), b.ZEROS_LIKE(scale(b, x, 2.0)), options=options("AddOptions")
            )
        )
