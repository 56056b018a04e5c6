"""Cut one op, or a chunk of ops, out of a model into a standalone model.

The new model's inputs are the chunk's non-constant inputs, its outputs the chunk's results
that are read outside the chunk (or are graph outputs). Constants share the original buffers'
data; subgraphs named by control-flow ops in the chunk are copied along.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from tflkit.errors import UsageError
from tflkit.ir.graph import Model, Op, SignatureDef, Subgraph, Tensor

_SIGNATURE_KEY = "serving_default"


def extract_model(ops: Sequence[Op], *, signature_key: str = _SIGNATURE_KEY) -> Model:
    """A standalone model that runs exactly ``ops`` (all from one subgraph)."""
    if not ops:
        raise UsageError("extract needs at least one op")
    source = ops[0].subgraph
    if source is None or source.model is None:
        raise UsageError("extract needs ops that belong to a model")
    if any(op.subgraph is not source for op in ops):
        raise UsageError("extract takes ops of a single subgraph")
    chunk = sorted(dict.fromkeys(ops), key=lambda op: op.index)
    in_chunk = {id(op) for op in chunk}
    produced = {id(t) for op in chunk for t in op.outputs}

    model = Model(description="tflkit extract")
    model.version = source.model.version
    copier = _Copier(source.model, model)
    target = model.add_subgraph(source.name or "main")

    inputs: dict[int, Tensor] = {}
    for op in chunk:
        for tensor in op.inputs:
            if tensor is None or id(tensor) in produced or tensor.is_constant:
                continue
            if tensor.is_variable:
                continue
            inputs.setdefault(id(tensor), tensor)
    outputs: dict[int, Tensor] = {}
    for op in chunk:
        for tensor in op.outputs:
            read_outside = any(id(reader) not in in_chunk for reader, _ in tensor.uses)
            if read_outside or tensor.is_interface:
                outputs.setdefault(id(tensor), tensor)
    if not outputs:
        outputs = {id(t): t for t in chunk[-1].outputs}

    tensor_map: dict[int, Tensor] = {}
    for op in chunk:
        target.add_op(copier.copy_op(op, tensor_map, target))
    target.inputs = [copier.copy_tensor(t, tensor_map, target) for t in inputs.values()]
    target.outputs = [tensor_map[id(t)] for t in outputs.values()]
    model.signatures.append(
        SignatureDef(
            signature_key,
            target,
            {t.name: t for t in target.inputs},
            {t.name: t for t in target.outputs},
        )
    )
    return model


class _Copier:
    """Copies tensors, ops and whole subgraphs from one model into another."""

    def __init__(self, source: Model, target: Model) -> None:
        self.source = source
        self.target = target
        self.buffers: dict[int, object] = {}
        self.subgraphs: dict[int, int] = {}

    def copy_tensor(self, tensor: Tensor, tensor_map: dict[int, Tensor], into: Subgraph) -> Tensor:
        existing = tensor_map.get(id(tensor))
        if existing is not None:
            return existing
        buffer = None
        if tensor.buffer is not None:
            buffer = self.buffers.get(id(tensor.buffer))
            if buffer is None:
                buffer = copy.copy(tensor.buffer)
                self.buffers[id(tensor.buffer)] = buffer
                self.target.buffers.append(buffer)
        clone = tensor.detached_copy(tensor.name, buffer)
        tensor_map[id(tensor)] = clone
        return into.add_tensor(clone)

    def copy_op(self, op: Op, tensor_map: dict[int, Tensor], into: Subgraph) -> Op:
        def mapped(tensor: Tensor | None) -> Tensor | None:
            return None if tensor is None else self.copy_tensor(tensor, tensor_map, into)

        clone = Op(
            op.opcode,
            [mapped(t) for t in op.inputs],
            [mapped(t) for t in op.outputs],
            options=copy.deepcopy(op.options),
            options_type=op.options_type,
            options2=copy.deepcopy(op.options2),
            options2_type=op.options2_type,
            custom_options=op.custom_options,
            custom_options_format=op.custom_options_format,
            mutating_variable_inputs=op.mutating_variable_inputs,
            intermediates=[mapped(t) for t in op.intermediates],
        )
        for attr, index in op.referenced_subgraphs.items():
            new_index = self.copy_subgraph(self.source.subgraphs[index])
            for options in (clone.options, clone.options2):
                if options is not None and hasattr(options, attr):
                    setattr(options, attr, new_index)
        return clone

    def copy_subgraph(self, subgraph: Subgraph) -> int:
        """Index in the target model of a full copy of ``subgraph`` (copied once)."""
        known = self.subgraphs.get(id(subgraph))
        if known is not None:
            return known
        clone = self.target.add_subgraph(subgraph.name)
        index = len(self.target.subgraphs) - 1
        self.subgraphs[id(subgraph)] = index
        tensor_map: dict[int, Tensor] = {}
        for tensor in subgraph.tensors:
            self.copy_tensor(tensor, tensor_map, clone)
        for op in subgraph.ops:
            clone.add_op(self.copy_op(op, tensor_map, clone))
        clone.inputs = [tensor_map[id(t)] for t in subgraph.inputs]
        clone.outputs = [tensor_map[id(t)] for t in subgraph.outputs]
        return index
