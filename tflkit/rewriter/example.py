"""Build small example models with the IR (no TensorFlow) for rules and their tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tflkit import ir
from tflkit.ir.builder import OpBuilder

fb = ir.schema.fb


def options(kind: str, **fields: Any) -> Any:
    """An object-API options instance: ``options("SoftmaxOptions", beta=2.0)``."""
    value = getattr(fb, f"{kind}T")()
    for key, item in fields.items():
        setattr(value, key, item)
    return value


def i32(*values: int) -> np.ndarray:
    return np.array(values, np.int32)


def graph_model(
    inputs: Sequence[tuple[Sequence[int], Any]],
    body: Callable[..., Any],
    *,
    description: str = "tflkit rewrite example",
) -> ir.Model:
    """A one-signature model: ``body(builder, *input_tensors)`` returns the output tensor(s).

    Every example adds a MUL by 1 in front of each float input and behind each output, so the
    rewritten op sits between accelerated ops, as in a real network.
    """
    model = ir.Model(description=description)
    graph = model.add_subgraph("main")
    xs = [graph.new_tensor(f"x{i}", shape, dtype) for i, (shape, dtype) in enumerate(inputs)]
    b = OpBuilder(graph, prefix="ex")
    outs = body(b, *xs)
    outs = list(outs) if isinstance(outs, list | tuple) else [outs]
    graph.inputs, graph.outputs = xs, outs
    model.signatures.append(
        ir.SignatureDef(
            "serving_default",
            graph,
            {x.name: x for x in xs},
            {f"out{i}": t for i, t in enumerate(outs)},
        )
    )
    return model


def scale(b: OpBuilder, x: ir.Tensor, factor: float = 1.0) -> ir.Tensor:
    """x * factor (a float MUL: gives the example an accelerated neighbour)."""
    return b.MUL(x, np.array(factor, np.float32), options=options("MulOptions"), name="scale")
