"""Invariant checks of an IR model; each violation is one sentence naming what is wrong."""

from __future__ import annotations

import math

from tflkit.errors import InvalidModelError
from tflkit.ir import schema
from tflkit.ir.graph import Model, Subgraph, Tensor


def check_model(model: Model) -> None:
    """Raise ``InvalidModelError`` listing the first violations, if any."""
    problems = verify_model(model)
    if problems:
        shown = "; ".join(problems[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise InvalidModelError(f"invalid model: {shown}{more}")


def verify_model(model: Model) -> list[str]:
    """Every violated invariant of ``model``; empty when it is sound."""
    problems: list[str] = []
    for position, subgraph in enumerate(model.subgraphs):
        if subgraph.model is not model:
            problems.append(f"subgraph {position} does not point back to its model")
        problems += _verify_subgraph(subgraph, position, len(model.subgraphs))
    for signature in model.signatures:
        if not any(sg is signature.subgraph for sg in model.subgraphs):
            problems.append(f"signature {signature.key!r} names a subgraph not in the model")
            continue
        members = {id(t) for t in signature.subgraph.tensors}
        for kind, mapping in (("input", signature.inputs), ("output", signature.outputs)):
            for name, tensor in mapping.items():
                if id(tensor) not in members:
                    problems.append(
                        f"signature {signature.key!r} {kind} {name!r} is not a tensor of its "
                        "subgraph"
                    )
    return problems


def _verify_subgraph(subgraph: Subgraph, position: int, subgraph_count: int) -> list[str]:
    where = f"subgraph {position}"
    problems: list[str] = []
    members = {id(t) for t in subgraph.tensors}
    for tensor in subgraph.tensors:
        if tensor.subgraph is not subgraph:
            problems.append(f"{where}: tensor {tensor.name!r} does not point back to it")
        problems += _verify_buffer(tensor, where)

    def member(tensor: Tensor | None, role: str) -> bool:
        if tensor is not None and id(tensor) not in members:
            problems.append(f"{where}: {role} {tensor.name!r} is not one of its tensors")
            return False
        return True

    for tensor in (*subgraph.inputs, *subgraph.outputs):
        member(tensor, "graph input/output")
    available = {id(t) for t in subgraph.inputs}
    available.update(id(t) for t in subgraph.tensors if t.is_constant or t.is_variable)
    # A 0-element tensor holds nothing to produce (TFLite stores the scalar shape [] that way).
    available.update(id(t) for t in subgraph.tensors if t.producer is None and 0 in t.shape)
    produced: dict[int, int] = {}
    for index, op in enumerate(subgraph.ops):
        label = f"{where} op {index} ({op.type})"
        if op.subgraph is not subgraph:
            problems.append(f"{label}: does not point back to its subgraph")
        for slot, tensor in enumerate(op.inputs):
            if not member(tensor, f"op {index} input"):
                continue
            if tensor is not None and id(tensor) not in available and id(tensor) not in produced:
                later = tensor.producer is not None and tensor.producer.subgraph is subgraph
                reason = (
                    "is produced later (ops are not in topological order)"
                    if later
                    else ("is never produced")
                )
                problems.append(f"{label}: input {slot} {tensor.name!r} {reason}")
            if tensor is not None and (op, slot) not in tensor._uses:
                problems.append(f"{label}: input {slot} {tensor.name!r} does not list this use")
        for tensor in op.outputs:
            if not member(tensor, f"op {index} output"):
                continue
            if id(tensor) in produced:
                problems.append(
                    f"{label}: output {tensor.name!r} is also produced by op {produced[id(tensor)]}"
                )
            if tensor.is_graph_input:
                problems.append(f"{label}: output {tensor.name!r} is a graph input")
            if tensor.producer is not op:
                problems.append(f"{label}: output {tensor.name!r} names another producer")
            produced[id(tensor)] = index
        for attr, target in op.referenced_subgraphs.items():
            if not 0 <= target < subgraph_count or target == position:
                problems.append(f"{label}: {attr}={target} is not another subgraph of the model")
    for tensor in subgraph.outputs:
        if id(tensor) not in available and id(tensor) not in produced:
            problems.append(f"{where}: graph output {tensor.name!r} is never produced")
    return problems


def _verify_buffer(tensor: Tensor, where: str) -> list[str]:
    nbytes = tensor.buffer.nbytes if tensor.buffer is not None else 0
    bits = schema.TYPE_BITS.get(tensor.type)
    if not nbytes or schema.struct_code(tensor.type) is None or tensor.sparsity is not None:
        return []
    expected = math.prod(tensor.shape) * (bits or 0) // 8
    if nbytes != expected:
        return [
            f"{where}: constant {tensor.name!r} holds {nbytes} bytes, its shape "
            f"{list(tensor.shape)} of {tensor.type_name} needs {expected}"
        ]
    return []
