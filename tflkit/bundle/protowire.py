"""The protobuf wire format, read by hand: enough to decode LiteRT-LM's small metadata messages
and to count a SentencePiece model's pieces without the protobuf package.

A message is a sequence of (field number, wire type, value): varints (type 0), 64-bit (1),
length-delimited bytes (2: strings, sub-messages, packed repeated scalars) and 32-bit (5).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

__all__ = ["ProtoError", "fields", "floats32", "packed_varints", "signed32", "varint"]


class ProtoError(ValueError):
    """The bytes are not a well-formed protobuf message."""


def varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """(value, position after it) of the varint at ``pos``."""
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ProtoError("varint runs past the end of the message")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ProtoError("varint longer than 10 bytes")


def fields(data: bytes | memoryview) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of each field: an int for varints, bytes otherwise."""
    pos = 0
    while pos < len(data):
        key, pos = varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(data, pos)
            yield number, wire, value
            continue
        if wire == 2:
            size, pos = varint(data, pos)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
        else:
            raise ProtoError(f"unsupported wire type {wire} (field {number})")
        if pos + size > len(data):
            raise ProtoError(f"field {number} runs past the end of the message")
        yield number, wire, bytes(data[pos : pos + size])
        pos += size


def signed32(value: int) -> int:
    """An int32 field's value (negative numbers travel as 10-byte varints)."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def packed_varints(data: bytes) -> list[int]:
    """The values of a packed repeated varint field."""
    out, pos = [], 0
    while pos < len(data):
        value, pos = varint(data, pos)
        out.append(signed32(value))
    return out


def floats32(data: bytes) -> float:
    """A float field's value (wire type 5)."""
    return struct.unpack("<f", data)[0]
