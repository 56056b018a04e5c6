"""Bytes <-> IR: the only place that turns tensors and ops into flatbuffer indices and back.

Loading keeps constant data as read-only views of the file's bytes (no copy; a numpy view once
read as an array). A model loaded from a path maps the file read-only: only the tables are
read, and weights are paged in when something uses them (like LiteRT's own ``BuildFromFile``).
As with any mapping, changing the file in place while the model is in use is not supported;
tflkit itself never does (its writes replace files whole, see ``tflkit.fsio``). Saving writes
only the tables (front to back, ``tflkit.ir._writer``); buffer data goes to the file straight
from its views, after the tables, 16-byte aligned like the TFLite converter's output.

Models over 2 GB (a flatbuffer cannot address more) use LiteRT's large-model layout: a
``Buffer`` with ``offset`` > 1 has no ``data``; its bytes lie at that absolute file offset
(``size`` bytes), after the flatbuffer. The TFLite converter (``flatbuffer_export.cc``) writes
the placeholders offset = size = 1, pads the flatbuffer to 16 bytes, appends each buffer padded
to 16 bytes, then patches the placeholders; the runtime verifies only the first 2 GB - 1 bytes
as a flatbuffer and reads such buffers from its map of the file. ``load`` reads them as views on
the file's map; ``save`` writes that layout when asked, when the model was loaded from it, or
when it would not fit in 2 GB otherwise.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tflkit.errors import InvalidModelError, ModelLoadError, TflkitError
from tflkit.fsio import write_atomic
from tflkit.ir import _writer, option_tables, schema, structure
from tflkit.ir._tables import Fields
from tflkit.ir.graph import Buffer, Metadata, Model, Op, OpCode, SignatureDef, Subgraph, Tensor

if TYPE_CHECKING:
    import numpy as np

ModelSource = str | os.PathLike[str] | bytes | bytearray | memoryview | mmap.mmap
#: What a model's bytes are held in: in memory, or a read-only map of its file.
ModelBytes = bytes | bytearray | memoryview | mmap.mmap
_BUFFER_ALIGNMENT = 16
#: Data region offsets of length prefixes are 12 mod 16, so the data itself is 16-byte aligned.
_DATA_PREFIX_PHASE = 12
_MAX_FLATBUFFER = 2**31 - 1
#: ``Buffer`` fields of data stored after the flatbuffer, written with LiteRT's placeholder
#: values (offset 1, size 1: "filled in once the data is placed") and patched afterwards.
_APPENDED_PLACEHOLDER = (("Offset", 1), ("Size", 1))
_APPENDED_SCALARS = ("Offset", "Size")


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
            if mapped and size > 0:  # a map takes no memory until pages are used
                with contextlib.suppress(OSError, ValueError):  # not mappable: read it
                    return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), str(path)
            if size > limit:  # refused before reading: the bytes would not fit in memory
                raise ModelLoadError(
                    f"{path}: {size / 2**30:.1f} GiB, more than the {limit / 2**30:.1f} GiB of "
                    "memory this process may use"
                )
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
    walk = structure.verify_bytes(data, label)  # before anything else reads the tables
    try:
        root = Fields.root(data)
        version = root.u32(0)  # Model: version=0
        if version != schema.SCHEMA_VERSION:
            raise ModelLoadError(
                f"{label}: unsupported TFLite schema version {version} "
                f"(tflkit reads version {schema.SCHEMA_VERSION})"
            )
        return _Reader(data, walk).read(root)
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
    """Turns a verified flatbuffer into IR objects.

    Tables are read by slot number (``Fields``), following the schema's field order
    (``schema_layout.TABLES``); constant data stays a read-only view of the bytes.
    """

    def __init__(self, data: ModelBytes, walk: structure.Walk) -> None:
        self.data = data
        #: What the verifier read of tensors and ops: they are built from it.
        self.walk = walk
        #: Whether a buffer keeps its data after the flatbuffer (``Buffer.offset`` > 1).
        self.appended = False
        self.file_view = memoryview(data).toreadonly()

    def read(self, root: Fields) -> Model:
        # Model: version=0, operator_codes=1, subgraphs=2, description=3, buffers=4,
        # metadata_buffer=5, metadata=6, signature_defs=7, external_buffer_groups=8,
        # external_buffers=9
        model = Model(description=None)
        model.version = root.u32(0)
        model.description = root.string(3) or None
        buffers = [self._buffer(p) for p in root.table_vector(4)]
        sentinel = buffers[0] if buffers and buffers[0].nbytes == 0 else None
        model.buffers = [b for b in buffers if b is not sentinel]
        model.appended_buffers = self.appended

        def buffer_at(index: int) -> Buffer | None:
            if index == 0 and sentinel is not None:
                return None
            if not 0 <= index < len(buffers):
                raise ValueError(f"buffer index {index} out of range ({len(buffers)} buffers)")
            return buffers[index]

        opcodes = [self._opcode(Fields(self.data, p)) for p in root.table_vector(1)]
        model.opcode_order = list(dict.fromkeys(opcodes))
        for index, position in enumerate(root.table_vector(2)):
            model.subgraphs.append(
                self._subgraph(Fields(self.data, position), index, model, opcodes, buffer_at)
            )
        for position in root.table_vector(6):
            entry = Fields(self.data, position)  # Metadata: name=0, buffer=1
            buffer = buffer_at(entry.u32(1)) or Buffer(b"")
            model.metadata.append(Metadata(entry.string(0) or "", buffer))
        metadata_buffer = root.ints(5)
        if metadata_buffer is not None:
            # Deprecated and ignored by LiteRT; flatbuffer_utils.write_model renumbers buffers
            # without updating it, so entries naming no buffer are dropped, not an error.
            model.metadata_buffer = [
                buffer_at(i) or Buffer(b"") for i in metadata_buffer if 0 <= i < len(buffers)
            ]
        for position in root.table_vector(7):
            model.signatures.append(self._signature(Fields(self.data, position), model.subgraphs))
        # external_buffer_groups=8, external_buffers=9 (rare: read by the object API)
        if root.has(8):
            model.external_buffer_groups = [
                schema.fb.ExternalBufferGroupT.InitFromBuf(self.data, p)
                for p in root.table_vector(8)
            ]
        if root.has(9):
            model.external_buffers = [
                schema.fb.ExternalBufferT.InitFromBuf(self.data, p) for p in root.table_vector(9)
            ]
        return model

    def _buffer(self, position: int) -> Buffer:
        fields = Fields(self.data, position)  # Buffer: data=0, offset=1, size=2
        offset, size = fields.u64(1), fields.u64(2)
        if offset > 1:
            # Large-model layout: the data lives after the flatbuffer, at an absolute offset.
            self.appended = True
            if offset + size > len(self.file_view):
                raise ValueError(f"buffer data [{offset}, {offset + size}) beyond end of file")
            return Buffer.mapped(self.file_view[offset : offset + size])
        found = fields.vector(0)
        if found is None:
            return Buffer(None)
        start, length = found
        if start + length > len(self.file_view):
            raise ValueError("buffer data beyond end of file")
        return Buffer.mapped(self.file_view[start : start + length])

    @staticmethod
    def _opcode(fields: Fields) -> OpCode:
        # OperatorCode: deprecated_builtin_code=0, custom_code=1, version=2, builtin_code=3
        builtin = max(fields.i32(3), fields.i8(0))
        custom = fields.raw(1)
        return OpCode(builtin, custom.decode() if custom is not None else None, fields.i32(2, 1))

    def _subgraph(
        self, fields: Fields, index: int, model: Model, opcodes: list[OpCode], buffer_at: Any
    ) -> Subgraph:
        subgraph = Subgraph(fields.string(4) or "", model)
        subgraph.debug_metadata_index = fields.i32(5, -1)
        tensors = [self._tensor(facts, buffer_at) for facts in self.walk.tensors[index]]
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
        for facts in self.walk.ops[index]:
            op = self._op(facts, opcodes, tensors)
            op.subgraph = subgraph
            subgraph.ops.append(op)
        return subgraph

    def _tensor(self, facts: structure.TensorFacts, buffer_at: Any) -> Tensor:
        (position, _size, slots), shape, signature, kind, buffer, name, sparsity, quant = facts
        tensor = Tensor(name, shape, kind, buffer=buffer_at(buffer), shape_signature=signature)
        if len(slots) > 5:  # Tensor: is_variable=5, has_rank=8, variant_tensors=9,
            fields = Fields.of(self.data, position, slots)  # external_buffer=10
            tensor.is_variable = bool(fields.u8(5))
            tensor.has_rank = bool(fields.u8(8))
            tensor.external_buffer = fields.u32(10)
            if fields.has(9):
                tensor.variant_tensors = [
                    schema.fb.VariantSubTypeT.InitFromBuf(self.data, p)
                    for p in fields.table_vector(9)
                ]
        if sparsity is not None:
            tensor.sparsity = schema.fb.SparsityParametersT.InitFromBuf(self.data, sparsity)
        if quant is not None:  # decoded when first read (Tensor.quantization)
            tensor._lazy_quantization = (self.data, quant)
        return tensor

    def _op(self, facts: structure.OpFacts, opcodes: list[OpCode], tensors: list[Tensor]) -> Op:
        """The op the walk read (its tensor indices are checked: -1 only among inputs)."""
        (position, _size, slots), opcode_index, inputs, outputs, intermediates, custom = facts[:6]
        (options_type, options_position), (options2_type, options2_position) = facts[6:]
        op = Op(
            opcodes[opcode_index],
            [None if i == -1 else tensors[i] for i in inputs],
            [tensors[i] for i in outputs],
            options_type=options_type,
            options2_type=options2_type,
            intermediates=[tensors[i] for i in intermediates],
        )
        if custom is not None:
            op.custom_options = bytes(self.file_view[custom[0] : custom[0] + custom[1]])
        if len(slots) > 6:  # Operator: custom_options_format=6, mutating_variable_inputs=7,
            fields = Fields.of(self.data, position, slots)  # large_custom_options_offset=9,
            op.custom_options_format = fields.i8(6)  # large_custom_options_size=10,
            op.mutating_variable_inputs = fields.bools(7)  # debug_metadata_index=13
            op.debug_metadata_index = fields.i32(13, -1)
            large_offset, large_size = fields.u64(9), fields.u64(10)
            if large_offset > 1:
                if large_offset + large_size > len(self.file_view):
                    raise ValueError("custom options beyond end of file")
                end = large_offset + large_size
                op.custom_options = self.file_view[large_offset:end].tobytes()
        if options_position is not None or options2_position is not None:
            op._lazy_options = (self.data, options_position, options2_position)
        return op

    def _signature(self, fields: Fields, subgraphs: list[Subgraph]) -> SignatureDef:
        # SignatureDef: inputs=0, outputs=1, signature_key=2, subgraph_index=4
        index = fields.u32(4)
        if not 0 <= index < len(subgraphs):
            raise ValueError(f"signature names subgraph {index} of {len(subgraphs)}")
        subgraph = subgraphs[index]

        def tensor_map(slot: int) -> dict[str, Tensor]:
            mapping = {}
            for position in fields.table_vector(slot):
                entry = Fields(self.data, position)  # TensorMap: name=0, tensor_index=1
                at = entry.u32(1)
                if not 0 <= at < len(subgraph.tensors):
                    raise ValueError(f"signature tensor index {at} out of range")
                mapping[entry.string(0) or ""] = subgraph.tensors[at]
            return mapping

        return SignatureDef(fields.string(2) or "", subgraph, tensor_map(0), tensor_map(1))


def _scalar_options(op: Op) -> list[tuple[str, str, list[tuple[str, Any]]]] | None:
    """An op's options (``BuiltinOptions`` and ``BuiltinOptions2``) as (union field, table,
    [(field, value)]) for the table writer, when each table sets only scalars (most ops); None
    otherwise: the object API packs them. The options of a loaded op nothing touched are read
    from the file (no object API); the same values held as objects give the same bytes."""
    found: list[tuple[str, str, Mapping[str, Any]]] = []
    lazy = op._lazy_options
    if lazy is not None:
        buf, position, position2 = lazy
        for at, tag, union in (
            (position, op.options_type, "BuiltinOptions"),
            (position2, op.options2_type, "BuiltinOptions2"),
        ):
            if at is None:
                continue
            table = option_tables.union_table(union, tag)
            values = None if table is None else option_tables.decode_table(buf, at, table)
            if table is None or values is None:
                return None
            found.append((union, table, values))
    else:
        for value, union in ((op.options, "BuiltinOptions"), (op.options2, "BuiltinOptions2")):
            if value is not None:
                found.append((union, type(value).__name__.removesuffix("T"), vars(value)))
    result = []
    for union, table, values in found:
        scalars, others = option_tables.scalar_fields(table)
        if not scalars and not others:
            return None  # no such table: let the object API say so
        if any(values.get(attribute) is not None for attribute in others):
            return None  # a vector or string is set (QuantSpec, a composite's name...)
        result.append((union, table, [(field, values[attribute]) for field, attribute in scalars]))
    return result


def _required(tensor: Tensor | None, index: int) -> Tensor:
    if tensor is None:
        raise ValueError(
            f"tensor index {index} where a tensor is required (only op inputs may be omitted)"
        )
    return tensor


# --------------------------------------------------------------------------------------------
# save
# --------------------------------------------------------------------------------------------
def dumps(model: Model, *, external_buffers: bool | None = None) -> bytes:
    """Serialize ``model`` to ``.tflite`` bytes (``external_buffers`` as for :func:`save`)."""
    return b"".join(_serialize(model, external_buffers))


def save(
    model: Model, path: str | os.PathLike[str], *, external_buffers: bool | None = None
) -> Path:
    """Write ``model`` to ``path`` atomically (a temp file in the same folder, then rename).

    ``external_buffers``: write the tensors' constant data after the flatbuffer, each at a
    16-byte aligned absolute offset named by its ``Buffer``'s ``offset`` and ``size`` (LiteRT's
    layout for models over 2 GB; metadata stays inside). ``None`` (the default) chooses that
    layout when the model was loaded from it or does not fit in a 2 GB flatbuffer otherwise.
    """
    return write_atomic(path, _serialize(model, external_buffers))


Chunks = list[bytes | bytearray | memoryview]


def _serialize(model: Model, external: bool | None = None) -> Chunks:
    """The file as chunks: the flatbuffer tables, then each buffer's data, 16-byte aligned
    (inside the flatbuffer, or after it in the large-model layout: ``external``, see ``save``).

    Constant data is never copied: it is written straight from its views, after the tables.
    """
    if external is None:
        external = model.appended_buffers
        if not external:
            chunks = _inline_file(*_Writer(model).write())
            if chunks is not None:
                return chunks
            external = True  # too large for one flatbuffer: the data goes after it
    if not external:
        head, data_fields = _Writer(model).write()
        chunks = _inline_file(head, data_fields)
        if chunks is None:
            size = _inline_size(head, data_fields)
            raise TflkitError(
                f"model of {size / 2**30:.2f} GiB does not fit in one flatbuffer (2 GiB at "
                "most): save it with external buffers"
            )
        return chunks
    writer = _Writer(model, appended=True)
    head, data_fields = writer.write()
    return _appended_file(head, data_fields, writer.appended_fields)


def _inline_size(head: bytearray, data_fields: list[tuple[int, np.ndarray]]) -> int:
    """The size of the flatbuffer :func:`_inline_file` makes of these tables and data."""
    written = 0
    for _at, data in data_fields:
        written += (_DATA_PREFIX_PHASE - written) % _BUFFER_ALIGNMENT + 4 + data.nbytes
    return len(head) + written


def _inline_file(head: bytearray, data_fields: list[tuple[int, np.ndarray]]) -> Chunks | None:
    """The chunks of a flatbuffer whose buffers hold their data as ubyte vectors, after the
    tables (each length prefix at 12 mod 16, so the data is 16-byte aligned); None when that
    would not fit in one flatbuffer (2 GiB - 1 bytes)."""
    if _inline_size(head, data_fields) > _MAX_FLATBUFFER:
        return None
    chunks: Chunks = [head]
    written = 0
    for at, data in data_fields:
        start = written + (_DATA_PREFIX_PHASE - written) % _BUFFER_ALIGNMENT
        struct.pack_into("<I", head, at, len(head) + start - at)
        chunks.append(bytes(start - written) + struct.pack("<I", data.nbytes))
        chunks.append(memoryview(data).cast("B"))
        written = start + 4 + data.nbytes
    return chunks


def _appended_file(
    head: bytearray,
    data_fields: list[tuple[int, np.ndarray]],
    appended: list[tuple[int, np.ndarray]],
) -> Chunks:
    """LiteRT's large-model layout: the flatbuffer (with any data it keeps inline), padded to
    16 bytes, then each appended buffer at a 16-byte aligned absolute offset; the ``offset``
    and ``size`` of its ``Buffer`` table (written as the placeholders 1, 1) are patched."""
    size = _inline_size(head, data_fields)
    chunks = _inline_file(head, data_fields)
    if chunks is None:
        raise TflkitError(
            f"the flatbuffer part alone is {size / 2**30:.2f} GiB, over the 2 GiB a flatbuffer "
            "can hold"
        )
    offset_at = _writer.scalar_at("Buffer", _APPENDED_SCALARS, "Offset")
    size_at = _writer.scalar_at("Buffer", _APPENDED_SCALARS, "Size")
    written = size
    for table, data in appended:
        start = written + (-written) % _BUFFER_ALIGNMENT
        struct.pack_into("<Q", head, table + offset_at, start)
        struct.pack_into("<Q", head, table + size_at, data.nbytes)
        chunks.append(bytes(start - written))
        chunks.append(memoryview(data).cast("B"))
        written = start + data.nbytes
    chunks.append(bytes((-written) % _BUFFER_ALIGNMENT))
    return chunks


class _Writer:
    """Assigns indices (buffers, opcodes, tensors) and writes the tables front to back."""

    def __init__(self, model: Model, *, appended: bool = False) -> None:
        self.model = model
        #: Write tensors' constant data after the flatbuffer (the large-model layout).
        self.appended = appended
        self.tensor_buffers: set[int] = set()
        #: (Buffer table position, data) of every buffer whose data goes after the flatbuffer.
        self.appended_fields: list[tuple[int, np.ndarray]] = []
        self.buffers: list[Buffer] = []
        self.buffer_index: dict[int, int] = {}
        self.opcode_index: dict[OpCode, int] = {}
        self.out = _writer.Writer()
        #: (Buffer.data field position, data) of every buffer with data, in buffer order.
        self.data_fields: list[tuple[int, np.ndarray]] = []

    def write(self) -> tuple[bytearray, list[tuple[int, np.ndarray]]]:
        """The tables (buffer data fields still unset) and where each buffer's data goes."""
        model, out = self.model, self.out
        self._index_buffers()
        self._index_opcodes()
        offsets = ["operatorCodes", "subgraphs", "buffers"]
        if model.description is not None:
            offsets.append("description")
        if model.metadata_buffer is not None:
            offsets.append("metadataBuffer")
        for name, present in (
            ("metadata", model.metadata),
            ("signatureDefs", model.signatures),
            ("externalBufferGroups", model.external_buffer_groups is not None),
            ("externalBuffers", model.external_buffers is not None),
        ):
            if present:
                offsets.append(name)
        root, at = out.table("Model", [("Version", model.version)], _names("Model", offsets))
        items = list(self.opcode_index)
        self._tables(at["OperatorCodes"], items, self._opcode)
        self._tables(at["Subgraphs"], model.subgraphs, self._subgraph)
        if model.description is not None:
            out.patch(at["Description"], out.string(model.description))
        self._tables(at["Buffers"], self.buffers, self._buffer)
        if model.metadata_buffer is not None:
            indices = [self.buffer_index[id(b)] for b in model.metadata_buffer]
            out.patch(at["MetadataBuffer"], out.vector("i", indices))
        if model.metadata:
            self._tables(at["Metadata"], model.metadata, self._metadata)
        if model.signatures:
            self._tables(at["SignatureDefs"], model.signatures, self._signature)
        for name, objects in (
            ("ExternalBufferGroups", model.external_buffer_groups),
            ("ExternalBuffers", model.external_buffers),
        ):
            if objects is not None:
                for element, obj in zip(out.offsets(len(objects)), objects, strict=True):
                    out.later(element, obj)
                out.patch(at[name], len(out.buf) - 4 * len(objects) - 4)
        return out.finish(root, schema.FILE_IDENTIFIER, _BUFFER_ALIGNMENT), self.data_fields

    def _tables(self, at: int, items: list[Any], write: Any) -> None:
        """A vector of tables at the offset field ``at``, each written by ``write``."""
        out = self.out
        elements = out.offsets(len(items))
        out.patch(at, elements[0] - 4 if elements else len(out.buf) - 4)
        for element, item in zip(elements, items, strict=True):
            out.patch(element, write(item))

    def _index_buffers(self) -> None:
        self.buffers = [Buffer(None)]
        ordered = [*self.model.buffers]
        used = [t.buffer for sg in self.model.subgraphs for t in sg.tensors if t.buffer]
        if self.appended:
            self.tensor_buffers = {id(b) for b in used}
        ordered += used
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

    def _opcode(self, code: OpCode) -> int:
        out = self.out
        deprecated = min(code.builtin_code, schema.PLACEHOLDER_FOR_GREATER_OP_CODES)
        scalars = [
            ("DeprecatedBuiltinCode", deprecated),
            ("Version", code.version),
            ("BuiltinCode", code.builtin_code),
        ]
        custom = ["CustomCode"] if code.custom_code is not None else []
        pos, at = out.table("OperatorCode", scalars, custom)
        if custom:
            out.patch(at["CustomCode"], out.string(code.custom_code or ""))
        return pos

    def _buffer(self, buffer: Buffer) -> int:
        if buffer.data is None:
            return self.out.table("Buffer", (), ())[0]
        if buffer.data.nbytes and id(buffer) in self.tensor_buffers:
            pos = self.out.table("Buffer", _APPENDED_PLACEHOLDER, ())[0]
            self.appended_fields.append((pos, buffer.data))
            return pos
        pos, at = self.out.table("Buffer", (), ["Data"])
        self.data_fields.append((at["Data"], buffer.data))
        return pos

    def _metadata(self, entry: Metadata) -> int:
        out = self.out
        pos, at = out.table("Metadata", [("Buffer", self.buffer_index[id(entry.buffer)])], ["Name"])
        out.patch(at["Name"], out.string(entry.name))
        return pos

    def _subgraph(self, subgraph: Subgraph) -> int:
        out = self.out
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

        offsets = ["Tensors", "Inputs", "Outputs", "Operators"]
        if subgraph.name:
            offsets.append("Name")
        scalars = [("DebugMetadataIndex", subgraph.debug_metadata_index)]
        pos, at = out.table("SubGraph", scalars, offsets)
        self._tables(at["Tensors"], subgraph.tensors, self._tensor)
        out.patch(at["Inputs"], out.vector("i", map(index_of, subgraph.inputs)))
        out.patch(at["Outputs"], out.vector("i", map(index_of, subgraph.outputs)))
        self._tables(at["Operators"], subgraph.ops, lambda op: self._op(op, index_of))
        if subgraph.name:
            out.patch(at["Name"], out.string(subgraph.name))
        return pos

    def _tensor(self, tensor: Tensor) -> int:
        out = self.out
        buffer = 0 if tensor.buffer is None else self.buffer_index[id(tensor.buffer)]
        scalars = [
            ("Type", tensor.type),
            ("Buffer", buffer),
            ("IsVariable", bool(tensor.is_variable)),
            ("HasRank", bool(tensor.has_rank)),
            ("ExternalBuffer", tensor.external_buffer),
        ]
        offsets = ["Shape", "Name"]
        for name, value in (
            ("Quantization", tensor.quantization),
            ("Sparsity", tensor.sparsity),
            ("ShapeSignature", tensor.shape_signature),
            ("VariantTensors", tensor.variant_tensors),
        ):
            if value is not None:
                offsets.append(name)
        pos, at = out.table("Tensor", scalars, offsets)
        out.patch(at["Shape"], out.vector("i", tensor.shape))
        out.patch(at["Name"], out.string(tensor.name))
        if tensor.quantization is not None:
            out.later(at["Quantization"], tensor.quantization)
        if tensor.sparsity is not None:
            out.later(at["Sparsity"], tensor.sparsity)
        if tensor.shape_signature is not None:
            out.patch(at["ShapeSignature"], out.vector("i", tensor.shape_signature))
        if tensor.variant_tensors is not None:
            elements = out.offsets(len(tensor.variant_tensors))
            out.patch(at["VariantTensors"], len(out.buf) - 4 * len(elements) - 4)
            for element, variant in zip(elements, tensor.variant_tensors, strict=True):
                out.later(element, variant)
        return pos

    def _op(self, op: Op, index_of: Any) -> int:
        out = self.out
        stored = _scalar_options(op)
        if stored is not None:  # the table writer's, not the object API's
            options = options2 = None
            present = {name for name, _table, _fields in stored}
        else:
            options, options2 = op.options, op.options2
            held = (("BuiltinOptions", options), ("BuiltinOptions2", options2))
            present = {name for name, value in held if value is not None}
        scalars = [
            ("OpcodeIndex", self.opcode_index[op.opcode]),
            ("BuiltinOptionsType", op.options_type),
            ("CustomOptionsFormat", op.custom_options_format),
            ("BuiltinOptions2Type", op.options2_type if "BuiltinOptions2" in present else 0),
            ("DebugMetadataIndex", op.debug_metadata_index),
        ]
        offset_fields = {
            "BuiltinOptions": "BuiltinOptions" in present,
            "CustomOptions": op.custom_options is not None,
            "MutatingVariableInputs": op.mutating_variable_inputs is not None,
            "Intermediates": bool(op.intermediates),
            "BuiltinOptions2": "BuiltinOptions2" in present,
        }
        offsets = ["Inputs", "Outputs", *(name for name, has in offset_fields.items() if has)]
        pos, at = out.table("Operator", scalars, offsets)
        for name, table, fields in stored or ():
            out.patch(at[name], out.table(table, fields, ())[0])
        out.patch(at["Inputs"], out.vector("i", map(index_of, op.inputs)))
        out.patch(at["Outputs"], out.vector("i", map(index_of, op.outputs)))
        if options is not None:
            out.later(at["BuiltinOptions"], options)
        if op.custom_options is not None:
            out.patch(at["CustomOptions"], out.raw_vector(bytes(op.custom_options)))
        if op.mutating_variable_inputs is not None:
            values = [bool(v) for v in op.mutating_variable_inputs]
            out.patch(at["MutatingVariableInputs"], out.vector("?", values))
        if op.intermediates:
            out.patch(at["Intermediates"], out.vector("i", map(index_of, op.intermediates)))
        if options2 is not None:
            out.later(at["BuiltinOptions2"], options2)
        return pos

    def _signature(self, signature: SignatureDef) -> int:
        out = self.out
        subgraph = signature.subgraph
        scalars = [("SubgraphIndex", subgraph.index)]
        pos, at = out.table("SignatureDef", scalars, ["Inputs", "Outputs", "SignatureKey"])
        for name, mapping in (("Inputs", signature.inputs), ("Outputs", signature.outputs)):
            self._tables(at[name], list(mapping.items()), self._tensor_map)
        out.patch(at["SignatureKey"], out.string(signature.key))
        return pos

    def _tensor_map(self, item: tuple[str, Tensor]) -> int:
        out = self.out
        name, tensor = item
        pos, at = out.table("TensorMap", [("TensorIndex", tensor.index)], ["Name"])
        out.patch(at["Name"], out.string(name))
        return pos


def _names(table: str, fields: list[str]) -> list[str]:
    """Object-API attribute names (``operatorCodes``) as schema field names (``OperatorCodes``)."""
    return [name[:1].upper() + name[1:] for name in fields]
