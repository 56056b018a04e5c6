"""Whether a file is a ``.litertlm`` bundle: its first 8 bytes. A leaf (standard library only),
so every command can ask before importing anything."""

from __future__ import annotations

import os

__all__ = ["MAGIC", "is_bundle"]

MAGIC = b"LITERTLM"


def is_bundle(source: str | os.PathLike[str] | bytes | bytearray | memoryview) -> bool:
    """Whether ``source`` (a path or bytes) starts with the ``.litertlm`` magic."""
    if isinstance(source, bytes | bytearray | memoryview):
        return bytes(source[:8]) == MAGIC
    try:
        with open(source, "rb") as f:
            return f.read(8) == MAGIC
    except OSError:
        return False
