"""Fix dynamic dimensions to concrete shapes (the GPU delegate needs static shapes).

The user gives each dynamic input's shape (``--input-shape``, parsed and matched to inputs by
:mod:`tflkit.input_shapes`); the CPU interpreter propagates them through the
graph (its shape inference is the runtime's own), and every tensor of the main subgraph gets
the static shape it computed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tflkit import ir
from tflkit.input_shapes import resolve_input_shapes
from tflkit.ir.graph import Model, Tensor


def dynamic_inputs(model: Model) -> list[Tensor]:
    """Inputs of the main subgraph whose shape signature has a -1."""
    return [t for t in model.main.inputs if t.is_dynamic]


def fix_input_shapes(model: Model, shapes: Mapping[str, Sequence[int]]) -> list[str]:
    """Give the named inputs static shapes and propagate them; returns the tensors changed."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    targets = {id(r.tensor): list(r.shape) for r in resolve_input_shapes(model, shapes)}
    graph = model.main
    interpreter = Interpreter(
        model_content=ir.dumps(model),
        experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    for position, tensor in enumerate(graph.inputs):
        dims = targets.get(id(tensor))
        if dims is not None:
            interpreter.resize_tensor_input(
                interpreter.get_input_details()[position]["index"], dims, strict=True
            )
    interpreter.allocate_tensors()
    computed = {d["index"]: [int(x) for x in d["shape"]] for d in interpreter.get_tensor_details()}
    changed = []
    for index, tensor in enumerate(graph.tensors):
        dims = computed.get(index)
        if dims is None or tensor.is_constant:
            continue
        if tensor.is_dynamic or list(tensor.shape) != dims:
            tensor.shape = tuple(dims)
            tensor.shape_signature = None
            changed.append(tensor.name)
    return changed
