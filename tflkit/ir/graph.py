"""Editable TFLite graph: Tensor, Op, Subgraph, SignatureDef, Model.

Objects reference each other, never flatbuffer indices: an op holds its input and output
``Tensor`` objects, a tensor knows its producer and its uses, a tensor holds its ``Buffer``.
``serde`` is the only module that turns these back into indices. What a tensor holds (type,
shape, quantization, data) is ``tensor_value``'s; what an op is (code, options) is
``op_options``'.

Creating an ``Op`` connects it to its tensors (it becomes their producer and a use of its
inputs); ``Subgraph.remove_op`` disconnects it. A subgraph's ops and tensors are read-only
sequences changed through its methods; its inputs and outputs, and each signature's, are
tracked containers (``ir.interface``), so a tensor answers ``is_graph_output`` or
``is_observable`` at once. Constant data stays numpy views of the loaded file, so loading a
large model does not copy its weights.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tflkit.errors import InvalidModelError
from tflkit.ir import schema
from tflkit.ir.interface import ReadOnlyList, TensorList, TensorMap
from tflkit.ir.op_options import OpCode, OpOptions
from tflkit.ir.tensor_value import Buffer, TensorValue

if TYPE_CHECKING:
    import numpy as np


class Tensor(TensorValue):
    """A tensor of one subgraph: its type, shape, optional constant buffer and its users."""

    def __init__(
        self,
        name: str,
        shape: Sequence[int],
        type: int,
        *,
        buffer: Buffer | None = None,
        quantization: Any = None,
        sparsity: Any = None,
        shape_signature: Sequence[int] | None = None,
        is_variable: bool = False,
        has_rank: bool = False,
        variant_tensors: list[Any] | None = None,
        external_buffer: int = 0,
    ) -> None:
        self.name = name
        self.shape: tuple[int, ...] = tuple(map(int, shape))
        self.type = int(type)
        self.buffer = buffer
        #: Unparsed (buffer, position) of a loaded tensor's quantization table.
        self._lazy_quantization: tuple[Any, int] | None = None
        self._quantization = quantization
        #: ``schema.fb.SparsityParametersT`` or None.
        self.sparsity = sparsity
        self.shape_signature: tuple[int, ...] | None = (
            None if shape_signature is None else tuple(map(int, shape_signature))
        )
        self.is_variable = is_variable
        self.has_rank = has_rank
        self.variant_tensors = variant_tensors
        self.external_buffer = external_buffer
        self.subgraph: Subgraph | None = None
        self._producer: Op | None = None
        self._uses: dict[tuple[Op, int], None] = {}

    def detached_copy(self, name: str, buffer: Buffer | None) -> Tensor:
        """A tensor like this one (type, shape, quantization and sparsity deep-copied), named
        ``name`` and holding ``buffer``, in no subgraph yet: for copying ops between graphs."""
        return Tensor(
            name,
            self.shape,
            self.type,
            buffer=buffer,
            quantization=copy.deepcopy(self.quantization),
            sparsity=copy.deepcopy(self.sparsity),
            shape_signature=self.shape_signature,
            is_variable=self.is_variable,
            has_rank=self.has_rank,
            variant_tensors=copy.deepcopy(self.variant_tensors),
        )

    # --- connections ----------------------------------------------------------------------
    @property
    def producer(self) -> Op | None:
        return self._producer

    @property
    def uses(self) -> list[tuple[Op, int]]:
        """(op, input index) for every op input that reads this tensor."""
        return list(self._uses)

    @property
    def consumers(self) -> list[Op]:
        """Ops that read this tensor, each once, in no guaranteed order."""
        return list(dict.fromkeys(op for op, _ in self._uses))

    # --- the graph's interface (tracked by the subgraph and its signatures) ------------------
    @property
    def is_graph_input(self) -> bool:
        return self.subgraph is not None and self.subgraph.inputs.holds(self)

    @property
    def is_graph_output(self) -> bool:
        return self.subgraph is not None and self.subgraph.outputs.holds(self)

    @property
    def is_signature_input(self) -> bool:
        return any(s.inputs.holds(self) for s in self._signatures())

    @property
    def is_signature_output(self) -> bool:
        return any(s.outputs.holds(self) for s in self._signatures())

    @property
    def is_observable(self) -> bool:
        """Whatever runs the model reads this tensor: a graph output or a signature output
        (rewrites must keep its name and value; folding it would change the interface)."""
        return self.is_graph_output or self.is_signature_output

    @property
    def is_interface(self) -> bool:
        """Part of the graph's interface: observable, or fed from outside (a graph or
        signature input); dead-code removal keeps it."""
        return self.is_observable or self.is_graph_input or self.is_signature_input

    def _signatures(self) -> list[Any]:
        sg = self.subgraph
        model = sg.model if sg is not None else None
        return [] if model is None else [s for s in model.signatures if s.subgraph is sg]

    @property
    def index(self) -> int:
        """Position in ``subgraph.tensors`` (the flatbuffer tensor index once saved)."""
        if self.subgraph is None:
            raise InvalidModelError(f"tensor {self.name!r} is not in a subgraph")
        return self.subgraph._tensor_position(self)

    def __repr__(self) -> str:
        shape = "x".join(str(d) for d in self.display_shape) or "scalar"
        const = " const" if self.is_constant else ""
        return f"Tensor({self.name!r}, {self.type_name}[{shape}]{const})"


class Op(OpOptions):
    """One operator: an ``OpCode``, input and output tensors, and its options."""

    def __init__(
        self,
        opcode: OpCode,
        inputs: Sequence[Tensor | None],
        outputs: Sequence[Tensor],
        *,
        options: Any = None,
        options_type: int | None = None,
        options2: Any = None,
        options2_type: int = 0,
        custom_options: bytes | None = None,
        custom_options_format: int = 0,
        mutating_variable_inputs: Sequence[bool] | None = None,
        intermediates: Sequence[Tensor] = (),
        debug_metadata_index: int = -1,
    ) -> None:
        self.opcode = opcode
        self._options = options
        self._options_type = options_type
        self._options2 = options2
        self.options2_type = options2_type
        #: Unparsed (buffer, options position, options2 position) of a loaded op.
        self._lazy_options: tuple[Any, int | None, int | None] | None = None
        #: ``option_fields`` of the unparsed options, once read.
        self._lazy_fields: Mapping[str, Any] | None = None
        self.custom_options = custom_options
        self.custom_options_format = custom_options_format
        self.mutating_variable_inputs = (
            None if mutating_variable_inputs is None else list(mutating_variable_inputs)
        )
        self.intermediates: list[Tensor] = list(intermediates)
        self.debug_metadata_index = debug_metadata_index
        self.subgraph: Subgraph | None = None
        self._inputs: list[Tensor | None] = []
        self._outputs: list[Tensor] = []
        for tensor in inputs:
            self._inputs.append(tensor)
            if tensor is not None:
                tensor._uses[(self, len(self._inputs) - 1)] = None
        for tensor in outputs:
            self._attach_output(tensor)

    @property
    def inputs(self) -> tuple[Tensor | None, ...]:
        return tuple(self._inputs)

    @property
    def outputs(self) -> tuple[Tensor, ...]:
        return tuple(self._outputs)

    @property
    def index(self) -> int:
        """Position in ``subgraph.ops`` (execution order)."""
        if self.subgraph is None:
            raise InvalidModelError(f"op {self.type} is not in a subgraph")
        return self.subgraph._op_position(self)

    def set_input(self, index: int, tensor: Tensor | None) -> None:
        """Replace input ``index``; keeps both tensors' use lists right."""
        old = self._inputs[index]
        if old is not None:
            old._uses.pop((self, index), None)
        self._inputs[index] = tensor
        if tensor is not None:
            tensor._uses[(self, index)] = None

    def _attach_output(self, tensor: Tensor) -> None:
        if tensor._producer is not None and tensor._producer is not self:
            raise InvalidModelError(
                f"tensor {tensor.name!r} is already produced by {tensor._producer.type}"
            )
        tensor._producer = self
        self._outputs.append(tensor)

    def _detach_inputs(self) -> None:
        for i, tensor in enumerate(self._inputs):
            if tensor is not None:
                tensor._uses.pop((self, i), None)

    def _detach(self) -> None:
        self._detach_inputs()
        for tensor in self._outputs:
            if tensor._producer is self:
                tensor._producer = None

    def __repr__(self) -> str:
        ins = ", ".join("-" if t is None else t.name for t in self._inputs)
        outs = ", ".join(t.name for t in self._outputs)
        return f"Op({self.type} v{self.version}: [{ins}] -> [{outs}])"


class Subgraph:
    """Tensors, ops in execution order, graph inputs and outputs of one subgraph."""

    def __init__(self, name: str = "", model: Model | None = None) -> None:
        self.name = name
        self.model = model
        self._tensors: list[Tensor] = []
        self._ops: list[Op] = []
        self._tensor_view = ReadOnlyList(self._tensors)
        self._op_view = ReadOnlyList(self._ops)
        self._inputs = TensorList()
        self._outputs = TensorList()
        self.debug_metadata_index = -1
        self._positions: dict[int, int] | None = None
        self._op_positions: dict[int, int] | None = None

    @property
    def tensors(self) -> ReadOnlyList[Tensor]:
        """Tensors in file order (changed by ``add_tensor`` and ``remove_unused``)."""
        return self._tensor_view

    @property
    def ops(self) -> ReadOnlyList[Op]:
        """Ops in execution order (changed by ``add_op``, ``insert_op``, ``remove_op`` and
        ``topological_sort``)."""
        return self._op_view

    @property
    def inputs(self) -> TensorList:
        """The graph inputs, in order (tracked: ``tensor.is_graph_input``)."""
        return self._inputs

    @inputs.setter
    def inputs(self, tensors: Iterable[Tensor]) -> None:
        self._inputs = TensorList(tensors)

    @property
    def outputs(self) -> TensorList:
        """The graph outputs, in order (tracked: ``tensor.is_graph_output``)."""
        return self._outputs

    @outputs.setter
    def outputs(self, tensors: Iterable[Tensor]) -> None:
        self._outputs = TensorList(tensors)

    def _set_loaded(
        self, tensors: list[Tensor], ops: list[Op], inputs: list[Tensor], outputs: list[Tensor]
    ) -> None:
        """Take a loaded subgraph's tensors and ops (already linked to it) whole."""
        self._tensors[:] = tensors
        self._ops[:] = ops
        self._inputs = TensorList(inputs)
        self._outputs = TensorList(outputs)
        self._changed()

    @property
    def index(self) -> int:
        if self.model is None:
            raise InvalidModelError(f"subgraph {self.name!r} is not in a model")
        return next(i for i, sg in enumerate(self.model.subgraphs) if sg is self)

    # --- positions ------------------------------------------------------------------------
    def _tensor_position(self, tensor: Tensor) -> int:
        if self._positions is None or len(self._positions) != len(self._tensors):
            self._positions = {id(t): i for i, t in enumerate(self._tensors)}
        position = self._positions.get(id(tensor))
        if position is None or self._tensors[position] is not tensor:
            self._positions = {id(t): i for i, t in enumerate(self._tensors)}
            position = self._positions.get(id(tensor))
        if position is None:
            raise InvalidModelError(f"tensor {tensor.name!r} is not in subgraph {self.name!r}")
        return position

    def _op_position(self, op: Op) -> int:
        if self._op_positions is None or len(self._op_positions) != len(self._ops):
            self._op_positions = {id(o): i for i, o in enumerate(self._ops)}
        position = self._op_positions.get(id(op))
        if position is None or self._ops[position] is not op:
            self._op_positions = {id(o): i for i, o in enumerate(self._ops)}
            position = self._op_positions.get(id(op))
        if position is None:
            raise InvalidModelError(f"{op!r} is not in subgraph {self.name!r}")
        return position

    def _changed(self) -> None:
        self._positions = None
        self._op_positions = None

    # --- tensors --------------------------------------------------------------------------
    def add_tensor(self, tensor: Tensor) -> Tensor:
        """Append a tensor to this subgraph and return it."""
        if tensor.subgraph is not None and tensor.subgraph is not self:
            raise InvalidModelError(f"tensor {tensor.name!r} belongs to another subgraph")
        if tensor.subgraph is None:
            tensor.subgraph = self
            self._tensors.append(tensor)
            self._changed()
        return tensor

    def new_tensor(
        self, name: str, shape: Sequence[int], dtype: np.dtype | type | str | int, **kwargs: Any
    ) -> Tensor:
        """Create and add a tensor; ``dtype`` is a numpy dtype or a schema ``TensorType``."""
        tensor_type = dtype if isinstance(dtype, int) else schema.tensor_type(dtype)
        return self.add_tensor(Tensor(self.unique_name(name), shape, tensor_type, **kwargs))

    def add_constant(
        self, array: np.ndarray, name: str = "const", *, quantization: Any = None
    ) -> Tensor:
        """Add a constant tensor holding ``array`` (its buffer is shared with equal constants)."""
        import numpy as np

        array = np.asarray(array)
        if self.model is None:
            raise InvalidModelError("add_constant needs a subgraph that belongs to a model")
        buffer = self.model.intern_buffer(array)
        return self.new_tensor(
            name, array.shape, array.dtype, buffer=buffer, quantization=quantization
        )

    def unique_name(self, base: str) -> str:
        """``base``, or ``base_1``, ``base_2``... if a tensor of this subgraph has that name."""
        names = {t.name for t in self._tensors}
        if base not in names:
            return base
        i = 1
        while f"{base}_{i}" in names:
            i += 1
        return f"{base}_{i}"

    def tensor(self, name: str) -> Tensor:
        """The tensor called ``name``; KeyError if none."""
        for tensor in self._tensors:
            if tensor.name == name:
                return tensor
        raise KeyError(f"no tensor named {name!r} in subgraph {self.name!r}")

    # --- ops ------------------------------------------------------------------------------
    def add_op(self, op: Op) -> Op:
        """Append ``op`` at the end of the execution order."""
        return self.insert_op(len(self._ops), op)

    def insert_op(self, position: int, op: Op) -> Op:
        """Insert ``op`` at ``position`` in execution order; adds its new tensors too."""
        if op.subgraph is not None:
            raise InvalidModelError(f"{op!r} is already in a subgraph")
        for tensor in (*op.inputs, *op.outputs, *op.intermediates):
            if tensor is not None:
                self.add_tensor(tensor)
        for slot, tensor in enumerate(op._inputs):
            if tensor is not None:
                tensor._uses[(op, slot)] = None
        for tensor in op._outputs:
            if tensor._producer is not None and tensor._producer is not op:
                raise InvalidModelError(f"tensor {tensor.name!r} already has a producer")
            tensor._producer = op
        op.subgraph = self
        self._ops.insert(position, op)
        self._changed()
        return op

    def remove_op(self, op: Op) -> None:
        """Remove ``op`` and disconnect it from its tensors (the tensors stay)."""
        position = op.index
        del self._ops[position]
        op._detach()
        op.subgraph = None
        self._changed()

    def replace_all_uses_with(
        self, old: Tensor, new: Tensor, *, graph_outputs: bool = True
    ) -> None:
        """Make every reader of ``old`` read ``new``; graph outputs and signatures too."""
        for op, index in list(old._uses):
            op.set_input(index, new)
        if not graph_outputs:
            return
        self._outputs.replace(old, new)
        for signature in old._signatures():
            for key, tensor in list(signature.outputs.items()):
                if tensor is old:
                    signature.outputs[key] = new

    def reorder(self, ops: Sequence[Op]) -> None:
        """Put this subgraph's ops in the order ``ops`` gives (the same ops, each once); the
        order is not checked against the data flow (``graph_edits.topological_sort`` repairs
        it)."""
        if len(ops) != len(self._ops) or {id(op) for op in ops} != {id(op) for op in self._ops}:
            raise InvalidModelError("reorder takes the subgraph's own ops, each once")
        self._ops[:] = ops
        self._changed()

    def remove_tensors(self, tensors: Iterable[Tensor]) -> None:
        """Take ``tensors`` out of this subgraph (no op may still use them)."""
        gone = {id(t) for t in tensors}
        for tensor in self._tensors:
            if id(tensor) in gone:
                tensor.subgraph = None
        self._tensors[:] = [t for t in self._tensors if id(t) not in gone]
        self._changed()

    def __repr__(self) -> str:
        return f"Subgraph({self.name!r}, {len(self._ops)} ops, {len(self._tensors)} tensors)"


class SignatureDef:
    """A named entry point: input and output names mapped to tensors of one subgraph (tracked:
    ``tensor.is_signature_input`` / ``is_signature_output``)."""

    def __init__(
        self,
        key: str,
        subgraph: Subgraph,
        inputs: Mapping[str, Tensor] | None = None,
        outputs: Mapping[str, Tensor] | None = None,
    ) -> None:
        self.key = key
        self.subgraph = subgraph
        self._inputs = TensorMap(inputs)
        self._outputs = TensorMap(outputs)

    @property
    def inputs(self) -> TensorMap:
        return self._inputs

    @inputs.setter
    def inputs(self, tensors: Mapping[str, Tensor]) -> None:
        self._inputs = TensorMap(tensors)

    @property
    def outputs(self) -> TensorMap:
        return self._outputs

    @outputs.setter
    def outputs(self, tensors: Mapping[str, Tensor]) -> None:
        self._outputs = TensorMap(tensors)

    def __repr__(self) -> str:
        return f"SignatureDef({self.key!r}, {list(self._inputs)} -> {list(self._outputs)})"


@dataclass
class Metadata:
    """A named metadata entry (e.g. ``min_runtime_version``) and its bytes."""

    name: str
    buffer: Buffer


class Model:
    """A whole TFLite model: subgraphs, buffers, signatures and metadata."""

    def __init__(self, description: str = "tflkit") -> None:
        self.version = schema.SCHEMA_VERSION
        self.description: str | None = description
        self.subgraphs: list[Subgraph] = []
        #: Buffers in file order (the empty sentinel buffer 0 is implicit).
        self.buffers: list[Buffer] = []
        self.metadata: list[Metadata] = []
        self.signatures: list[SignatureDef] = []
        #: Deprecated ``metadata_buffer`` field, kept for lossless round trips.
        self.metadata_buffer: list[Buffer] | None = None
        #: Raw ``ExternalBufferGroupT`` / ``ExternalBufferT`` lists, carried through untouched.
        self.external_buffer_groups: list[Any] | None = None
        self.external_buffers: list[Any] | None = None
        #: Opcode table order of the loaded file, reused on save for stable output.
        self.opcode_order: list[OpCode] = []
        #: The loaded file kept constant data after the flatbuffer (``Buffer.offset``/``size``,
        #: LiteRT's layout for models over 2 GB); ``ir.save`` keeps that layout by default.
        self.appended_buffers = False
        self._buffer_digests: dict[tuple[int, bytes], Buffer] | None = None

    @property
    def main(self) -> Subgraph:
        """The primary subgraph (index 0), the one the GPU delegate works on."""
        return self.subgraphs[0]

    def add_subgraph(self, name: str = "") -> Subgraph:
        subgraph = Subgraph(name, self)
        self.subgraphs.append(subgraph)
        return subgraph

    def signature(self, key: str) -> SignatureDef:
        for signature in self.signatures:
            if signature.key == key:
                return signature
        raise KeyError(f"no signature {key!r}; have {[s.key for s in self.signatures]}")

    def runs_as_graph(self, subgraph: Subgraph) -> bool:
        """Whether ``subgraph`` runs as a graph of its own: the main one or a signature's (not
        a control-flow body nor a composite's decomposition only)."""
        return subgraph is self.main or any(s.subgraph is subgraph for s in self.signatures)

    def metadata_entry(self, name: str) -> Metadata | None:
        return next((m for m in self.metadata if m.name == name), None)

    def set_metadata(self, name: str, data: bytes) -> None:
        """Add or replace the metadata entry ``name``."""
        entry = self.metadata_entry(name)
        buffer = Buffer(data)
        self.buffers.append(buffer)
        if entry is None:
            self.metadata.append(Metadata(name, buffer))
        else:
            entry.buffer = buffer

    # --- buffers --------------------------------------------------------------------------
    def intern_buffer(self, array: np.ndarray) -> Buffer:
        """A buffer holding ``array``'s bytes, shared with an existing equal buffer if any."""
        import numpy as np

        raw = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        digests = self._buffer_index()
        key = (raw.nbytes, _digest(raw.data))
        buffer = digests.get(key)
        if buffer is not None and buffer.data is not None and np.array_equal(buffer.data, raw):
            return buffer
        buffer = Buffer(raw)
        self.buffers.append(buffer)
        digests[key] = buffer
        return buffer

    def forget_buffer_digests(self) -> None:
        """Drop the digests ``intern_buffer`` keeps (after buffers were removed)."""
        self._buffer_digests = None

    def _buffer_index(self) -> dict[tuple[int, bytes], Buffer]:
        if self._buffer_digests is None:
            self._buffer_digests = {}
            for buffer in self.buffers:
                if buffer.nbytes:
                    digest = _digest(buffer.data.data)
                    self._buffer_digests.setdefault((buffer.nbytes, digest), buffer)
        return self._buffer_digests

    # --- queries --------------------------------------------------------------------------
    def iter_ops(self) -> Iterable[Op]:
        for subgraph in self.subgraphs:
            yield from subgraph.ops

    def __repr__(self) -> str:
        ops = sum(len(sg.ops) for sg in self.subgraphs)
        return f"Model({len(self.subgraphs)} subgraphs, {ops} ops, {len(self.buffers)} buffers)"


def _digest(data: Any) -> bytes:
    """The 16-byte blake2b of a buffer's bytes, by which equal buffers are shared (``hashlib``
    imported here: loading and checking a model intern nothing, and OpenSSL takes 3 ms)."""
    import hashlib

    return hashlib.blake2b(data, digest_size=16).digest()
