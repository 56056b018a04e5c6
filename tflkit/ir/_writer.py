"""Forward flatbuffer writer for the hot tables of saving (model, subgraphs, tensors, ops...).

The flatbuffers Python builder costs several calls per field; a 2,400-op model spent most of
``ir.save`` in it. Here a table is laid out front to back: its vtable (shared with equal ones)
and its inline fields in one ``struct`` pack, children after their parents (uoffsets point
forward, as the format requires), each offset field patched once its target is placed.
Sub-objects of the object API (builtin options, quantization, sparsity, variant types, external
buffer groups) are packed by the flatbuffers builder into one blob appended after the tables.
Slot numbers, scalar types and defaults come from ``schema_layout`` (generated from the schema,
like the structural verifier's: no hand-copied slot numbers). ``tests/test_ir_roundtrip.py`` and
``tests/test_ir_differential.py`` check the output against the generated reader and LiteRT.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable
from typing import Any

from tflkit.ir import schema_layout


@functools.cache
def field(table: str, name: str) -> tuple[int, str, Any]:
    """(slot, struct code, default) of field ``name`` of ``table``; code "I" and default None
    for offset fields; KeyError for an unknown field."""
    for found, slot, kind, code, _attribute, default in schema_layout.TABLES[table]:
        if found == name:
            return (slot, code, default) if kind == "scalar" else (slot, "I", None)
    raise KeyError(f"{table}.{name}")


@functools.cache
def _plan(
    table: str, scalars: tuple[str, ...], offsets: tuple[str, ...]
) -> tuple[bytes, str, tuple[str, ...], int, tuple[tuple[str, int], ...]]:
    """How a ``table`` with these fields present is laid out: (vtable, struct format, field
    order, alignment of the table, (offset field, position in the table)).

    After the 4-byte soffset to the vtable come the fields, widest first, so each is aligned
    when the table is aligned to the widest (8-byte fields after 4 bytes of padding)."""
    entries = [(struct.calcsize(field(table, n)[1]), field(table, n)[0], field(table, n)[1], n)
               for n in scalars]  # fmt: skip
    entries += [(4, field(table, n)[0], field(table, n)[1], n) for n in offsets]
    entries.sort(key=lambda e: -e[0])
    widest = entries[0][0] if entries else 4
    slots = max((e[1] for e in entries), default=-1) + 1
    vtable_offsets = [0] * slots
    at = 8 if widest == 8 else 4
    for size, slot, _code, _name in entries:
        vtable_offsets[slot] = at
        at += size
    vtable = struct.pack(f"<{2 + slots}H", 4 + 2 * slots, at, *vtable_offsets)
    fmt = "<i" + ("4x" if widest == 8 else "") + "".join(e[2] for e in entries)
    located = tuple((n, vtable_offsets[field(table, n)[0]]) for n in offsets)
    return vtable, fmt, tuple(e[3] for e in entries), max(4, widest), located


@functools.cache
def scalar_at(table: str, scalars: tuple[str, ...], name: str) -> int:
    """Where scalar field ``name`` lies inside a ``table`` written by :meth:`Writer.table`
    with exactly the non-default ``scalars`` (in that order) and no offset fields."""
    vtable = _plan(table, scalars, ())[0]
    return int(struct.unpack_from("<H", vtable, 4 + 2 * field(table, name)[0])[0])


class Writer:
    """A growing flatbuffer; positions are absolute byte offsets in it."""

    def __init__(self) -> None:
        self.buf = bytearray(8)  # root uoffset + file identifier, filled by finish()
        self._vtables: dict[bytes, int] = {}
        #: (field position, target's offset from the end of the builder) into the blob.
        self._late: list[tuple[int, int]] = []
        self._builder: Any = None  # the flatbuffers builder, made when first needed

    # -- primitives -------------------------------------------------------------------------
    def pad(self, alignment: int, extra: int = 0) -> None:
        """Pad so that ``len + extra`` is a multiple of ``alignment``."""
        self.buf += bytes((-(len(self.buf) + extra)) % alignment)

    def patch(self, at: int, target: int) -> None:
        """Point the uoffset at ``at`` to ``target`` (which lies after it)."""
        struct.pack_into("<I", self.buf, at, target - at)

    def table(
        self, table: str, scalars: Iterable[tuple[str, Any]], offsets: Iterable[str]
    ) -> tuple[int, dict[str, int]]:
        """Write a table; returns its position and the positions of its offset fields.

        Scalars equal to their default are left out (as the builder does); ``offsets`` name
        the offset fields present, to be patched by the caller.
        """
        present = [(name, value) for name, value in scalars if value != field(table, name)[2]]
        plan = _plan(table, tuple(name for name, _ in present), tuple(offsets))
        vtable, fmt, order, alignment, offset_fields = plan
        known = self._vtables.get(vtable)
        if known is None:
            self.pad(2)
            known = len(self.buf)
            self.buf += vtable
            self._vtables[vtable] = known
        self.pad(alignment)
        pos = len(self.buf)
        values = dict(present)
        self.buf += struct.pack(fmt, pos - known, *[values.get(name, 0) for name in order])
        return pos, {name: pos + at for name, at in offset_fields}

    def vector(self, code: str, values: Iterable[Any]) -> int:
        """Write a vector of scalars; returns the position of its length prefix."""
        values = list(values)
        size = struct.calcsize(code)
        self.pad(max(4, size), 4)
        pos = len(self.buf)
        self.buf += struct.pack(f"<I{len(values)}{code}", len(values), *values)
        return pos

    def raw_vector(self, data: bytes, alignment: int = 4) -> int:
        """Write a ubyte vector of ``data``; returns the position of its length prefix."""
        self.pad(alignment, 4)
        pos = len(self.buf)
        self.buf += struct.pack("<I", len(data)) + data
        return pos

    def string(self, text: str) -> int:
        data = text.encode("utf-8")
        self.pad(4)
        pos = len(self.buf)
        self.buf += struct.pack("<I", len(data)) + data + b"\0"
        return pos

    def offsets(self, count: int) -> list[int]:
        """Write a vector of ``count`` uoffsets to patch; returns the element positions."""
        self.pad(4)
        pos = len(self.buf)
        self.buf += struct.pack("<I", count) + bytes(4 * count)
        return [pos + 4 + 4 * i for i in range(count)]

    # -- object-API sub-objects (packed by the flatbuffers builder, placed after the tables) -
    def later(self, at: int, obj: Any) -> None:
        """Point the offset field at ``at`` to ``obj`` packed by the builder."""
        if self._builder is None:
            import flatbuffers  # imports numpy: only a model with such objects pays for it

            self._builder = flatbuffers.Builder(1 << 16)
        self._late.append((at, obj.Pack(self._builder)))

    def finish(self, root: int, identifier: bytes, alignment: int) -> bytearray:
        """Append the blob of sub-objects, set the root, pad to ``alignment``; the bytes."""
        if self._late:
            builder = self._builder
            blob = builder.Bytes[builder.Head() :]  # unfinished: no root of its own
            self.pad(max(builder.minalign, 4), len(blob))
            self.buf += blob
            end = len(self.buf)  # the builder's offsets count back from here
            for at, from_end in self._late:
                self.patch(at, end - from_end)
        struct.pack_into("<I4s", self.buf, 0, root, identifier)
        self.pad(alignment)
        return self.buf
