"""The sha256 of a model file, for reports: hashed span by span, or on a thread beside the work.

Hashing a 211 MB model takes about as long as checking it (0.13 s here, SHA-NI), so ``check``
starts a :class:`Sha256Job` first, before the imports and the reading, and collects it last.
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import threading
from pathlib import Path

__all__ = ["Sha256Job", "sha256_of"]

#: Span of a map hashed at once: each span is one call that releases the GIL, and a thread
#: hashing beside Python work waits for the GIL after each (up to the 5 ms switch interval):
#: 8 MiB spans made ``check`` on a 211 MB model 25% slower than 64 MiB; 128 MiB hashes that
#: model in two calls, and a model of gigabytes raises the resident memory by 128 MiB at most.
_HASH_SPAN = 128 << 20


def sha256_of(data: bytes | bytearray | memoryview | mmap.mmap) -> str:
    """The sha256 of a model's bytes (in memory, or a map of its file).

    A map is hashed span by span, each span's pages dropped from the process once hashed
    (``MADV_DONTNEED``: they stay in the page cache), so hashing a file of gigabytes raises the
    resident memory by one span, not by the file.
    """
    if not isinstance(data, mmap.mmap):
        return hashlib.sha256(data).hexdigest()
    digest = hashlib.sha256()
    with memoryview(data) as view:
        for start in range(0, len(data), _HASH_SPAN):
            digest.update(view[start : start + _HASH_SPAN])
            with contextlib.suppress(OSError, AttributeError):  # no madvise: pages stay mapped
                data.madvise(mmap.MADV_DONTNEED, start, min(_HASH_SPAN, len(data) - start))
    return digest.hexdigest()


def _file_sha256(fd: int, size: int) -> str:
    """The sha256 of an open file, one mapped span at a time, each unmapped once hashed.

    (``MAP_POPULATE`` would hash alone 10% faster here, but it holds the process's memory map
    locked while it fills a span, and ``check``'s main thread, allocating beside it, lost more.)
    """
    digest = hashlib.sha256()
    for start in range(0, size, _HASH_SPAN):
        length = min(_HASH_SPAN, size - start)
        with mmap.mmap(fd, length, access=mmap.ACCESS_READ, offset=start) as span:
            digest.update(span)
    return digest.hexdigest()


class Sha256Job:
    """The sha256 of a file or of bytes, computed on a thread from the moment it is created.

    A file that cannot be read gives None (whoever reads it next says why).
    """

    def __init__(self, source: str | os.PathLike[str] | bytes | bytearray | mmap.mmap) -> None:
        self._digest: str | None = None
        self._thread = threading.Thread(target=self._run, args=(source,), daemon=True)
        self._thread.start()

    def _run(self, source: str | os.PathLike[str] | bytes | bytearray | mmap.mmap) -> None:
        if isinstance(source, bytes | bytearray | mmap.mmap):
            self._digest = sha256_of(source)
            return
        try:
            with open(Path(source), "rb") as f:
                self._digest = _file_sha256(f.fileno(), os.fstat(f.fileno()).st_size)
        except (OSError, ValueError):
            return

    def hexdigest(self) -> str | None:
        """The digest, once computed; None when the file could not be read."""
        self._thread.join()
        return self._digest
