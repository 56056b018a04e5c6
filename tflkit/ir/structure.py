"""Structural verifier of a ``.tflite`` flatbuffer, run before any native code sees the bytes.

A file from the internet can crash a C++ loader or make it allocate without bound. This module
walks the flatbuffer in Python (memory-safe) and checks, in one pass over the tables:

* every table, vtable, vector and string lies inside the file (and strings end with a NUL);
* every index is in range: opcode, tensor, buffer, subgraph (signatures, control flow),
  metadata; union types name a known table;
* tensors have a known type, sane dimensions, and constant data of the size their shape needs;
  a tensor larger than this machine's memory (or the process's memory limit) is refused before
  anything allocates it;
* each tensor has at most one producer, every op reads only what earlier ops made (so no
  cycles), and subgraphs do not call themselves through IF / WHILE / CALL_ONCE.

:func:`verify_bytes` raises :class:`~tflkit.errors.ModelLoadError` with one line naming what is
wrong and where. The walk is O(tables + index vectors), never O(bytes of weights).
"""

from __future__ import annotations

import functools
import os
import struct
from collections.abc import Callable
from typing import Any

from tflkit.errors import ModelLoadError
from tflkit.ir import field_slots, schema
from tflkit.ir.walk import OpFacts, TensorFacts, Walk

__all__ = ["StructureError", "Walk", "max_tensor_bytes", "verify_bytes"]

_I32 = struct.Struct("<i").unpack_from
_U32 = struct.Struct("<I").unpack_from
_U16 = struct.Struct("<H").unpack_from
_CUSTOM = schema.BuiltinOperator.CUSTOM


@functools.cache
def _format(code: str, count: int) -> Callable[..., tuple[int, ...]]:
    return struct.Struct(f"<{count}{code}").unpack_from


class StructureError(ModelLoadError):
    """The bytes are not a sound TFLite flatbuffer; the message names what and where."""


def max_tensor_bytes() -> int:
    """The largest tensor native code may allocate here: physical memory, or less if the
    process's address space or data segment is limited (``ulimit -v`` / ``-d``)."""
    limits = []
    try:
        limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        limits.append(1 << 40)
    try:
        import resource

        for which in (resource.RLIMIT_AS, resource.RLIMIT_DATA):
            soft = resource.getrlimit(which)[0]
            if soft != resource.RLIM_INFINITY and soft > 0:
                limits.append(soft)
    except (ImportError, OSError, ValueError):  # pragma: no cover - non-POSIX
        pass
    return min(limits)


class _Fail(Exception):
    """Internal: carries the message up to verify_bytes."""


def _past_end(message: str, file_end: bool = False) -> _Fail:
    """A failure where something points past the end: the file is likely truncated
    (``file_end``: data stored after the flatbuffer reaches past the end of the file)."""
    failure = _Fail(message)
    failure.truncated = True  # type: ignore[attr-defined]
    failure.file_end = file_end  # type: ignore[attr-defined]
    return failure


def verify_bytes(data: bytes | bytearray | memoryview, label: str = "<bytes>") -> Walk:
    """Raise :class:`StructureError` unless ``data`` is a structurally sound TFLite model;
    returns what the walk read of the tensors and ops."""
    walker = _Walker(data)
    try:
        return walker.model()
    except _Fail as exc:
        truncated = getattr(exc, "truncated", False)
        message = str(exc)
        if truncated and walker.n < walker.size and not getattr(exc, "file_end", False):
            # past the flatbuffer part (into data stored after it), not past the file
            truncated = False
            message += f" ({walker.flatbuffer_end})"
        what = "truncated or corrupt" if truncated else "corrupt"
        raise StructureError(f"{label}: {what} TFLite model: {message}") from None


#: The little-endian reader of each ``struct`` code of ``schema_layout``.
_SCALARS = {code: struct.Struct("<" + code).unpack_from for code in field_slots.SIZES}


# --- the walk -------------------------------------------------------------------------------
#: Where a problem is: a string, or ("format {} {}", *parts) formatted only on failure.
Where = str | tuple[Any, ...]
#: A table as the walk holds it: (its position, its size, its vtable's field offsets).
Table = tuple[int, int, tuple[int, ...]]


def _w(where: Where) -> str:
    if isinstance(where, str):
        return where
    return where[0].format(*(_w(p) if isinstance(p, tuple) else p for p in where[1:]))


#: A flatbuffer addresses at most 2 GiB - 1 bytes; LiteRT verifies only that much of a file.
MAX_FLATBUFFER = 2**31 - 1


class _Walker:
    """One pass over the tables. ``n`` is where the flatbuffer part must end: the file's end,
    or, in LiteRT's large-model layout, where the first buffer's data appended after the
    flatbuffer starts (tables never overlap that data), and never past 2 GiB - 1."""

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self.buf = data
        self.size = len(data)
        self.n = min(self.size, MAX_FLATBUFFER)
        self.flatbuffer_end = f"a flatbuffer ends by byte {MAX_FLATBUFFER}"
        self.limit = max_tensor_bytes()
        self.s = field_slots.slots()
        #: Each vtable read so far, by position: (inline size, field offsets).
        self.vtables: dict[int, tuple[int, tuple[int, ...]]] = {}
        s = self.s
        #: An op whose vtable ends before this slot holds none of the fields most ops leave out
        #: (intermediates, mutating inputs, large custom options, the second options union), and
        #: their checks are skipped: 187 of the 10,890 ops of the 137 test-cache models reach it.
        self.rare_op_slot = min(
            s.Operator_MutatingVariableInputs,
            s.Operator_Intermediates,
            s.Operator_LargeCustomOptionsOffset,
            s.Operator_LargeCustomOptionsSize,
            s.Operator_BuiltinOptions2Type,
            s.Operator_BuiltinOptions2,
        )

    # -- primitives (a table is (position, inline size, vtable slots)) -------------------------
    def table(self, pos: int, where: Where) -> Table:
        n = self.n
        if pos < 0 or pos + 4 > n:
            raise _past_end(f"{_w(where)}: table at byte {pos} lies outside the file ({n} bytes)")
        vtable = pos - _I32(self.buf, pos)[0]
        found = self.vtables.get(vtable)
        if found is None:
            found = self.vtables[vtable] = self.vtable(vtable, pos, where)
        tsize, slots = found
        if pos + tsize > n:
            raise _past_end(f"{_w(where)}: table at byte {pos} runs past the end of the file")
        return pos, tsize, slots

    def vtable(self, vtable: int, pos: int, where: Where) -> tuple[int, tuple[int, ...]]:
        """The inline size and field offsets of the table layout at ``vtable``, checked once:
        tables of one layout share it (the 4,001 tensors of ``bench/ir_large.py --layers 800``
        have two)."""
        n = self.n
        if vtable < 0 or vtable + 4 > n:
            raise _past_end(f"{_w(where)}: vtable at byte {vtable} lies outside the file")
        vsize, tsize = _U16(self.buf, vtable)[0], _U16(self.buf, vtable + 2)[0]
        if vsize < 4 or vsize % 2 or vtable + vsize > n:
            raise _Fail(f"{_w(where)}: vtable at byte {vtable} has a bad size ({vsize})")
        if tsize < 4:
            raise _past_end(f"{_w(where)}: table at byte {pos} runs past the end of the file")
        count = (vsize - 4) // 2
        slots = _format("H", count)(self.buf, vtable + 4) if count else ()
        if slots and max(slots) >= tsize:
            raise _Fail(f"{_w(where)}: a field lies outside its table (at byte {pos})")
        return tsize, slots

    def scalar(self, t: Table, slot: int, code: str) -> int:
        slots = t[2]
        offset = slots[slot] if slot < len(slots) else 0
        if not offset:
            return 0
        if offset + field_slots.SIZES[code] > t[1]:
            raise _Fail(f"field {slot} of the table at byte {t[0]} runs past its table")
        return _SCALARS[code](self.buf, t[0] + offset)[0]

    def target(self, t: Table, slot: int, where: Where) -> int | None:
        """Where the offset field in ``slot`` points, or None when absent."""
        slots = t[2]
        offset = slots[slot] if slot < len(slots) else 0
        if not offset:
            return None
        if offset + 4 > t[1]:
            raise _Fail(f"{_w(where)}: offset field runs past its table")
        at = t[0] + offset
        to = at + _U32(self.buf, at)[0]
        if to + 4 > self.n:
            raise _past_end(
                f"{_w(where)}: points to byte {to}, past the end of the file ({self.n} bytes)"
            )
        return to

    def vector(self, t: Table, slot: int, size: int, where: Where) -> tuple[int, int] | None:
        """(start, length) of a vector of ``size``-byte elements, bounds-checked."""
        slots = t[2]
        offset = slots[slot] if slot < len(slots) else 0
        if not offset:
            return None
        at = t[0] + offset
        if offset + 4 <= t[1]:  # the checks of target(), inline: this runs for every field
            to = at + _U32(self.buf, at)[0]
            if to + 4 <= self.n:
                length = _U32(self.buf, to)[0]
                if to + 4 + length * size <= self.n:
                    return to + 4, length
                raise _past_end(
                    f"{_w(where)}: vector of {length} elements at byte {to} runs past the end "
                    f"of the file ({self.n} bytes)"
                )
        self.target(t, slot, where)  # raises with the message
        raise AssertionError("unreachable")

    def ints(self, t: Table, slot: int, where: Where) -> tuple[int, ...]:
        found = self.vector(t, slot, 4, where)
        if found is None or not found[1]:
            return ()
        return _format("i", found[1])(self.buf, found[0])

    def string(self, t: Table, slot: int, where: Where) -> str | None:
        """Checks the string in ``slot``; returns it (None when absent; bad UTF-8 replaced)."""
        found = self.vector(t, slot, 1, where)
        if found is None:
            return None
        start, length = found
        if start + length >= self.n or self.buf[start + length] != 0:
            raise _Fail(f"{_w(where)}: string at byte {start - 4} is not NUL-terminated")
        return str(self.buf[start : start + length], "utf-8", "replace")

    def tables(self, t: Table, slot: int, where: Where) -> list[Table]:
        found = self.vector(t, slot, 4, where)
        if found is None:
            return []
        start, length = found
        offsets = _format("I", length)(self.buf, start) if length else ()
        return [
            self.table(start + 4 * i + off, ("{}[{}]", where, i)) for i, off in enumerate(offsets)
        ]

    # -- the model -----------------------------------------------------------------------------
    def model(self) -> Walk:
        if self.n < 8:
            raise _Fail(f"file of {self.n} bytes is too small for a flatbuffer")
        s = self.s
        root = self.table(_U32(self.buf, 0)[0], "root table")
        self.appended_start(root)
        root = self.table(root[0], "root table")
        codes = self.tables(root, s.Model_OperatorCodes, "operator_codes")
        opcodes = [self.opcode(t, i) for i, t in enumerate(codes)]
        buffers = [
            self.buffer(t, i) for i, t in enumerate(self.tables(root, s.Model_Buffers, "buffers"))
        ]
        self.string(root, s.Model_Description, "description")
        subgraph_tables = self.tables(root, s.Model_Subgraphs, "subgraphs")
        if not subgraph_tables:
            raise _Fail("the model has no subgraph")
        sizes = [0] * len(subgraph_tables)
        calls: dict[int, set[int]] = {}
        walk = Walk()
        for i, t in enumerate(subgraph_tables):
            tensors, ops, calls[i] = self.subgraph(t, i, opcodes, buffers, len(subgraph_tables))
            sizes[i] = len(tensors)
            walk.tensors.append(tensors)
            walk.ops.append(ops)
        self.call_cycles(calls)
        for i, t in enumerate(self.tables(root, s.Model_Metadata, "metadata")):
            where = f"metadata {i}"
            self.string(t, s.Metadata_Name, where)
            index = self.scalar(t, s.Metadata_Buffer, "I")
            self.index(index, len(buffers), where, "buffer")
        # Deprecated and ignored by LiteRT: flatbuffer_utils leaves stale indices here.
        self.ints(root, s.Model_MetadataBuffer, "metadata_buffer")
        for i, t in enumerate(self.tables(root, s.Model_SignatureDefs, "signature_defs")):
            self.signature(t, i, sizes)
        return walk

    def appended_start(self, root: Table) -> None:
        """Limit the walk to the flatbuffer part: it ends where the first buffer stored
        after it (``offset`` > 1, LiteRT's large-model layout) begins."""
        s = self.s
        starts = [
            self.scalar(t, s.Buffer_Offset, "Q")
            for t in self.tables(root, s.Model_Buffers, "buffers")
        ]
        start = min((o for o in starts if o > 1), default=None)
        if start is not None and start < self.n:
            self.n = start
            self.flatbuffer_end = (
                f"the flatbuffer part must end by byte {start}, where buffer data stored after "
                "it begins"
            )

    @staticmethod
    def index(value: int, count: int, where: Where, noun: str) -> None:
        """Raise unless ``0 <= value < count``: "<where>: <noun> index 7 out of range (3 ...)"."""
        if not 0 <= value < count:
            if value == -1 and noun == "tensor":
                raise _Fail(
                    f"{_w(where)}: tensor index -1 where a tensor is required (only op inputs "
                    "may be omitted)"
                )
            raise _Fail(f"{_w(where)}: {noun} index {value} out of range ({count} {noun}s)")

    def opcode(self, t: Table, i: int) -> int:
        where = ("operator_codes[{}]", i)
        s = self.s
        code = max(
            self.scalar(t, s.OperatorCode_DeprecatedBuiltinCode, "b"),
            self.scalar(t, s.OperatorCode_BuiltinCode, "i"),
        )
        if code not in field_slots.enum_values("BuiltinOperator"):
            raise _Fail(f"{_w(where)}: unknown builtin operator code {code}")
        name = self.string(t, s.OperatorCode_CustomCode, where)
        if code == _CUSTOM and not name:
            raise _Fail(f"{_w(where)}: custom operator without a name")
        return code

    def buffer(self, t: Table, i: int) -> int:
        """Validates buffer ``i``; returns its byte count (-1 when it holds no data)."""
        s = self.s
        offset = self.scalar(t, s.Buffer_Offset, "Q")
        if offset > 1:  # stored after the flatbuffer (offset >= n: see appended_start)
            size = self.scalar(t, s.Buffer_Size, "Q")
            if offset + size > self.size:
                raise _past_end(
                    f"buffers[{i}]: data [{offset}, {offset + size}) lies past the end of the "
                    f"file ({self.size} bytes)",
                    file_end=True,
                )
            return size
        found = self.vector(t, s.Buffer_Data, 1, ("buffers[{}]", i))
        return -1 if found is None else found[1]

    def subgraph(
        self,
        t: Table,
        sg: int,
        opcodes: list[int],
        buffers: list[int],
        subgraph_count: int,
    ) -> tuple[list[TensorFacts], list[OpFacts], set[int]]:
        where = f"subgraph {sg}"
        s = self.s
        self.string(t, s.SubGraph_Name, where)
        tensor_tables = self.tables(t, s.SubGraph_Tensors, f"{where} tensors")
        count = len(tensor_tables)
        tensors = [
            self.tensor(tensor, ("{} tensor {}", where, i), buffers)
            for i, tensor in enumerate(tensor_tables)
        ]
        for slot, kind in ((s.SubGraph_Inputs, "inputs"), (s.SubGraph_Outputs, "outputs")):
            for index in self.ints(t, slot, f"{where} {kind}"):
                self.index(index, count, f"{where} {kind}", "tensor")
        producer: dict[int, int] = {}
        consumers: list[tuple[int, ...]] = []
        calls: set[int] = set()
        ops: list[OpFacts] = []
        names = [schema.op_name(code) for code in opcodes]
        for k, op in enumerate(self.tables(t, s.SubGraph_Operators, f"{where} operators")):
            opcode = self.scalar(op, s.Operator_OpcodeIndex, "I")
            if opcode >= len(names):
                self.index(opcode, len(names), ("{} op {}", where, k), "opcode")
            here: Where = ("{} op {} ({})", where, k, names[opcode])
            # each index list is checked by its extremes; the loops name the culprit
            inputs = self.ints(op, s.Operator_Inputs, ("{} inputs", here))
            if inputs and (min(inputs) < -1 or max(inputs) >= count):
                for slot, index in enumerate(inputs):
                    if not -1 <= index < count:
                        self.index(index, count, ("{} input {}", here, slot), "tensor")
            rare = len(op[2]) > self.rare_op_slot  # else none of the fields most ops leave out
            intermediates = (
                self.ints(op, s.Operator_Intermediates, ("{} intermediates", here)) if rare else ()
            )
            for index in intermediates:
                self.index(index, count, ("{} intermediates", here), "tensor")
            outputs = self.ints(op, s.Operator_Outputs, ("{} outputs", here))
            if outputs and (min(outputs) < 0 or max(outputs) >= count):
                for slot, index in enumerate(outputs):
                    self.index(index, count, ("{} output {}", here, slot), "tensor")
            for slot, index in enumerate(outputs):
                if index in producer:
                    raise _Fail(
                        f"{_w(here)} output {slot}: tensor {index} is also produced by op "
                        f"{producer[index]}"
                    )
                producer[index] = k
            consumers.append(inputs)
            custom = self.vector(op, s.Operator_CustomOptions, 1, ("{} custom_options", here))
            if rare:
                self.rare_fields(op, here)
            unions: list[tuple[int, int | None]] = []
            for type_slot, slot, union in (
                (s.Operator_BuiltinOptionsType, s.Operator_BuiltinOptions, "BuiltinOptions"),
                (s.Operator_BuiltinOptions2Type, s.Operator_BuiltinOptions2, "BuiltinOptions2"),
            ):
                kind = self.scalar(op, type_slot, "B") if rare or union == "BuiltinOptions" else 0
                options = self.union(op, slot, kind, union, here) if kind else None
                unions.append((kind, None if options is None else options[0][0]))
                if kind:
                    expected = field_slots.own_options(opcodes[opcode], union)
                    if expected is not None and expected != kind:
                        members = schema.enum_names(union)
                        raise _Fail(
                            f"{_w(here)}: builtin options are {members[kind]}, not the op's "
                            f"{members[expected]}"
                        )
                    if options is not None and field_slots.subgraph_fields(options[1]):
                        calls |= self.subgraph_refs(*options, here, subgraph_count)
            ops.append(OpFacts(op, opcode, inputs, outputs, intermediates, custom, *unions))
        self.op_order(consumers, producer, where)
        return tensors, ops, calls

    def rare_fields(self, op: Table, here: Where) -> None:
        """An op's mutating inputs and large custom options (fields most ops leave out)."""
        s = self.s
        self.vector(op, s.Operator_MutatingVariableInputs, 1, ("{} mutating inputs", here))
        large = self.scalar(op, s.Operator_LargeCustomOptionsOffset, "Q")
        if (
            large > 1
            and large + self.scalar(op, s.Operator_LargeCustomOptionsSize, "Q") > self.size
        ):
            raise _past_end(
                f"{_w(here)}: custom options lie past the end of the file", file_end=True
            )

    def union(
        self, t: Table, slot: int, kind: int, union: str, where: Where
    ) -> tuple[Table, str] | None:
        name = schema.enum_names(union).get(kind)
        if name is None:
            raise _Fail(f"{_w(where)}: unknown {union} type {kind}")
        to = self.target(t, slot, ("{} {}", where, name))
        if to is None:
            return None
        table = self.table(to, ("{} {}", where, name))
        scalars, others = field_slots.field_checks(name)
        present, size = table[2], table[1]
        for field, fslot, width in scalars:
            if fslot < len(present) and present[fslot] + width > size:
                raise _Fail(f"{_w(where)} {name}.{field}: runs past its table")
        for field, fslot, fkind, width in others:
            if fkind == "vector":
                self.vector(table, fslot, width, ("{} {}.{}", where, name, field))
            elif fkind == "string":
                self.string(table, fslot, ("{} {}.{}", where, name, field))
            elif fkind == "offset":
                self.target(table, fslot, ("{} {}.{}", where, name, field))
        return table, name

    def subgraph_refs(self, t: Table, name: str, where: Where, count: int) -> set[int]:
        found: set[int] = set()
        for field, slot, kind in field_slots.subgraph_fields(name):
            here = ("{} {}.{}", where, name, field)
            values = self.ints(t, slot, here) if kind == "vector" else (self.scalar(t, slot, "i"),)
            for value in values:
                self.index(value, count, here, "subgraph")
                found.add(value)
        return found

    def tensor(self, t: Table, where: Where, buffers: list[int]) -> TensorFacts:
        s = self.s
        shape = self.ints(t, s.Tensor_Shape, ("{} shape", where))
        found = self.vector(t, s.Tensor_ShapeSignature, 4, ("{} shape_signature", where))
        signature = None if found is None else _format("i", found[1])(self.buf, found[0])
        kind = self.scalar(t, s.Tensor_Type, "b")
        bits = schema.TYPE_BITS.get(kind, 0)
        if bits == 0:
            raise _Fail(f"{_w(where)}: unknown tensor type {kind}")
        buffer = self.scalar(t, s.Tensor_Buffer, "I")
        if buffer >= len(buffers):
            self.index(buffer, len(buffers), where, "buffer")
        name = self.string(t, s.Tensor_Name, where) or ""
        if (shape and min(shape) < 0) or (signature and min(signature) < -1):
            raise _Fail(f"{_w(where)}: shape {list(shape)} has a negative dimension")
        sparse = self.target(t, s.Tensor_Sparsity, ("{} sparsity", where))
        if sparse is not None:
            self.sparsity(self.table(sparse, ("{} sparsity", where)), len(shape), where)
        quant = self.target(t, s.Tensor_Quantization, ("{} quantization", where))
        if quant is not None:
            self.quantization(self.table(quant, ("{} quantization", where)), where)
        facts = TensorFacts(t, shape, signature, kind, buffer, name, sparse, quant)
        if bits is None:
            return facts
        elements = 1
        for d in shape:
            elements *= d
        nbytes = (elements * bits + 7) // 8
        if nbytes > self.limit:
            raise _Fail(
                f"{_w(where)}: shape {list(shape)} needs {_size(nbytes)}, more than the "
                f"{_size(self.limit)} of memory this process may use"
            )
        held = buffers[buffer]
        if held > 0 and sparse is None and held != nbytes and not (bits < 8 and held == elements):
            raise _Fail(
                f"{_w(where)}: constant data of {held} bytes does not fit its shape "
                f"{list(shape)} ({nbytes} bytes)"
            )
        return facts

    def sparsity(self, t: Table, rank: int, where: Where) -> None:
        """Traversal order covers the tensor's dims plus its block dims, one metadata each."""
        here = ("{} sparsity", where)
        order = self.ints(t, field_slots.slot("SparsityParameters", "TraversalOrder"), here)
        blocks = self.ints(t, field_slots.slot("SparsityParameters", "BlockMap"), here)
        dims = self.tables(t, field_slots.slot("SparsityParameters", "DimMetadata"), here)
        if len(order) != rank + len(blocks) or len(dims) != len(order):
            raise _Fail(
                f"{_w(where)}: sparsity describes {len(order)} traversed dims and "
                f"{len(dims)} dim metadata for a rank-{rank} tensor with {len(blocks)} block dims"
            )
        if sorted(order) != list(range(len(order))) or any(not 0 <= b < rank for b in blocks):
            raise _Fail(f"{_w(where)}: sparsity traversal order {list(order)} is not a permutation")
        fields = field_slots.fields("DimensionMetadata")
        for dim in dims:
            for kind_field, field in (
                ("ArraySegmentsType", "ArraySegments"),
                ("ArrayIndicesType", "ArrayIndices"),
            ):
                kind = self.scalar(dim, fields[kind_field][0], "B")
                if kind:
                    self.union(dim, fields[field][0], kind, "SparseIndexVector", here)

    def quantization(self, t: Table, where: Where) -> None:
        for field, (slot, kind, size) in field_slots.fields("QuantizationParameters").items():
            if kind == "vector" and slot < len(t[2]) and t[2][slot]:
                self.vector(t, slot, size, ("{} quantization.{}", where, field))
        kind = self.scalar(t, self.s.QuantizationParameters_DetailsType, "B")
        if kind:
            slot = self.s.QuantizationParameters_Details
            self.union(t, slot, kind, "QuantizationDetails", where)

    def signature(self, t: Table, i: int, sizes: list[int]) -> None:
        where = f"signature_defs[{i}]"
        s = self.s
        self.string(t, s.SignatureDef_SignatureKey, where)
        sg = self.scalar(t, s.SignatureDef_SubgraphIndex, "I")
        if sg >= len(sizes):
            raise _Fail(f"{where} names subgraph {sg} of {len(sizes)}")
        for slot, kind in ((s.SignatureDef_Inputs, "inputs"), (s.SignatureDef_Outputs, "outputs")):
            for k, entry in enumerate(self.tables(t, slot, where)):
                here = f"{where} {kind}[{k}]"
                self.string(entry, s.TensorMap_Name, here)
                index = self.scalar(entry, s.TensorMap_TensorIndex, "I")
                self.index(index, sizes[sg], here, "signature tensor")

    @staticmethod
    def op_order(consumers: list[tuple[int, ...]], producer: dict[int, int], where: str) -> None:
        """Every op input is produced by an earlier op (the runtime runs ops in stored order).

        This also rules out cycles: a cycle needs an op that reads what it or a later op makes.
        """
        for k, inputs in enumerate(consumers):
            for slot, tensor in enumerate(inputs):
                source = producer.get(tensor, -1)
                if source == k:
                    raise _Fail(f"{where} op {k} input {slot}: reads its own output (a cycle)")
                if source > k:
                    raise _Fail(
                        f"{where} op {k} input {slot}: tensor {tensor} is produced later, by op "
                        f"{source} (a cycle, or ops out of execution order)"
                    )

    @staticmethod
    def call_cycles(calls: dict[int, set[int]]) -> None:
        """Raise if a subgraph reaches itself through control-flow options (iterative DFS)."""
        done: set[int] = set()
        for root in sorted(calls):
            if root in done:
                continue
            path = [root]
            stack = [iter(sorted(calls.get(root, ())))]
            while stack:
                callee = next(stack[-1], None)
                if callee is None:
                    done.add(path.pop())
                    stack.pop()
                elif callee in path:
                    loop = " -> ".join(map(str, [*path[path.index(callee) :], callee]))
                    raise _Fail(f"subgraphs call each other in a cycle ({loop})")
                elif callee not in done:
                    path.append(callee)
                    stack.append(iter(sorted(calls.get(callee, ()))))


def _size(nbytes: int) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} bytes"
