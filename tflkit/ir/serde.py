"""Bytes <-> IR: the only place that turns tensors and ops into flatbuffer indices and back.

Loading keeps constant data as read-only numpy views of the file's bytes (no copy). A model
loaded from a path maps the file read-only: only the tables are read, and weights are paged in
when something uses them (like LiteRT's own ``BuildFromFile``). As with any mapping, changing
the file in place while the model is in use is not supported; tflkit itself never does (its
writes replace files whole, see ``tflkit.fsio``). Saving builds only the tables with the
flatbuffers builder; buffer data goes to the file straight from its views, after the tables,
16-byte aligned like the TFLite converter's output.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from pathlib import Path
from typing import Any

import flatbuffers
import numpy as np

from tflkit.errors import InvalidModelError, ModelLoadError, TflkitError
from tflkit.fsio import write_atomic
from tflkit.ir import schema, structure
from tflkit.ir._tables import Fields
from tflkit.ir.graph import Buffer, Metadata, Model, Op, OpCode, SignatureDef, Subgraph, Tensor

fb = schema.fb

ModelSource = str | os.PathLike[str] | bytes | bytearray | memoryview | mmap.mmap
#: What a model's bytes are held in: in memory, or a read-only map of its file.
ModelBytes = bytes | bytearray | memoryview | mmap.mmap
_BUFFER_ALIGNMENT = 16
#: Data region offsets of length prefixes are 12 mod 16, so the data itself is 16-byte aligned.
_DATA_PREFIX_PHASE = 12
_MAX_FLATBUFFER = 2**31 - 1


# --------------------------------------------------------------------------------------------
# load
# --------------------------------------------------------------------------------------------
def read_model_bytes(source: ModelSource, *, mapped: bool = False) -> tuple[ModelBytes, str]:
    """The bytes of ``source`` and a label for messages; raises ModelLoadError.

    ``mapped``: a regular file is mapped read-only instead of read (nothing is read until
    used); files that cannot be mapped (pipes, empty files) are read.
    """
    if isinstance(source, bytes | bytearray | memoryview | mmap.mmap):
        return source, "<bytes>"
    path = Path(source)
    try:
        if path.is_dir():
            raise ModelLoadError(f"{path}: is a directory, not a .tflite file")
        with open(path, "rb") as f:
            size, limit = os.fstat(f.fileno()).st_size, structure.max_tensor_bytes()
            if size > limit:  # refused before reading: the bytes would not fit in memory
                raise ModelLoadError(
                    f"{path}: {size / 2**30:.1f} GiB, more than the {limit / 2**30:.1f} GiB of "
                    "memory this process may use"
                )
            if mapped and size > 0:
                with contextlib.suppress(OSError, ValueError):  # not mappable: read it
                    return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), str(path)
            return f.read(), str(path)
    except FileNotFoundError:
        raise ModelLoadError(f"{path}: no such file") from None
    except PermissionError:
        raise ModelLoadError(f"{path}: permission denied") from None
    except OSError as exc:
        raise ModelLoadError(f"{path}: cannot read ({exc.strerror or exc})") from None


def load(source: ModelSource, *, label: str | None = None) -> Model:
    """Load a ``.tflite`` model from a path or bytes into the IR.

    ``label`` names the model in error messages (defaults to the path). A path is mapped, not
    read (see the module docstring).
    """
    data, default_label = read_model_bytes(source, mapped=True)
    label = label or default_label
    check_header(data, label)
    structure.verify_bytes(data, label)  # before anything else reads it (one pass over tables)
    try:
        root = fb.Model.GetRootAs(data, 0)
        version = root.Version()
        if version != schema.SCHEMA_VERSION:
            raise ModelLoadError(
                f"{label}: unsupported TFLite schema version {version} "
                f"(tflkit reads version {schema.SCHEMA_VERSION})"
            )
        return _Reader(data).read(root)
    except InvalidModelError as exc:
        raise ModelLoadError(f"{label}: invalid TFLite model ({exc})") from None
    except (IndexError, struct.error, ValueError, TypeError, OverflowError, UnicodeError) as exc:
        raise ModelLoadError(_corruption_message(label, len(data), exc)) from None


def _corruption_message(label: str, size: int, exc: Exception) -> str:
    text = str(exc)
    if "requires a buffer of at least" in text or "beyond end of file" in text:
        return (
            f"{label}: truncated or corrupt TFLite file: it refers to data past the end "
            f"of its {size} bytes"
        )
    return f"{label}: corrupt TFLite flatbuffer ({type(exc).__name__}: {text})"


def check_header(data: ModelBytes, label: str) -> None:
    """Raise ModelLoadError unless ``data`` starts like a TFLite flatbuffer."""
    if len(data) == 0:
        raise ModelLoadError(f"{label}: empty file, not a TFLite model")
    if len(data) < 8 or bytes(data[4:8]) != schema.FILE_IDENTIFIER:
        raise ModelLoadError(f"{label}: not a TFLite model (no 'TFL3' file identifier)")
    (root_offset,) = struct.unpack_from("<I", data, 0)
    if root_offset + 4 > len(data):
        raise ModelLoadError(f"{label}: truncated TFLite file (root table beyond end of file)")


class _Reader:
    """Turns a parsed flatbuffer into IR objects."""

    def __init__(self, data: ModelBytes) -> None:
        self.data = data
        self.file_view = np.frombuffer(data, dtype=np.uint8)
        if self.file_view.flags.writeable:
            self.file_view = self.file_view.view()
            self.file_view.flags.writeable = False

    def read(self, root: Any) -> Model:
        model = Model(description=None)
        model.version = root.Version()
        description = root.Description()
        model.description = description.decode("utf-8", "replace") if description else None
        buffers = [self._buffer(p) for p in Fields(self.data, root._tab.Pos).table_vector(4)]
        sentinel = buffers[0] if buffers and buffers[0].nbytes == 0 else None
        model.buffers = [b for b in buffers if b is not sentinel]

        def buffer_at(index: int) -> Buffer | None:
            if index == 0 and sentinel is not None:
                return None
            if not 0 <= index < len(buffers):
                raise ValueError(f"buffer index {index} out of range ({len(buffers)} buffers)")
            return buffers[index]

        opcodes = [self._opcode(root.OperatorCodes(i)) for i in range(root.OperatorCodesLength())]
        model.opcode_order = list(dict.fromkeys(opcodes))
        for i in range(root.SubgraphsLength()):
            model.subgraphs.append(self._subgraph(root.Subgraphs(i), model, opcodes, buffer_at))
        for i in range(root.MetadataLength()):
            entry = root.Metadata(i)
            name = entry.Name()
            buffer = buffer_at(entry.Buffer()) or Buffer(b"")
            model.metadata.append(Metadata(name.decode() if name else "", buffer))
        if not root.MetadataBufferIsNone():
            # Deprecated and ignored by LiteRT; flatbuffer_utils.write_model renumbers buffers
            # without updating it, so entries naming no buffer are dropped, not an error.
            model.metadata_buffer = [
                buffer_at(i) or Buffer(b"")
                for i in root.MetadataBufferAsNumpy().tolist()
                if 0 <= i < len(buffers)
            ]
        for i in range(root.SignatureDefsLength()):
            model.signatures.append(self._signature(root.SignatureDefs(i), model.subgraphs))
        if not root.ExternalBufferGroupsIsNone():
            model.external_buffer_groups = [
                fb.ExternalBufferGroupT.InitFromObj(root.ExternalBufferGroups(i))
                for i in range(root.ExternalBufferGroupsLength())
            ]
        if not root.ExternalBuffersIsNone():
            model.external_buffers = [
                fb.ExternalBufferT.InitFromObj(root.ExternalBuffers(i))
                for i in range(root.ExternalBuffersLength())
            ]
        return model

    def _buffer(self, position: int) -> Buffer:
        fields = Fields(self.data, position)  # Buffer: data=0, offset=1, size=2
        offset, size = fields.u64(1), fields.u64(2)
        if offset > 1:
            # Large-model layout: the data lives after the flatbuffer, at an absolute offset.
            if offset + size > len(self.file_view):
                raise ValueError(f"buffer data [{offset}, {offset + size}) beyond end of file")
            return _buffer_from_view(self.file_view[offset : offset + size])
        found = fields.vector(0)
        if found is None:
            return Buffer(None)
        start, length = found
        if start + length > len(self.file_view):
            raise ValueError("buffer data beyond end of file")
        return _buffer_from_view(self.file_view[start : start + length])

    @staticmethod
    def _opcode(table: Any) -> OpCode:
        builtin = max(table.BuiltinCode(), table.DeprecatedBuiltinCode())
        custom = table.CustomCode()
        return OpCode(builtin, custom.decode() if custom is not None else None, table.Version())

    def _subgraph(
        self, table: Any, model: Model, opcodes: list[OpCode], buffer_at: Any
    ) -> Subgraph:
        fields = Fields(self.data, table._tab.Pos)
        subgraph = Subgraph(fields.string(4) or "", model)
        subgraph.debug_metadata_index = fields.i32(5, -1)
        tensors = [self._tensor(Fields(self.data, p), buffer_at) for p in fields.table_vector(0)]
        for tensor in tensors:
            tensor.subgraph = subgraph
        subgraph.tensors = tensors

        def tensor_at(index: int) -> Tensor | None:
            if index == -1:
                return None
            if not 0 <= index < len(tensors):
                raise ValueError(f"tensor index {index} out of range ({len(tensors)} tensors)")
            return tensors[index]

        subgraph.inputs = [_required(tensor_at(i), i) for i in fields.ints(1) or ()]
        subgraph.outputs = [_required(tensor_at(i), i) for i in fields.ints(2) or ()]
        for position in fields.table_vector(3):
            op = self._op(Fields(self.data, position), opcodes, tensor_at)
            op.subgraph = subgraph
            subgraph.ops.append(op)
        return subgraph

    def _tensor(self, fields: Fields, buffer_at: Any) -> Tensor:
        quantization = fields.table(4)
        sparsity = fields.table(6)
        variants = None
        if fields.has(9):
            variants = [
                fb.VariantSubTypeT.InitFromBuf(self.data, p) for p in fields.table_vector(9)
            ]
        shape = fields.ints(0)
        return Tensor(
            fields.string(3) or "",
            shape or (),
            fields.i8(1),
            buffer=buffer_at(fields.u32(2)),
            quantization=None if quantization is None else self._quantization(quantization),
            sparsity=(
                None
                if sparsity is None
                else fb.SparsityParametersT.InitFromBuf(self.data, sparsity)
            ),
            shape_signature=fields.ints(7),
            is_variable=bool(fields.u8(5)),
            has_rank=bool(fields.u8(8)),
            variant_tensors=variants,
            external_buffer=fields.u32(10),
        )

    def _quantization(self, position: int) -> Any:
        if not any(Fields(self.data, position).slots):
            return fb.QuantizationParametersT()
        return fb.QuantizationParametersT.InitFromBuf(self.data, position)

    def _op(self, fields: Fields, opcodes: list[OpCode], tensor_at: Any) -> Op:
        opcode_index = fields.u32(0)
        if not 0 <= opcode_index < len(opcodes):
            raise ValueError(f"opcode index {opcode_index} out of range ({len(opcodes)} opcodes)")
        custom_options = fields.raw(5)
        large_offset, large_size = fields.u64(9), fields.u64(10)
        if large_offset > 1:
            if large_offset + large_size > len(self.file_view):
                raise ValueError("custom options beyond end of file")
            custom_options = self.file_view[large_offset : large_offset + large_size].tobytes()
        options_type, options2_type = fields.u8(3), fields.u8(11)
        options_position = fields.table(4) if options_type else None
        options2_position = fields.table(12) if options2_type else None
        for position in (options_position, options2_position):
            if position is not None:
                _check_table(self.data, position)
        op = Op(
            opcodes[opcode_index],
            [tensor_at(i) for i in fields.ints(1) or ()],
            [_required(tensor_at(i), i) for i in fields.ints(2) or ()],
            options_type=options_type,
            options2_type=options2_type,
            custom_options=custom_options,
            custom_options_format=fields.i8(6),
            mutating_variable_inputs=fields.bools(7),
            intermediates=[t for t in map(tensor_at, fields.ints(8) or ()) if t is not None],
            debug_metadata_index=fields.i32(13, -1),
        )
        if options_position is not None or options2_position is not None:
            op._lazy_options = (self.data, options_position, options2_position)
        return op

    @staticmethod
    def _signature(table: Any, subgraphs: list[Subgraph]) -> SignatureDef:
        index = table.SubgraphIndex()
        if not 0 <= index < len(subgraphs):
            raise ValueError(f"signature names subgraph {index} of {len(subgraphs)}")
        subgraph = subgraphs[index]

        def tensor_map(entries: Any, count: int) -> dict[str, Tensor]:
            mapping = {}
            for i in range(count):
                entry = entries(i)
                position = entry.TensorIndex()
                if not 0 <= position < len(subgraph.tensors):
                    raise ValueError(f"signature tensor index {position} out of range")
                mapping[(entry.Name() or b"").decode()] = subgraph.tensors[position]
            return mapping

        key = table.SignatureKey()
        return SignatureDef(
            key.decode() if key else "",
            subgraph,
            tensor_map(table.Inputs, table.InputsLength()),
            tensor_map(table.Outputs, table.OutputsLength()),
        )


def _required(tensor: Tensor | None, index: int) -> Tensor:
    if tensor is None:
        raise ValueError(
            f"tensor index {index} where a tensor is required (only op inputs may be omitted)"
        )
    return tensor


def _check_table(data: Any, position: int) -> None:
    """Raise ValueError unless the table at ``position`` and its vtable lie inside ``data``."""
    fields = Fields(data, position)
    end = position + max(fields.slots, default=0) + 8
    if position < 0 or end > len(data):
        raise ValueError("options table beyond end of file")


def _buffer_from_view(view: np.ndarray) -> Buffer:
    buffer = Buffer(None)
    buffer.data = view
    return buffer


# --------------------------------------------------------------------------------------------
# save
# --------------------------------------------------------------------------------------------
class _TrailingBufferT(fb.BufferT):
    """BufferT whose data vector lives in the data region written after the flatbuffer.

    ``position`` is where the vector's length prefix starts, counted from the end of the
    flatbuffer; uoffsets only point forward, so a negative "offset from the end" is exactly
    what the builder needs to point there.
    """

    position: int | None = None

    def Pack(self, builder: flatbuffers.Builder) -> int:
        fb.BufferStart(builder)
        if self.position is not None:
            fb.BufferAddData(builder, -self.position)
        return fb.BufferEnd(builder)


def dumps(model: Model) -> bytes:
    """Serialize ``model`` to ``.tflite`` bytes."""
    return b"".join(_serialize(model))


def save(model: Model, path: str | os.PathLike[str]) -> Path:
    """Write ``model`` to ``path`` atomically (a temp file in the same folder, then rename)."""
    return write_atomic(path, _serialize(model))


def _serialize(model: Model) -> list[bytes | memoryview]:
    """The file as chunks: the flatbuffer tables, then each buffer's data, 16-byte aligned.

    Constant data is never copied into the builder: it is written straight from its views.
    """
    writer = _Writer(model)
    model_t = writer.model_t()
    layout: list[tuple[int, np.ndarray]] = []
    position = 0
    for buffer_t in model_t.buffers:
        data = buffer_t.data
        if data is None:
            continue
        position += (_DATA_PREFIX_PHASE - position) % _BUFFER_ALIGNMENT
        buffer_t.position = position
        layout.append((position, data))
        position += 4 + data.nbytes
    if position > _MAX_FLATBUFFER:
        raise TflkitError(
            f"model weights total {position / 2**30:.2f} GiB: writing models over 2 GiB "
            "(external buffer layout) is not supported yet"
        )
    objects = sum(len(sg.tensors) + len(sg.ops) for sg in model.subgraphs)
    builder = flatbuffers.Builder(256 * objects + (1 << 16))
    builder.Prep(_BUFFER_ALIGNMENT, 0)
    root = model_t.Pack(builder)
    builder.Finish(root, file_identifier=schema.FILE_IDENTIFIER)
    head = builder.Output()
    if len(head) + position > _MAX_FLATBUFFER:
        raise TflkitError("model over 2 GiB: the external buffer layout is not supported yet")
    chunks: list[bytes | memoryview] = [head]
    written = 0
    for start, data in layout:
        chunks.append(bytes(start - written) + struct.pack("<I", data.nbytes))
        chunks.append(memoryview(data).cast("B"))
        written = start + 4 + data.nbytes
    return chunks


class _Writer:
    """Assigns indices (buffers, opcodes, tensors) and fills object-API tables."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.buffers: list[Buffer] = []
        self.buffer_index: dict[int, int] = {}
        self.opcode_index: dict[OpCode, int] = {}

    def model_t(self) -> Any:
        model = self.model
        self._index_buffers()
        self._index_opcodes()
        model_t = fb.ModelT()
        model_t.version = model.version
        model_t.description = model.description
        model_t.operatorCodes = [_opcode_t(code) for code in self.opcode_index]
        model_t.subgraphs = [self._subgraph_t(sg) for sg in model.subgraphs]
        sentinel = _TrailingBufferT()
        model_t.buffers = [sentinel] + [self._buffer_t(b) for b in self.buffers[1:]]
        model_t.metadata = [self._metadata_t(m) for m in model.metadata] or None
        if model.metadata_buffer is not None:
            model_t.metadataBuffer = [self.buffer_index[id(b)] for b in model.metadata_buffer]
        model_t.signatureDefs = [self._signature_t(s) for s in model.signatures] or None
        model_t.externalBufferGroups = model.external_buffer_groups
        model_t.externalBuffers = model.external_buffers
        return model_t

    def _index_buffers(self) -> None:
        self.buffers = [Buffer(None)]
        ordered = [*self.model.buffers]
        ordered += [t.buffer for sg in self.model.subgraphs for t in sg.tensors if t.buffer]
        ordered += [m.buffer for m in self.model.metadata]
        ordered += self.model.metadata_buffer or []
        for buffer in ordered:
            if id(buffer) not in self.buffer_index:
                self.buffer_index[id(buffer)] = len(self.buffers)
                self.buffers.append(buffer)

    def _index_opcodes(self) -> None:
        used = dict.fromkeys(op.opcode for op in self.model.iter_ops())
        ordered = [code for code in self.model.opcode_order if code in used]
        ordered += [code for code in used if code not in self.opcode_index]
        for code in ordered:
            self.opcode_index.setdefault(code, len(self.opcode_index))

    @staticmethod
    def _buffer_t(buffer: Buffer) -> Any:
        buffer_t = _TrailingBufferT()
        buffer_t.data = buffer.data
        return buffer_t

    def _subgraph_t(self, subgraph: Subgraph) -> Any:
        position = {id(t): i for i, t in enumerate(subgraph.tensors)}

        def index_of(tensor: Tensor | None) -> int:
            if tensor is None:
                return -1
            try:
                return position[id(tensor)]
            except KeyError:
                raise TflkitError(
                    f"tensor {tensor.name!r} is used in subgraph {subgraph.name!r} "
                    "but is not one of its tensors"
                ) from None

        subgraph_t = fb.SubGraphT()
        subgraph_t.name = subgraph.name or None
        subgraph_t.debugMetadataIndex = subgraph.debug_metadata_index
        subgraph_t.tensors = [self._tensor_t(t) for t in subgraph.tensors]
        subgraph_t.inputs = _int32([index_of(t) for t in subgraph.inputs])
        subgraph_t.outputs = _int32([index_of(t) for t in subgraph.outputs])
        subgraph_t.operators = [self._op_t(op, index_of) for op in subgraph.ops]
        return subgraph_t

    def _tensor_t(self, tensor: Tensor) -> Any:
        tensor_t = fb.TensorT()
        tensor_t.shape = _int32(tensor.shape)
        tensor_t.type = tensor.type
        tensor_t.buffer = 0 if tensor.buffer is None else self.buffer_index[id(tensor.buffer)]
        tensor_t.name = tensor.name
        tensor_t.quantization = tensor.quantization
        tensor_t.isVariable = tensor.is_variable
        tensor_t.sparsity = tensor.sparsity
        if tensor.shape_signature is not None:
            tensor_t.shapeSignature = _int32(tensor.shape_signature)
        tensor_t.hasRank = tensor.has_rank
        tensor_t.variantTensors = tensor.variant_tensors
        tensor_t.externalBuffer = tensor.external_buffer
        return tensor_t

    def _op_t(self, op: Op, index_of: Any) -> Any:
        op_t = fb.OperatorT()
        op_t.opcodeIndex = self.opcode_index[op.opcode]
        op_t.inputs = _int32([index_of(t) for t in op.inputs])
        op_t.outputs = _int32([index_of(t) for t in op.outputs])
        op_t.builtinOptionsType = op.options_type
        op_t.builtinOptions = op.options
        op_t.builtinOptions2Type = op.options2_type if op.options2 is not None else 0
        op_t.builtinOptions2 = op.options2
        if op.custom_options is not None:
            op_t.customOptions = np.frombuffer(op.custom_options, dtype=np.uint8)
        op_t.customOptionsFormat = op.custom_options_format
        if op.mutating_variable_inputs is not None:
            op_t.mutatingVariableInputs = op.mutating_variable_inputs
        if op.intermediates:
            op_t.intermediates = _int32([index_of(t) for t in op.intermediates])
        op_t.debugMetadataIndex = op.debug_metadata_index
        return op_t

    def _metadata_t(self, entry: Metadata) -> Any:
        metadata_t = fb.MetadataT()
        metadata_t.name = entry.name
        metadata_t.buffer = self.buffer_index[id(entry.buffer)]
        return metadata_t

    def _signature_t(self, signature: SignatureDef) -> Any:
        subgraph = signature.subgraph
        signature_t = fb.SignatureDefT()
        signature_t.signatureKey = signature.key
        signature_t.subgraphIndex = subgraph.index
        signature_t.inputs = [_tensor_map_t(n, t) for n, t in signature.inputs.items()]
        signature_t.outputs = [_tensor_map_t(n, t) for n, t in signature.outputs.items()]
        return signature_t


def _opcode_t(code: OpCode) -> Any:
    opcode_t = fb.OperatorCodeT()
    opcode_t.builtinCode = code.builtin_code
    opcode_t.deprecatedBuiltinCode = min(code.builtin_code, schema.PLACEHOLDER_FOR_GREATER_OP_CODES)
    opcode_t.customCode = code.custom_code
    opcode_t.version = code.version
    return opcode_t


def _tensor_map_t(name: str, tensor: Tensor) -> Any:
    map_t = fb.TensorMapT()
    map_t.name = name
    map_t.tensorIndex = tensor.index
    return map_t


def _int32(values: Any) -> np.ndarray:
    return np.asarray(values, dtype=np.int32).reshape(-1)
