"""Whole-graph edits: execution order repaired, dead ops, tensors and buffers removed."""

from __future__ import annotations

import heapq

from tflkit.errors import InvalidModelError
from tflkit.ir import op_traits
from tflkit.ir.graph import Model, Op, Subgraph


def data_dependencies(ops: list[Op]) -> tuple[dict[int, int], dict[int, list[Op]]]:
    """Per op (by ``id``): how many of ``ops`` produce its inputs, and which of ``ops`` read each
    op's outputs (a tensor read twice by one op counts once)."""
    pending = {id(op): 0 for op in ops}
    readers: dict[int, list[Op]] = {id(op): [] for op in ops}
    for op in ops:
        for tensor in dict.fromkeys(t for t in op.inputs if t is not None):
            producer = tensor.producer
            if producer is not None and id(producer) in pending:
                pending[id(op)] += 1
                readers[id(producer)].append(op)
    return pending, readers


def topological_sort(subgraph: Subgraph) -> None:
    """Reorder ``subgraph``'s ops so every op comes after the producers of its inputs
    (stable: ops already in order keep it)."""
    ops = list(subgraph.ops)
    order = {id(op): i for i, op in enumerate(ops)}
    pending, readers = data_dependencies(ops)
    ready = [(order[id(op)], op) for op in ops if pending[id(op)] == 0]
    heapq.heapify(ready)
    sorted_ops: list[Op] = []
    while ready:
        _, op = heapq.heappop(ready)
        sorted_ops.append(op)
        for reader in readers[id(op)]:
            pending[id(reader)] -= 1
            if pending[id(reader)] == 0:
                heapq.heappush(ready, (order[id(reader)], reader))
    if len(sorted_ops) != len(ops):
        raise InvalidModelError(f"subgraph {subgraph.name!r} has a cycle")
    subgraph.reorder(sorted_ops)


def _kept(op: Op) -> bool:
    """Ops that stay though nothing reads them: side effects (``op_traits.SIDE_EFFECTS``),
    custom ops (unknown), ops without outputs."""
    return op.opcode.is_custom or op.type in op_traits.SIDE_EFFECTS or not op.outputs


def remove_unused_ops(subgraph: Subgraph) -> tuple[int, int]:
    """Remove ops whose results nobody reads, then tensors nothing references.

    Ops with side effects and the graph's interface (``Tensor.is_interface``) stay. Returns
    (ops removed, tensors removed).
    """
    removed_ops = 0
    changed = True
    while changed:
        changed = False
        for op in reversed(list(subgraph.ops)):
            if _kept(op) or any(t.uses or t.is_interface for t in op.outputs):
                continue
            subgraph.remove_op(op)
            removed_ops += 1
            changed = True
    referenced = set()
    for op in subgraph.ops:
        for tensor in (*op.inputs, *op.outputs, *op.intermediates):
            if tensor is not None:
                referenced.add(id(tensor))
    dead = [t for t in subgraph.tensors if id(t) not in referenced and not t.is_interface]
    subgraph.remove_tensors(dead)
    return removed_ops, len(dead)


def remove_unused(model: Model) -> dict[str, int]:
    """Dead ops and tensors in every subgraph, then buffers nothing references."""
    ops = tensors = 0
    for subgraph in model.subgraphs:
        removed_ops, removed_tensors = remove_unused_ops(subgraph)
        ops += removed_ops
        tensors += removed_tensors
    used = {id(t.buffer) for sg in model.subgraphs for t in sg.tensors if t.buffer is not None}
    used.update(id(m.buffer) for m in model.metadata)
    used.update(id(b) for b in model.metadata_buffer or ())
    before = len(model.buffers)
    model.buffers = [b for b in model.buffers if id(b) in used]
    model.forget_buffer_digests()
    return {"ops": ops, "tensors": tensors, "buffers": before - len(model.buffers)}
