"""Fast field access to flatbuffer tables, for the hot loops of loading (tensors and ops).

The generated accessors re-read the vtable for every field; here a table's vtable is read once
and fields are read with precompiled ``struct`` formats. Slot numbers follow the schema's field
order (``Tensor``: shape=0, type=1, ...); ``tests/test_ir_roundtrip.py`` checks the result
against the generated object API.
"""

from __future__ import annotations

import functools
import struct
from typing import Any

_U8 = struct.Struct("<B").unpack_from
_I8 = struct.Struct("<b").unpack_from
_U16 = struct.Struct("<H").unpack_from
_I32 = struct.Struct("<i").unpack_from
_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from


@functools.cache
def _format(code: str, count: int) -> struct.Struct:
    return struct.Struct(f"<{count}{code}")


class Fields:
    """The field offsets of one table instance."""

    @classmethod
    def root(cls, buf: Any) -> Fields:
        """The root table of a flatbuffer."""
        return cls(buf, _U32(buf, 0)[0])

    @classmethod
    def of(cls, buf: Any, pos: int, slots: tuple[int, ...]) -> Fields:
        """The fields of the table at ``pos`` whose vtable slots are already read."""
        fields = cls.__new__(cls)
        fields.buf, fields.pos, fields.slots = buf, pos, slots
        return fields

    __slots__ = ("buf", "pos", "slots")

    def __init__(self, buf: Any, pos: int) -> None:
        vtable = pos - _I32(buf, pos)[0]
        count = (_U16(buf, vtable)[0] - 4) // 2
        self.buf = buf
        self.pos = pos
        self.slots = _format("H", count).unpack_from(buf, vtable + 4) if count > 0 else ()

    def offset(self, slot: int) -> int:
        return self.slots[slot] if slot < len(self.slots) else 0

    def has(self, slot: int) -> bool:
        return self.offset(slot) != 0

    def u8(self, slot: int, default: int = 0) -> int:
        o = self.offset(slot)
        return _U8(self.buf, self.pos + o)[0] if o else default

    def i8(self, slot: int, default: int = 0) -> int:
        o = self.offset(slot)
        return _I8(self.buf, self.pos + o)[0] if o else default

    def i32(self, slot: int, default: int = 0) -> int:
        o = self.offset(slot)
        return _I32(self.buf, self.pos + o)[0] if o else default

    def u32(self, slot: int, default: int = 0) -> int:
        o = self.offset(slot)
        return _U32(self.buf, self.pos + o)[0] if o else default

    def u64(self, slot: int, default: int = 0) -> int:
        o = self.offset(slot)
        return _U64(self.buf, self.pos + o)[0] if o else default

    def scalar(self, slot: int, code: str, default: Any = 0) -> Any:
        """A scalar of ``struct`` format ``code`` (``"f"``, ``"d"``, ``"h"``...)."""
        o = self.offset(slot)
        return _format(code, 1).unpack_from(self.buf, self.pos + o)[0] if o else default

    def child(self, slot: int) -> Fields | None:
        """The fields of a sub-table, or None when absent."""
        at = self.table(slot)
        return None if at is None else Fields(self.buf, at)

    def children(self, slot: int) -> list[Fields]:
        """The fields of each table of a vector-of-tables field (empty when absent)."""
        return [Fields(self.buf, at) for at in self.table_vector(slot)]

    def table(self, slot: int) -> int | None:
        """Position of a sub-table, or None when absent."""
        o = self.offset(slot)
        if not o:
            return None
        at = self.pos + o
        return at + _U32(self.buf, at)[0]

    def vector(self, slot: int) -> tuple[int, int] | None:
        """(start of elements, element count) of a vector field, or None when absent."""
        o = self.offset(slot)
        if not o:
            return None
        at = self.pos + o
        at += _U32(self.buf, at)[0]
        return at + 4, _U32(self.buf, at)[0]

    def ints(self, slot: int) -> tuple[int, ...] | None:
        """An int32 vector as a tuple, or None when absent."""
        found = self.vector(slot)
        if found is None:
            return None
        start, count = found
        return _format("i", count).unpack_from(self.buf, start) if count else ()

    def floats(self, slot: int) -> tuple[float, ...] | None:
        """A float32 vector as a tuple, or None when absent."""
        found = self.vector(slot)
        if found is None:
            return None
        start, count = found
        return _format("f", count).unpack_from(self.buf, start) if count else ()

    def bools(self, slot: int) -> list[bool] | None:
        found = self.vector(slot)
        if found is None:
            return None
        start, count = found
        return [bool(v) for v in _format("B", count).unpack_from(self.buf, start)]

    def raw(self, slot: int) -> bytes | None:
        """A ubyte vector as bytes, or None when absent."""
        found = self.vector(slot)
        if found is None:
            return None
        start, count = found
        if start + count > len(self.buf):
            raise ValueError("vector beyond end of file")
        return bytes(self.buf[start : start + count])

    def string(self, slot: int) -> str | None:
        data = self.raw(slot)
        return None if data is None else data.decode("utf-8", "replace")

    def table_vector(self, slot: int) -> list[int]:
        """Positions of the tables of a vector-of-tables field."""
        found = self.vector(slot)
        if found is None:
            return []
        start, count = found
        return [start + 4 * i + _U32(self.buf, start + 4 * i)[0] for i in range(count)]
