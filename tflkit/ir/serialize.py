"""IR -> bytes: the only place that turns tensors and ops into flatbuffer indices.

Saving writes only the tables (front to back, ``tflkit.ir._writer``); buffer data goes to the
file straight from its views, after the tables, 16-byte aligned like the TFLite converter's
output. Models over 2 GB use LiteRT's large-model layout (see ``tflkit.ir.serde``): ``save``
writes it when asked, when the model was loaded from it, or when it would not fit in 2 GB
otherwise.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tflkit.errors import TflkitError
from tflkit.fsio import write_atomic
from tflkit.ir import _writer, option_tables, schema
from tflkit.ir.graph import Buffer, Metadata, Model, Op, OpCode, SignatureDef, Subgraph, Tensor

if TYPE_CHECKING:
    import numpy as np

_BUFFER_ALIGNMENT = 16
#: Data region offsets of length prefixes are 12 mod 16, so the data itself is 16-byte aligned.
_DATA_PREFIX_PHASE = 12
_MAX_FLATBUFFER = 2**31 - 1
#: ``Buffer`` fields of data stored after the flatbuffer, written with LiteRT's placeholder
#: values (offset 1, size 1: "filled in once the data is placed") and patched afterwards.
_APPENDED_PLACEHOLDER = (("Offset", 1), ("Size", 1))
_APPENDED_SCALARS = ("Offset", "Size")


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
