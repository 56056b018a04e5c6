"""What the delegate will actually take: partitions, boundary tensors and their bytes.

Given which ops a target supports, the graph is cut like TFLite's
``PartitionGraphIntoIndependentNodeSubsets``: greedily, in dependency order, into alternating
subsets of supported and unsupported ops. A delegate may then take only some supported subsets
(the classic GPU delegate takes the largest one by default: ``max_partitions=1``); the rest run
on CPU. Every non-constant tensor that crosses between CPU and GPU is a copy per inference.

Dependencies are data plus the runtime's order of ops with side effects
(``tensorflow/lite/graph_info.cc``, ``PartitionGraphIntoIndependentNodeSubsets``: when it
partitions greedily without explicit control edges it chains every node whose
``might_have_side_effect`` is set to the previous such node in execution order;
``Subgraph::OpMightHaveSideEffect`` in ``tensorflow/lite/core/subgraph.cc`` sets it for a node
with a RESOURCE input or output, and for IF, WHILE and CALL_ONCE). So a READ_VARIABLE that
follows an ASSIGN_VARIABLE waits for it, and the GPU ops between them cannot join one
partition: see :func:`side_effect_ops`.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import pairwise

from tflkit.compat.flops import op_flops
from tflkit.ir import Op, Subgraph, Tensor, op_traits, schema
from tflkit.ir.graph_edits import data_dependencies


@dataclass
class Transfer:
    """A tensor copied between CPU and GPU once per inference."""

    tensor: str
    shape: list[int]
    dtype: str
    #: None while the shape is dynamic: unknown until the input shapes are given.
    bytes: int | None
    direction: str  # "cpu->gpu" or "gpu->cpu"
    kind: str  # "internal", "graph input" or "graph output"


@dataclass
class Partition:
    index: int
    device: str  # "gpu" or "cpu"
    ops: list[int]
    #: Supported ops left on CPU because the delegate took only the largest partitions.
    not_taken: bool = False


@dataclass
class PartitionPlan:
    total_ops: int
    gpu_ops: int
    partitions: list[Partition]
    transfers: list[Transfer]
    flops_total: int
    flops_gpu: int
    max_partitions: int | None
    supported_partitions: int = 0
    dropped_ops: list[int] = field(default_factory=list)

    @property
    def gpu_partitions(self) -> int:
        return sum(1 for p in self.partitions if p.device == "gpu")

    @property
    def cpu_ops(self) -> int:
        return self.total_ops - self.gpu_ops

    @property
    def internal_transfer_bytes(self) -> int | None:
        """Bytes copied between partitions per inference (None: a shape is dynamic)."""
        return _total(t.bytes for t in self.transfers if t.kind == "internal")

    @property
    def gpu_flops_share(self) -> float:
        return self.flops_gpu / self.flops_total if self.flops_total else 0.0


_RESOURCE = schema.TensorType.RESOURCE


def has_side_effect(op: Op) -> bool:
    """The runtime's ``might_have_side_effect``: a RESOURCE tensor among the op's inputs or
    outputs (VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE, hash tables...), or control flow it
    lists (``op_traits.RUNTIME_ORDERED``)."""
    if op.type in op_traits.RUNTIME_ORDERED:
        return True
    return any(t is not None and t.type == _RESOURCE for t in (*op.inputs, *op.outputs))


def side_effect_ops(ops: list[Op]) -> list[Op]:
    """The ops with side effects, in execution order: the runtime chains each to the previous
    one, so the partitioner schedules them in this order."""
    return [op for op in ops if has_side_effect(op)]


def split_into_subsets(
    ops: list[Op], supported: Callable[[Op], bool]
) -> list[tuple[bool, list[Op]]]:
    """Alternating subsets of supported / unsupported ops, each as large as dependencies allow
    (data dependencies and the chain of ops with side effects)."""
    kinds = {id(op): bool(supported(op)) for op in ops}
    if len(set(kinds.values())) < 2:  # one kind (a model the delegate takes whole): one subset
        return [(kinds[id(ops[0])], list(ops))] if ops else []
    position = {id(op): i for i, op in enumerate(ops)}
    pending, readers = data_dependencies(ops)
    chain = side_effect_ops(ops)
    for before, after in pairwise(chain):
        pending[id(after)] += 1
        readers[id(before)].append(after)
    ready: dict[bool, list[tuple[int, Op]]] = {True: [], False: []}
    for op in ops:
        if pending[id(op)] == 0:
            ready[kinds[id(op)]].append((position[id(op)], op))
    for queue in ready.values():
        heapq.heapify(queue)
    subsets: list[tuple[bool, list[Op]]] = []
    kind = kinds[id(ops[0])] if ops else True
    while ready[True] or ready[False]:
        if not ready[kind]:
            kind = not kind
        taken: list[Op] = []
        while ready[kind]:
            _, op = heapq.heappop(ready[kind])
            taken.append(op)
            for reader in readers[id(op)]:
                pending[id(reader)] -= 1
                if pending[id(reader)] == 0:
                    heapq.heappush(ready[kinds[id(reader)]], (position[id(reader)], reader))
        subsets.append((kind, sorted(taken, key=lambda o: position[id(o)])))
        kind = not kind
    return subsets


def plan_partitions(
    subgraph: Subgraph,
    supported: Callable[[Op], bool],
    *,
    max_partitions: int | None = None,
) -> PartitionPlan:
    """Partition ``subgraph`` for a delegate that supports the ops ``supported`` accepts."""
    ops = list(subgraph.ops)
    subsets = split_into_subsets(ops, supported)
    gpu_subsets = [ops_ for on_gpu, ops_ in subsets if on_gpu]
    taken = {id(op) for group in gpu_subsets for op in group}
    dropped: list[int] = []
    if max_partitions is not None and len(gpu_subsets) > max_partitions:
        ranked = sorted(gpu_subsets, key=len, reverse=True)
        kept = ranked[:max_partitions]
        taken = {id(op) for group in kept for op in group}
        dropped = sorted(op.index for group in ranked[max_partitions:] for op in group)
        subsets = split_into_subsets(ops, lambda op: id(op) in taken)
    dropped_set = set(dropped)
    partitions = [
        Partition(
            i,
            "gpu" if on_gpu else "cpu",
            [op.index for op in group],
            not_taken=not on_gpu and any(op.index in dropped_set for op in group),
        )
        for i, (on_gpu, group) in enumerate(subsets)
    ]
    flops = {id(op): op_flops(op) for op in ops}
    return PartitionPlan(
        total_ops=len(ops),
        gpu_ops=len(taken),
        partitions=partitions,
        transfers=_transfers(subgraph, taken),
        flops_total=sum(flops.values()),
        flops_gpu=sum(f for key, f in flops.items() if key in taken),
        max_partitions=max_partitions,
        supported_partitions=len(gpu_subsets),
        dropped_ops=dropped,
    )


def _transfers(subgraph: Subgraph, on_gpu: set[int]) -> list[Transfer]:
    transfers: list[Transfer] = []
    graph_inputs = {id(t) for t in subgraph.inputs}
    graph_outputs = {id(t) for t in subgraph.outputs}
    for tensor in subgraph.tensors:
        if tensor.is_constant:
            continue
        producer = tensor.producer
        made_on_gpu = producer is not None and id(producer) in on_gpu
        readers_on_gpu = {id(op) in on_gpu for op, _ in tensor.uses}
        if made_on_gpu:
            if False in readers_on_gpu:
                transfers.append(_transfer(tensor, "gpu->cpu", "internal"))
            elif id(tensor) in graph_outputs:
                transfers.append(_transfer(tensor, "gpu->cpu", "graph output"))
        elif True in readers_on_gpu:
            kind = "graph input" if id(tensor) in graph_inputs else "internal"
            transfers.append(_transfer(tensor, "cpu->gpu", kind))
    return transfers


def _total(sizes: Iterable[int | None]) -> int | None:
    total = 0
    for size in sizes:
        if size is None:
            return None
        total += size
    return total


def _transfer(tensor: Tensor, direction: str, kind: str) -> Transfer:
    return Transfer(
        tensor=tensor.name,
        shape=list(tensor.display_shape),
        dtype=tensor.type_name,
        bytes=tensor.nbytes,
        direction=direction,
        kind=kind,
    )
