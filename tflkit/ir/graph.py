"""Editable TFLite graph: Model, Subgraph, Tensor, Op, Buffer.

Objects reference each other, never flatbuffer indices: an op holds its input and output
``Tensor`` objects, a tensor knows its producer and its uses, a tensor holds its ``Buffer``.
``serde`` is the only module that turns these back into indices.

Creating an ``Op`` connects it to its tensors (it becomes their producer and a use of its
inputs); ``Subgraph.remove_op`` disconnects it. Read-only views of constant data stay numpy views
of the loaded file, so loading a large model does not copy its weights.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import heapq
import math
import numbers
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from tflkit.errors import InvalidModelError
from tflkit.ir import option_tables, schema

if TYPE_CHECKING:
    import numpy as np

_NO_FIELDS: Mapping[str, Any] = MappingProxyType({})
#: Ops kept by dead-code removal even when nothing reads their outputs.
_SIDE_EFFECT_OPS = frozenset(
    {"ASSIGN_VARIABLE", "CALL_ONCE", "IF", "WHILE", "CALL", "VAR_HANDLE", "HASHTABLE_IMPORT"}
)


@dataclass(frozen=True)
class OpCode:
    """What an op is: a builtin code or a custom code, and its version."""

    builtin_code: int
    custom_code: str | None = None
    version: int = 1

    @functools.cached_property
    def name(self) -> str:
        """``CONV_2D`` for builtins, the custom code for custom and flex ops."""
        if self.builtin_code == schema.BuiltinOperator.CUSTOM:
            return self.custom_code or "CUSTOM"
        return schema.op_name(self.builtin_code)

    @property
    def is_custom(self) -> bool:
        return self.builtin_code == schema.BuiltinOperator.CUSTOM

    @property
    def is_flex(self) -> bool:
        return self.is_custom and (self.custom_code or "").startswith("Flex")

    @classmethod
    def builtin(cls, name: str, version: int = 1) -> OpCode:
        return cls(schema.op_code(name), None, version)

    @classmethod
    def custom(cls, code: str, version: int = 1) -> OpCode:
        return cls(schema.BuiltinOperator.CUSTOM, code, version)


@dataclass(frozen=True)
class QuantParams:
    """A quantized tensor's grid, read once from its ``QuantizationParametersT``: real value =
    (integer - zero point) * scale, per tensor or per channel along ``axis``."""

    scales: np.ndarray  # float64, one per tensor or per channel
    zero_points: np.ndarray  # int64, as the file gives them ([0] when it gives none)
    axis: int

    @property
    def per_tensor(self) -> tuple[float, int] | None:
        """(scale, zero point) of a per-tensor grid; None for a per-channel one."""
        if self.scales.size != 1:
            return None
        return float(self.scales[0]), int(self.zero_points[0])

    def broadcast(self, ndim: int) -> tuple[np.ndarray, np.ndarray]:
        """Scales and zero points (float64) shaped to broadcast over a value of rank ``ndim``."""
        import numpy as np

        scale = self.scales
        zero = self.zero_points.astype(np.float64)
        if scale.size > 1 and ndim:
            shape = [1] * ndim
            shape[self.axis] = -1
            scale, zero = scale.reshape(shape), zero.reshape(shape)
        return scale, zero


class Buffer:
    """Raw bytes of a constant (or of metadata); ``data`` is a read-only uint8 view or None.

    A loaded buffer holds a ``memoryview`` of the mapped file and becomes a numpy view when
    ``data`` is first read (``raw`` reads the bytes without numpy).
    """

    __slots__ = ("__weakref__", "_data", "_mapped")

    def __init__(self, data: np.ndarray | bytes | None = None) -> None:
        self._data = _as_bytes_view(data)
        self._mapped: memoryview | None = None

    @classmethod
    def mapped(cls, view: memoryview) -> Buffer:
        """A buffer over ``view`` (read-only bytes of a loaded file), not copied."""
        buffer = cls(None)
        buffer._mapped = view
        return buffer

    @property
    def data(self) -> np.ndarray | None:
        if self._mapped is not None:
            import numpy as np

            self._data = np.frombuffer(self._mapped, dtype=np.uint8)
            self._mapped = None
        return self._data

    @data.setter
    def data(self, value: np.ndarray | None) -> None:
        self._mapped = None
        self._data = value

    @property
    def raw(self) -> memoryview | None:
        """The bytes, read-only, without numpy (None when the buffer holds no data)."""
        if self._mapped is not None:
            return self._mapped
        return None if self._data is None else memoryview(self._data).cast("B")

    @property
    def nbytes(self) -> int:
        if self._mapped is not None:
            return self._mapped.nbytes
        return 0 if self._data is None else int(self._data.nbytes)

    def tobytes(self) -> bytes:
        raw = self.raw
        return b"" if raw is None else raw.tobytes()

    def __repr__(self) -> str:
        return f"Buffer({self.nbytes} bytes)"


def _as_bytes_view(data: np.ndarray | bytes | bytearray | memoryview | None) -> np.ndarray | None:
    if data is None:
        return None
    import numpy as np

    if isinstance(data, bytes | bytearray | memoryview):
        view = np.frombuffer(data, dtype=np.uint8)
    else:
        view = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    if view.flags.writeable:
        view = view.copy()
        view.flags.writeable = False
    return view


class Tensor:
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

    # --- type and shape -------------------------------------------------------------------
    @property
    def type_name(self) -> str:
        return schema.tensor_type_name(self.type)

    @property
    def dtype(self) -> np.dtype | None:
        return schema.numpy_dtype(self.type)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_dynamic(self) -> bool:
        """True when the shape signature has an unknown (-1) dimension."""
        return self.shape_signature is not None and any(d < 0 for d in self.shape_signature)

    @property
    def display_shape(self) -> tuple[int | str, ...]:
        """The shape with dynamic dimensions shown as ``?``."""
        dims = self.shape_signature if self.shape_signature is not None else self.shape
        return tuple("?" if d < 0 else d for d in dims)

    @property
    def quantization(self) -> Any:
        """``schema.fb.QuantizationParametersT`` (scale, zeroPoint, quantizedDimension...) or
        None; a loaded tensor's is decoded when first read."""
        lazy = self._lazy_quantization
        if lazy is not None:
            self._lazy_quantization = None
            self._quantization = schema.fb.QuantizationParametersT.InitFromBuf(*lazy)
        return self._quantization

    @quantization.setter
    def quantization(self, value: Any) -> None:
        self._lazy_quantization = None
        self._quantization = value

    @property
    def scale_count(self) -> int:
        """How many scales the quantization has: 0 unquantized, 1 per tensor, more per channel
        (read from the file without decoding the table when it is untouched)."""
        lazy = self._lazy_quantization
        if lazy is not None:
            return option_tables.vector_length(*lazy, "QuantizationParameters", "Scale")
        q = self._quantization
        return 0 if q is None or q.scale is None else len(q.scale)

    @property
    def is_quantized(self) -> bool:
        return self.scale_count > 0

    @property
    def quant_params(self) -> QuantParams | None:
        """The quantization grid (scales, zero points, axis), or None when not quantized: the
        one reader of ``quantization`` for code that computes with it."""
        if not self.is_quantized:
            return None
        import numpy as np

        q = self.quantization
        scales = np.asarray(q.scale, np.float64).reshape(-1)
        zeros = q.zeroPoint if q.zeroPoint is not None and len(q.zeroPoint) else [0]
        zero_points = np.asarray(zeros, np.int64).reshape(-1)
        return QuantParams(scales, zero_points, int(q.quantizedDimension or 0))

    @property
    def scale_zero_point(self) -> tuple[float, int] | None:
        """(scale, zero point) of a per-tensor quantized tensor, else None."""
        params = self.quant_params
        return None if params is None else params.per_tensor

    @property
    def nbytes(self) -> int | None:
        """Bytes of one instance of this tensor, or None for dynamic or non-numeric types."""
        bits = schema.TYPE_BITS.get(self.type)
        if schema.struct_code(self.type) is None or bits is None or self.is_dynamic:
            return None
        return math.prod(self.shape) * bits // 8

    # --- constant data --------------------------------------------------------------------
    @property
    def is_constant(self) -> bool:
        return self.buffer is not None and self.buffer.nbytes > 0 and not self.is_variable

    @property
    def data(self) -> np.ndarray | None:
        """The constant value, read-only, shaped; raw bytes for sparse or non-numeric tensors."""
        if self.buffer is None or self.buffer.data is None or self.buffer.nbytes == 0:
            return None
        raw = self.buffer.data
        dtype = self.dtype
        if dtype is None or self.sparsity is not None:
            return raw
        values = raw.view(dtype)
        if values.size == math.prod(self.shape):
            return values.reshape(self.shape)
        return values

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

    @property
    def is_graph_input(self) -> bool:
        return self.subgraph is not None and self in self.subgraph.inputs  # identity: no __eq__

    @property
    def is_graph_output(self) -> bool:
        return self.subgraph is not None and self in self.subgraph.outputs

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


class Op:
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
    def type(self) -> str:
        return self.opcode.name

    @property
    def version(self) -> int:
        return self.opcode.version

    @property
    def is_custom(self) -> bool:
        return self.opcode.is_custom

    @property
    def options(self) -> Any:
        """Object-API builtin options (``schema.fb.Conv2DOptionsT``...) or None."""
        if self._lazy_options is not None:
            self._parse_options()
        return self._options

    @options.setter
    def options(self, value: Any) -> None:
        if self._lazy_options is not None:
            self._parse_options()
        self._options = value
        self._options_type = None

    @property
    def options2(self) -> Any:
        """Object-API ``BuiltinOptions2`` (StableHLO and composite ops) or None."""
        if self._lazy_options is not None:
            self._parse_options()
        return self._options2

    @options2.setter
    def options2(self, value: Any) -> None:
        if self._lazy_options is not None:
            self._parse_options()
        self._options2 = value

    @property
    def option_fields(self) -> Mapping[str, Any]:
        """Read-only fields of ``options`` and ``options2`` by attribute name
        (``fusedActivationFunction``...; ``options`` wins a clash, ``options2`` holds the StableHLO
        and composite ones: ``name``, ``decompositionSubgraphIndex``...). A loaded op's untouched
        options are read straight from the file, without the object API."""
        lazy = self._lazy_options
        if lazy is not None:
            if self._lazy_fields is None:
                self._lazy_fields = option_tables.decode_options(
                    *lazy, self._options_type, self.options2_type
                )
            if self._lazy_fields is not None:
                return self._lazy_fields
        options, options2 = self.options, self.options2
        if options is None and options2 is None:
            return _NO_FIELDS
        fields: dict[str, Any] = {}
        for table in (options2, options):
            if table is not None:
                fields.update((k, v) for k, v in vars(table).items() if not k.startswith("_"))
        return MappingProxyType(fields)

    def _parse_options(self) -> None:
        buf, position, position2 = self._lazy_options
        self._lazy_options = self._lazy_fields = None
        try:
            if position is not None:
                table = schema.flatbuffer_table(buf, position)
                self._options = schema.fb.BuiltinOptionsCreator(self._options_type, table)
            if position2 is not None:
                table = schema.flatbuffer_table(buf, position2)
                self._options2 = schema.fb.BuiltinOptions2Creator(self.options2_type, table)
        except (IndexError, ValueError, TypeError, struct.error) as exc:
            raise InvalidModelError(
                f"{self.opcode.name} op has corrupt builtin options ({type(exc).__name__}: {exc})"
            ) from None

    @property
    def options_type(self) -> int:
        """The ``BuiltinOptions`` union tag of ``options`` (0 when there are none)."""
        if self._lazy_options is None and self._options is None:
            return 0
        if self._options_type is None:
            self._options_type = schema.options_type_for(self.options)
        return self._options_type

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

    @property
    def referenced_subgraphs(self) -> dict[str, int]:
        """Subgraph indices named by control-flow options (IF, WHILE, CALL_ONCE, composites)."""
        if not option_tables.may_name_subgraphs(self.options_type, self.options2_type):
            return {}
        fields = self.option_fields
        found: dict[str, int] = {}
        for attr in option_tables.SUBGRAPH_FIELDS:
            value = fields.get(attr)
            if isinstance(value, numbers.Integral):
                found[attr] = int(value)
        return found

    def set_input(self, index: int, tensor: Tensor | None) -> None:
        """Replace input ``index``; keeps both tensors' use lists right."""
        old = self._inputs[index]
        if old is not None:
            old._uses.pop((self, index), None)
        self._inputs[index] = tensor
        if tensor is not None:
            tensor._uses[(self, index)] = None

    def set_inputs(self, tensors: Sequence[Tensor | None]) -> None:
        """Replace the whole input list."""
        self._detach_inputs()
        self._inputs = []
        for tensor in tensors:
            self._inputs.append(tensor)
            if tensor is not None:
                tensor._uses[(self, len(self._inputs) - 1)] = None

    def set_output(self, index: int, tensor: Tensor) -> None:
        """Make ``tensor`` output ``index`` of this op (it must have no other producer)."""
        old = self._outputs[index]
        if old._producer is self:
            old._producer = None
        if tensor._producer is not None and tensor._producer is not self:
            raise InvalidModelError(f"tensor {tensor.name!r} already has a producer")
        self._outputs[index] = tensor
        tensor._producer = self

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
        #: Tensors in file order. Mutate through ``add_tensor`` / ``remove_unused`` only.
        self.tensors: list[Tensor] = []
        #: Ops in execution order. Mutate through ``add_op`` / ``insert_op`` / ``remove_op``.
        self.ops: list[Op] = []
        self.inputs: list[Tensor] = []
        self.outputs: list[Tensor] = []
        self.debug_metadata_index = -1
        self._positions: dict[int, int] | None = None
        self._op_positions: dict[int, int] | None = None

    @property
    def index(self) -> int:
        if self.model is None:
            raise InvalidModelError(f"subgraph {self.name!r} is not in a model")
        return next(i for i, sg in enumerate(self.model.subgraphs) if sg is self)

    # --- positions ------------------------------------------------------------------------
    def _tensor_position(self, tensor: Tensor) -> int:
        if self._positions is None or len(self._positions) != len(self.tensors):
            self._positions = {id(t): i for i, t in enumerate(self.tensors)}
        position = self._positions.get(id(tensor))
        if position is None or self.tensors[position] is not tensor:
            self._positions = {id(t): i for i, t in enumerate(self.tensors)}
            position = self._positions.get(id(tensor))
        if position is None:
            raise InvalidModelError(f"tensor {tensor.name!r} is not in subgraph {self.name!r}")
        return position

    def _op_position(self, op: Op) -> int:
        if self._op_positions is None or len(self._op_positions) != len(self.ops):
            self._op_positions = {id(o): i for i, o in enumerate(self.ops)}
        position = self._op_positions.get(id(op))
        if position is None or self.ops[position] is not op:
            self._op_positions = {id(o): i for i, o in enumerate(self.ops)}
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
            self.tensors.append(tensor)
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
        names = {t.name for t in self.tensors}
        if base not in names:
            return base
        i = 1
        while f"{base}_{i}" in names:
            i += 1
        return f"{base}_{i}"

    def tensor(self, name: str) -> Tensor:
        """The tensor called ``name``; KeyError if none."""
        for tensor in self.tensors:
            if tensor.name == name:
                return tensor
        raise KeyError(f"no tensor named {name!r} in subgraph {self.name!r}")

    # --- ops ------------------------------------------------------------------------------
    def add_op(self, op: Op) -> Op:
        """Append ``op`` at the end of the execution order."""
        return self.insert_op(len(self.ops), op)

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
        self.ops.insert(position, op)
        self._changed()
        return op

    def insert_before(self, anchor: Op, op: Op) -> Op:
        return self.insert_op(anchor.index, op)

    def insert_after(self, anchor: Op, op: Op) -> Op:
        return self.insert_op(anchor.index + 1, op)

    def remove_op(self, op: Op) -> None:
        """Remove ``op`` and disconnect it from its tensors (the tensors stay)."""
        position = op.index
        del self.ops[position]
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
        self.outputs = [new if t is old else t for t in self.outputs]
        if self.model is not None:
            for signature in self.model.signatures:
                if signature.subgraph is self:
                    for key, tensor in signature.outputs.items():
                        if tensor is old:
                            signature.outputs[key] = new

    # --- whole-graph edits ----------------------------------------------------------------
    def topological_sort(self) -> None:
        """Reorder ops so every op comes after the producers of its inputs (stable)."""
        order = {id(op): i for i, op in enumerate(self.ops)}
        pending = {id(op): 0 for op in self.ops}
        readers: dict[int, list[Op]] = {id(op): [] for op in self.ops}
        for op in self.ops:
            for tensor in dict.fromkeys(t for t in op.inputs if t is not None):
                producer = tensor.producer
                if producer is not None and id(producer) in pending:
                    pending[id(op)] += 1
                    readers[id(producer)].append(op)

        ready = [(order[id(op)], op) for op in self.ops if pending[id(op)] == 0]
        heapq.heapify(ready)
        sorted_ops: list[Op] = []
        while ready:
            _, op = heapq.heappop(ready)
            sorted_ops.append(op)
            for reader in readers[id(op)]:
                pending[id(reader)] -= 1
                if pending[id(reader)] == 0:
                    heapq.heappush(ready, (order[id(reader)], reader))
        if len(sorted_ops) != len(self.ops):
            raise InvalidModelError(f"subgraph {self.name!r} has a cycle")
        self.ops = sorted_ops
        self._changed()

    def remove_unused(self) -> tuple[int, int]:
        """Remove ops whose results nobody reads, then unreferenced tensors.

        Ops with side effects (variables, control flow, custom ops) stay. Returns
        (ops removed, tensors removed).
        """
        keep_tensors = self._pinned_tensors()
        removed_ops = 0
        changed = True
        while changed:
            changed = False
            for op in reversed(list(self.ops)):
                if op.opcode.is_custom or op.type in _SIDE_EFFECT_OPS or not op.outputs:
                    continue
                if any(t._uses or id(t) in keep_tensors for t in op.outputs):
                    continue
                self.remove_op(op)
                removed_ops += 1
                changed = True
        referenced = set(keep_tensors)
        for op in self.ops:
            for tensor in (*op.inputs, *op.outputs, *op.intermediates):
                if tensor is not None:
                    referenced.add(id(tensor))
        before = len(self.tensors)
        for tensor in self.tensors:
            if id(tensor) not in referenced:
                tensor.subgraph = None
        self.tensors = [t for t in self.tensors if id(t) in referenced]
        self._changed()
        return removed_ops, before - len(self.tensors)

    def _pinned_tensors(self) -> set[int]:
        pinned = {id(t) for t in (*self.inputs, *self.outputs)}
        if self.model is not None:
            for signature in self.model.signatures:
                if signature.subgraph is self:
                    pinned.update(id(t) for t in signature.inputs.values())
                    pinned.update(id(t) for t in signature.outputs.values())
        return pinned

    def __repr__(self) -> str:
        return f"Subgraph({self.name!r}, {len(self.ops)} ops, {len(self.tensors)} tensors)"


@dataclass
class SignatureDef:
    """A named entry point: input and output names mapped to tensors of one subgraph."""

    key: str
    subgraph: Subgraph
    inputs: dict[str, Tensor] = field(default_factory=dict)
    outputs: dict[str, Tensor] = field(default_factory=dict)


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
        key = (raw.nbytes, hashlib.blake2b(raw.data, digest_size=16).digest())
        buffer = digests.get(key)
        if buffer is not None and buffer.data is not None and np.array_equal(buffer.data, raw):
            return buffer
        buffer = Buffer(raw)
        self.buffers.append(buffer)
        digests[key] = buffer
        return buffer

    def _buffer_index(self) -> dict[tuple[int, bytes], Buffer]:
        if self._buffer_digests is None:
            self._buffer_digests = {}
            for buffer in self.buffers:
                if buffer.nbytes:
                    digest = hashlib.blake2b(buffer.data.data, digest_size=16).digest()
                    self._buffer_digests.setdefault((buffer.nbytes, digest), buffer)
        return self._buffer_digests

    def remove_unused(self) -> dict[str, int]:
        """Dead ops and tensors in every subgraph, then buffers nothing references."""
        ops = tensors = 0
        for subgraph in self.subgraphs:
            removed_ops, removed_tensors = subgraph.remove_unused()
            ops += removed_ops
            tensors += removed_tensors
        used = {id(t.buffer) for sg in self.subgraphs for t in sg.tensors if t.buffer is not None}
        used.update(id(m.buffer) for m in self.metadata)
        used.update(id(b) for b in self.metadata_buffer or ())
        before = len(self.buffers)
        self.buffers = [b for b in self.buffers if id(b) in used]
        self._buffer_digests = None
        return {"ops": ops, "tensors": tensors, "buffers": before - len(self.buffers)}

    # --- queries --------------------------------------------------------------------------
    def iter_ops(self) -> Iterable[Op]:
        for subgraph in self.subgraphs:
            yield from subgraph.ops

    def __repr__(self) -> str:
        ops = sum(len(sg.ops) for sg in self.subgraphs)
        return f"Model({len(self.subgraphs)} subgraphs, {ops} ops, {len(self.buffers)} buffers)"
