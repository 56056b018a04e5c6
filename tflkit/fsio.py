"""Files: atomic output (every model, report, sidecar and bundle tflkit writes goes through
here), locks, tar extraction, and the sha256 of model files.

A file is written to a temporary name in its target folder, flushed to disk, given the
permissions the user's umask allows (``mkstemp`` alone would leave 0600), then renamed over the
target. An interrupt, a crash or a second writer never leaves a partial file at the target:
readers see the old file or a complete new one, and when two writers race the last rename wins
whole. On any exception (``KeyboardInterrupt`` and the CLI's SIGTERM exit included) the
temporary file is removed. ``durable=False`` skips the fsyncs, for scratch files that a parent
reads back from a child (a worker's result): they need the rename, not to survive a power cut.

Hashing a 211 MB model takes longer than checking it (``bench/ir_large.py --layers 800 --tasks
check``), so ``tflkit check`` starts a :class:`Sha256Job` before it even imports Typer
(:func:`hash_early`) and collects it last; a file is hashed by a child process, beside the check.
"""

from __future__ import annotations

import atexit
import contextlib
import mmap
import os
import stat
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tarfile

__all__ = [
    "Sha256Job",
    "atomic_output",
    "dir_mode",
    "extract_tar",
    "file_mode",
    "is_temporary",
    "sha256_of",
    "write_atomic",
]

TEMP_SUFFIX = ".tmp"


def _umask() -> int:
    """The process umask (read each time: it can change), without changing it where Linux allows."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # pragma: no cover - no /proc: the only portable way to read it
    os.umask(mask)
    return mask


def file_mode() -> int:
    """Permissions a new regular file gets from the umask (0644 under the usual 022)."""
    return 0o666 & ~_umask()


def dir_mode() -> int:
    """Permissions a new folder gets from the umask (0755 under the usual 022)."""
    return 0o777 & ~_umask()


def is_temporary(name: str) -> bool:
    """Whether ``name`` is one of our temporary files (``.<target>.<random>.tmp``)."""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


@contextlib.contextmanager
def atomic_output(
    path: str | os.PathLike[str], mode: str = "wb", *, durable: bool = True
) -> Iterator[IO[Any]]:
    """Open a temporary file next to ``path``; on success it replaces ``path`` atomically.

    ``mode`` is ``"wb"`` or ``"w"`` (UTF-8 text). The parent folder is created if needed.
    ``durable=False`` skips the fsyncs of the file and its folder.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_output writes new files: mode 'wb' or 'w', not {mode!r}")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=TEMP_SUFFIX, dir=target.parent)
    try:
        kwargs: dict[str, Any] = {} if mode == "wb" else {"encoding": "utf-8"}
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fchmod(f.fileno(), file_mode())
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        _fsync_dir(target.parent)


def write_atomic(
    path: str | os.PathLike[str],
    content: bytes | str | Iterable[bytes | memoryview],
    *,
    durable: bool = True,
) -> Path:
    """Write ``content`` (bytes, text, or an iterable of byte chunks) to ``path`` atomically."""
    if isinstance(content, str):
        with atomic_output(path, "w", durable=durable) as f:
            f.write(content)
        return Path(path)
    chunks = [content] if isinstance(content, bytes | bytearray | memoryview) else content
    with atomic_output(path, "wb", durable=durable) as f:
        for chunk in chunks:
            f.write(chunk)
    return Path(path)


def _fsync_dir(folder: Path) -> None:
    """Make the rename durable (best effort: some filesystems refuse to open a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def exclusive_lock(
    lock: Path, waiting: str = "", say: Callable[[str], None] | None = None
) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the file ``lock`` (created with its folder) for the block;
    when another process holds it, ``say(waiting)`` once (if given), then wait for it. Used
    where a cache is filled once (converter environments, LiteRT.js, device wheels, the test
    corpora) by whichever process comes first."""
    import fcntl

    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if say is not None:
                say(waiting)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def extract_tar(
    tar: tarfile.TarFile, dest: str | os.PathLike[str], members: list[tarfile.TarInfo] | None = None
) -> None:
    """Extract ``members`` (default: all, checked by the caller) into ``dest`` with the ``data``
    filter where this Python has it (3.11.4+, 3.12): Debian 12's 3.11.2 lacks it."""
    import tarfile  # here: ``check`` imports this module first, before it reads anything

    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    tar.extractall(dest, members=members, **safe)  # type: ignore[arg-type]


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
    import hashlib  # not at the top: ``check`` hashes in a child, and OpenSSL takes 3 ms

    if not isinstance(data, mmap.mmap):
        return hashlib.sha256(data).hexdigest()
    digest = hashlib.sha256()
    with memoryview(data) as view:
        for start in range(0, len(data), _HASH_SPAN):
            digest.update(view[start : start + _HASH_SPAN])
            with contextlib.suppress(OSError, AttributeError):  # no madvise: pages stay mapped
                data.madvise(mmap.MADV_DONTNEED, start, min(_HASH_SPAN, len(data) - start))
    return digest.hexdigest()


#: What the hashing child runs (``python -I -S``: no site, no import hook; hashlib only): the
#: file read through one reused 256 KiB buffer, which stays in the CPU's cache between the copy
#: out of the page cache and the hash. Measured on the 211 MB model of ``bench/ir_large.py
#: --layers 800`` by ``bench/file_hash.py`` (each way in a fresh ``python -I -S``): 0.166 s,
#: against 0.181 s through an 8 MiB buffer and 0.210 s mapping 32 MiB windows with
#: ``MAP_POPULATE`` (which an earlier machine had measured faster than 8 MiB reads).
_HASH_CHILD = """
import hashlib, sys
digest, buffer = hashlib.sha256(), bytearray(256 << 10)
with open(sys.argv[1], "rb", buffering=0) as f:
    while n := f.readinto(buffer):
        digest.update(memoryview(buffer)[:n])
print(digest.hexdigest())
"""


class Sha256Job:
    """The sha256 of a file or of bytes, computed from the moment it is created.

    A file is hashed by a child process (a bare ``python -I -S`` that reads it through a small
    buffer, :data:`_HASH_CHILD`): beside the check's Python work a hashing thread waits for the
    GIL after every span, and a map hashed in large spans keeps a span of pages resident. The child
    takes neither: on the 211 MB model of ``bench/ir_large.py --layers 800 --tasks check``
    ``check``'s peak RSS went from 152 to 87 MB (bench/README.md). Bytes or a view (a bundle's
    section) are hashed on a thread. A file that cannot be read gives None (whoever reads it
    next says why).
    """

    def __init__(
        self, source: str | os.PathLike[str] | bytes | bytearray | memoryview | mmap.mmap
    ) -> None:
        self._digest: str | None = None
        self._child: Any = None
        if not isinstance(source, bytes | bytearray | memoryview | mmap.mmap):
            self._child = _hash_child(Path(source))
        if self._child is None:
            self._thread = threading.Thread(target=self._run, args=(source,), daemon=True)
            self._thread.start()

    def _run(
        self, source: str | os.PathLike[str] | bytes | bytearray | memoryview | mmap.mmap
    ) -> None:
        if isinstance(source, bytes | bytearray | memoryview | mmap.mmap):  # a view: a section
            self._digest = sha256_of(source)
            return
        try:
            with open(Path(source), "rb") as f:
                if os.fstat(f.fileno()).st_size == 0:
                    self._digest = sha256_of(b"")
                    return
                with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                    self._digest = sha256_of(data)
        except (OSError, ValueError):
            return

    @classmethod
    def of_file(cls, path: str | os.PathLike[str]) -> Sha256Job:
        """The job :func:`hash_early` started for the file at ``path`` (the same file: device,
        inode, size and modification time), else one started now."""
        key = _identity(path)
        early = _EARLY.pop(key, None) if key is not None else None
        return early if early is not None else cls(path)

    def hexdigest(self) -> str | None:
        """The digest, once computed; None when the file could not be read."""
        if self._child is not None:
            out, _ = self._child.communicate()
            text = out.decode("ascii", "replace").strip()
            self._child = None
            ok = len(text) == 64 and all(c in "0123456789abcdef" for c in text)
            self._digest = text if ok else None
            return self._digest
        self._thread.join()
        return self._digest


#: The jobs :func:`hash_early` started, by file identity, until a command takes them over.
_EARLY: dict[tuple[int, int, int, int], Sha256Job] = {}


def hash_early(args: Iterable[str], skip: Callable[[str], bool] | None = None) -> None:
    """Start hashing each of ``args`` that names a regular file (options left out, and files
    ``skip`` names), for :meth:`Sha256Job.of_file` to hand over: ``tflkit check MODEL`` calls it
    before importing Typer and the command (on the 211 MB model of ``bench/ir_large.py --layers
    800`` the hash is the check's longer path). A job no command takes over ends with the
    process (its child is killed at exit)."""
    for arg in args:
        key = None if arg.startswith("-") else _identity(arg)
        if key is None or key in _EARLY or (skip is not None and skip(arg)):
            continue
        atexit.unregister(_stop_early)  # registered once, however many lines a process runs
        atexit.register(_stop_early)
        _EARLY[key] = Sha256Job(arg)


def _identity(path: str | os.PathLike[str]) -> tuple[int, int, int, int] | None:
    """(device, inode, size, mtime) of a regular file, else None."""
    try:
        found = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(found.st_mode):
        return None
    return found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns


def _stop_early() -> None:
    for job in _EARLY.values():
        if job._child is not None:
            job._child.kill()
            job._child.wait()
    _EARLY.clear()


def _hash_child(path: Path) -> Any:
    """The hashing child for ``path`` (stdout a pipe), or None when it cannot start."""
    import subprocess
    import sys

    if not sys.executable:
        return None
    try:
        return subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _HASH_CHILD, os.fspath(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return None
