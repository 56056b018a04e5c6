"""Bytes <-> IR: ``load`` here, ``dumps`` and ``save`` in ``tflkit.ir.serialize`` (re-exported).

Loading keeps constant data as read-only views of the file's bytes (no copy; a numpy view once
read as an array). A model loaded from a path maps the file read-only: only the tables are
read, and weights are paged in when something uses them (like LiteRT's own ``BuildFromFile``).
As with any mapping, changing the file in place while the model is in use is not supported;
tflkit itself never does (its writes replace files whole, see ``tflkit.fsio``).

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
from pathlib import Path
from typing import Any

from tflkit.errors import InvalidModelError, ModelLoadError
from tflkit.ir import field_slots, schema, structure
from tflkit.ir._tables import Fields
from tflkit.ir.graph import Buffer, Metadata, Model, Op, OpCode, SignatureDef, Subgraph, Tensor
from tflkit.ir.serialize import dumps, save
from tflkit.ir.walk import OpFacts, TensorFacts

__all__ = ["ModelBytes", "ModelSource", "check_header", "dumps", "load", "read_model_bytes", "save"]

ModelSource = str | os.PathLike[str] | bytes | bytearray | memoryview | mmap.mmap
#: What a model's bytes are held in: in memory, or a read-only map of its file.
ModelBytes = bytes | bytearray | memoryview | mmap.mmap


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
        version = root.u32(field_slots.slots().Model_Version)
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

    Table fields are read by their schema names (``field_slots.slots()``, from the generated
    ``schema_layout``); tensors and ops come from what the verifier read (``walk``); constant
    data stays a read-only view of the bytes.
    """

    def __init__(self, data: ModelBytes, walk: structure.Walk) -> None:
        self.data = data
        #: What the verifier read of tensors and ops: they are built from it.
        self.walk = walk
        #: Whether a buffer keeps its data after the flatbuffer (``Buffer.offset`` > 1).
        self.appended = False
        self.file_view = memoryview(data).toreadonly()
        self.s = field_slots.slots()
        #: A table whose vtable ends before this slot holds none of the fields most leave out
        #: (is_variable, has_rank...; custom_options_format, mutating_variable_inputs...).
        self.rare_tensor_slot = min(
            self.s.Tensor_IsVariable,
            self.s.Tensor_HasRank,
            self.s.Tensor_VariantTensors,
            self.s.Tensor_ExternalBuffer,
        )
        self.rare_op_slot = min(
            self.s.Operator_CustomOptionsFormat,
            self.s.Operator_MutatingVariableInputs,
            self.s.Operator_DebugMetadataIndex,
            self.s.Operator_LargeCustomOptionsOffset,
            self.s.Operator_LargeCustomOptionsSize,
        )

    def read(self, root: Fields) -> Model:
        s = self.s
        model = Model(description=None)
        model.version = root.u32(s.Model_Version)
        model.description = root.string(s.Model_Description) or None
        buffers = [self._buffer(p) for p in root.table_vector(s.Model_Buffers)]
        sentinel = buffers[0] if buffers and buffers[0].nbytes == 0 else None
        model.buffers = [b for b in buffers if b is not sentinel]
        model.appended_buffers = self.appended

        def buffer_at(index: int) -> Buffer | None:
            if index == 0 and sentinel is not None:
                return None
            if not 0 <= index < len(buffers):
                raise ValueError(f"buffer index {index} out of range ({len(buffers)} buffers)")
            return buffers[index]

        codes = root.table_vector(s.Model_OperatorCodes)
        opcodes = [self._opcode(Fields(self.data, p)) for p in codes]
        model.opcode_order = list(dict.fromkeys(opcodes))
        for index, position in enumerate(root.table_vector(s.Model_Subgraphs)):
            model.subgraphs.append(
                self._subgraph(Fields(self.data, position), index, model, opcodes, buffer_at)
            )
        for position in root.table_vector(s.Model_Metadata):
            entry = Fields(self.data, position)
            buffer = buffer_at(entry.u32(s.Metadata_Buffer)) or Buffer(b"")
            model.metadata.append(Metadata(entry.string(s.Metadata_Name) or "", buffer))
        metadata_buffer = root.ints(s.Model_MetadataBuffer)
        if metadata_buffer is not None:
            # Deprecated and ignored by LiteRT; flatbuffer_utils.write_model renumbers buffers
            # without updating it, so entries naming no buffer are dropped, not an error.
            model.metadata_buffer = [
                buffer_at(i) or Buffer(b"") for i in metadata_buffer if 0 <= i < len(buffers)
            ]
        for position in root.table_vector(s.Model_SignatureDefs):
            model.signatures.append(self._signature(Fields(self.data, position), model.subgraphs))
        # external buffer groups and external buffers are rare: read by the object API
        if root.has(s.Model_ExternalBufferGroups):
            model.external_buffer_groups = [
                schema.fb.ExternalBufferGroupT.InitFromBuf(self.data, p)
                for p in root.table_vector(s.Model_ExternalBufferGroups)
            ]
        if root.has(s.Model_ExternalBuffers):
            model.external_buffers = [
                schema.fb.ExternalBufferT.InitFromBuf(self.data, p)
                for p in root.table_vector(s.Model_ExternalBuffers)
            ]
        return model

    def _buffer(self, position: int) -> Buffer:
        s = self.s
        fields = Fields(self.data, position)
        offset, size = fields.u64(s.Buffer_Offset), fields.u64(s.Buffer_Size)
        if offset > 1:
            # Large-model layout: the data lives after the flatbuffer, at an absolute offset.
            self.appended = True
            if offset + size > len(self.file_view):
                raise ValueError(f"buffer data [{offset}, {offset + size}) beyond end of file")
            return Buffer.mapped(self.file_view[offset : offset + size])
        found = fields.vector(s.Buffer_Data)
        if found is None:
            return Buffer(None)
        start, length = found
        if start + length > len(self.file_view):
            raise ValueError("buffer data beyond end of file")
        return Buffer.mapped(self.file_view[start : start + length])

    def _opcode(self, fields: Fields) -> OpCode:
        s = self.s
        builtin = max(
            fields.i32(s.OperatorCode_BuiltinCode), fields.i8(s.OperatorCode_DeprecatedBuiltinCode)
        )
        custom = fields.raw(s.OperatorCode_CustomCode)
        version = fields.i32(s.OperatorCode_Version, 1)
        return OpCode(builtin, custom.decode() if custom is not None else None, version)

    def _subgraph(
        self, fields: Fields, index: int, model: Model, opcodes: list[OpCode], buffer_at: Any
    ) -> Subgraph:
        s = self.s
        subgraph = Subgraph(fields.string(s.SubGraph_Name) or "", model)
        subgraph.debug_metadata_index = fields.i32(s.SubGraph_DebugMetadataIndex, -1)
        tensors = [self._tensor(facts, buffer_at) for facts in self.walk.tensors[index]]
        for tensor in tensors:
            tensor.subgraph = subgraph

        def tensor_at(index: int) -> Tensor | None:
            if index == -1:
                return None
            if not 0 <= index < len(tensors):
                raise ValueError(f"tensor index {index} out of range ({len(tensors)} tensors)")
            return tensors[index]

        inputs = [_required(tensor_at(i), i) for i in fields.ints(s.SubGraph_Inputs) or ()]
        outputs = [_required(tensor_at(i), i) for i in fields.ints(s.SubGraph_Outputs) or ()]
        ops = []
        for facts in self.walk.ops[index]:
            op = self._op(facts, opcodes, tensors)
            op.subgraph = subgraph
            ops.append(op)
        subgraph._set_loaded(tensors, ops, inputs, outputs)
        return subgraph

    def _tensor(self, facts: TensorFacts, buffer_at: Any) -> Tensor:
        s = self.s
        position, _size, present = facts.table
        tensor = Tensor(
            facts.name,
            facts.shape,
            facts.type,
            buffer=buffer_at(facts.buffer),
            shape_signature=facts.shape_signature,
        )
        if len(present) > self.rare_tensor_slot:  # fields most tensors leave out
            fields = Fields.of(self.data, position, present)
            tensor.is_variable = bool(fields.u8(s.Tensor_IsVariable))
            tensor.has_rank = bool(fields.u8(s.Tensor_HasRank))
            tensor.external_buffer = fields.u32(s.Tensor_ExternalBuffer)
            if fields.has(s.Tensor_VariantTensors):
                tensor.variant_tensors = [
                    schema.fb.VariantSubTypeT.InitFromBuf(self.data, p)
                    for p in fields.table_vector(s.Tensor_VariantTensors)
                ]
        if facts.sparsity is not None:
            sparsity = schema.fb.SparsityParametersT.InitFromBuf(self.data, facts.sparsity)
            tensor.sparsity = sparsity
        if facts.quantization is not None:  # decoded when first read (Tensor.quantization)
            tensor._lazy_quantization = (self.data, facts.quantization)
        return tensor

    def _op(self, facts: OpFacts, opcodes: list[OpCode], tensors: list[Tensor]) -> Op:
        """The op the walk read (its tensor indices are checked: -1 only among inputs)."""
        s = self.s
        position, _size, present = facts.table
        (options_type, options_position), (options2_type, options2_position) = (
            facts.options,
            facts.options2,
        )
        op = Op(
            opcodes[facts.opcode],
            [None if i == -1 else tensors[i] for i in facts.inputs],
            [tensors[i] for i in facts.outputs],
            options_type=options_type,
            options2_type=options2_type,
            intermediates=[tensors[i] for i in facts.intermediates],
        )
        custom = facts.custom_options
        if custom is not None:
            op.custom_options = bytes(self.file_view[custom[0] : custom[0] + custom[1]])
        if len(present) > self.rare_op_slot:  # fields most ops leave out
            fields = Fields.of(self.data, position, present)
            op.custom_options_format = fields.i8(s.Operator_CustomOptionsFormat)
            op.mutating_variable_inputs = fields.bools(s.Operator_MutatingVariableInputs)
            op.debug_metadata_index = fields.i32(s.Operator_DebugMetadataIndex, -1)
            large_offset = fields.u64(s.Operator_LargeCustomOptionsOffset)
            large_size = fields.u64(s.Operator_LargeCustomOptionsSize)
            if large_offset > 1:
                if large_offset + large_size > len(self.file_view):
                    raise ValueError("custom options beyond end of file")
                end = large_offset + large_size
                op.custom_options = self.file_view[large_offset:end].tobytes()
        if options_position is not None or options2_position is not None:
            op._lazy_options = (self.data, options_position, options2_position)
        return op

    def _signature(self, fields: Fields, subgraphs: list[Subgraph]) -> SignatureDef:
        s = self.s
        index = fields.u32(s.SignatureDef_SubgraphIndex)
        if not 0 <= index < len(subgraphs):
            raise ValueError(f"signature names subgraph {index} of {len(subgraphs)}")
        subgraph = subgraphs[index]

        def tensor_map(slot: int) -> dict[str, Tensor]:
            mapping = {}
            for position in fields.table_vector(slot):
                entry = Fields(self.data, position)
                at = entry.u32(s.TensorMap_TensorIndex)
                if not 0 <= at < len(subgraph.tensors):
                    raise ValueError(f"signature tensor index {at} out of range")
                mapping[entry.string(s.TensorMap_Name) or ""] = subgraph.tensors[at]
            return mapping

        key = fields.string(s.SignatureDef_SignatureKey) or ""
        inputs, outputs = tensor_map(s.SignatureDef_Inputs), tensor_map(s.SignatureDef_Outputs)
        return SignatureDef(key, subgraph, inputs, outputs)


def _required(tensor: Tensor | None, index: int) -> Tensor:
    if tensor is None:
        raise ValueError(
            f"tensor index {index} where a tensor is required (only op inputs may be omitted)"
        )
    return tensor
