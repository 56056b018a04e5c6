"""Fix dynamic dimensions to concrete shapes (the GPU delegate needs static shapes).

The user gives each dynamic input's shape; the CPU interpreter propagates them through the
graph (its shape inference is the runtime's own), and every tensor of the main subgraph gets
the static shape it computed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tflkit import ir
from tflkit.errors import UsageError
from tflkit.ir.graph import Model, Tensor


def parse_input_shape(spec: str) -> tuple[str, list[int]]:
    """``"x=1,224,224,3"`` -> ("x", [1, 224, 224, 3])."""
    name, sep, dims = spec.partition("=")
    try:
        shape = [int(d) for d in dims.split(",")] if dims.strip() else []
    except ValueError:
        shape = None
    if not sep or not name or shape is None or any(d < 0 for d in shape):
        raise UsageError(f"--input-shape wants NAME=D1,D2,... with D >= 0, got {spec!r}")
    return name, shape


def _input_by_name(model: Model, name: str) -> Tensor:
    for signature in model.signatures:
        if signature.subgraph is model.main and name in signature.inputs:
            return signature.inputs[name]
    for tensor in model.main.inputs:
        if tensor.name == name:
            return tensor
    names = [t.name for t in model.main.inputs]
    raise UsageError(f"--input-shape names {name!r}, which is not a model input; inputs: {names}")


def dynamic_inputs(model: Model) -> list[Tensor]:
    """Inputs of the main subgraph whose shape signature has a -1."""
    return [t for t in model.main.inputs if t.is_dynamic]


def fix_input_shapes(model: Model, shapes: Mapping[str, Sequence[int]]) -> list[str]:
    """Give the named inputs static shapes and propagate them; returns the tensors changed."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    targets = {id(_input_by_name(model, name)): list(dims) for name, dims in shapes.items()}
    graph = model.main
    for tensor in graph.inputs:
        dims = targets.get(id(tensor))
        if dims is not None:
            expected = tensor.shape_signature or tensor.shape
            if len(dims) != len(expected) or any(
                e >= 0 and e != d for e, d in zip(expected, dims, strict=True)
            ):
                raise UsageError(
                    f"--input-shape {tensor.name}={','.join(map(str, dims))} does not fit the "
                    f"input's shape {tensor.display_shape}"
                )
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
