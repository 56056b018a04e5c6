"""Benchmark: ways of hashing a file in a bare ``python -I -S`` child, as ``check`` does.

Run from the repo root: ``PYTHONPATH=. python bench/file_hash.py MODEL [--rounds 11]``
(``MODEL``: e.g. the 211 MB model of ``python bench/large_model.py /tmp/l800.tflite``). Each
round runs every way once, in a fresh process, in turn; it prints each way's median and
fastest wall time and its ratio to the way ``check`` uses (``tflkit.fsio._HASH_CHILD``). Every
way must print the same digest. A benchmark: nothing asserts on time.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tflkit.fsio import _HASH_CHILD

_READ = """
import hashlib, sys
digest, buffer = hashlib.sha256(), bytearray({size})
with open(sys.argv[1], "rb", buffering=0) as f:
    while n := f.readinto(buffer):
        digest.update(memoryview(buffer)[:n])
print(digest.hexdigest())
"""

_MAP = """
import hashlib, mmap, os, sys
digest, span = hashlib.sha256(), 32 << 20
with open(sys.argv[1], "rb", buffering=0) as f:
    size, at = os.fstat(f.fileno()).st_size, 0
    flags = mmap.MAP_SHARED | mmap.MAP_POPULATE
    while at < size:
        n = min(span, size - at)
        with mmap.mmap(f.fileno(), n, flags=flags, prot=mmap.PROT_READ, offset=at) as m:
            digest.update(m)
        at += n
print(digest.hexdigest())
"""

WAYS = {
    "check's child": _HASH_CHILD,
    "reads, 64 KiB": _READ.format(size=64 << 10),
    "reads, 1 MiB": _READ.format(size=1 << 20),
    "reads, 8 MiB": _READ.format(size=8 << 20),
    "maps, 32 MiB + MAP_POPULATE": _MAP,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    times: dict[str, list[float]] = {way: [] for way in WAYS}
    digests: set[str] = set()
    for _ in range(args.rounds):
        for way, code in WAYS.items():
            start = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-I", "-S", "-c", code, str(args.model)],
                capture_output=True,
                text=True,
                check=True,
            )
            times[way].append(time.perf_counter() - start)
            digests.add(done.stdout.strip())
    if len(digests) != 1:
        raise SystemExit(f"the ways disagree: {sorted(digests)}")
    anchor = statistics.median(times["check's child"])
    size = args.model.stat().st_size / 1e6
    print(f"{args.model}: {size:.0f} MB, {args.rounds} rounds, fresh python -I -S each")
    for way, walls in times.items():
        median = statistics.median(walls)
        fastest = min(walls)
        print(f"{way:<30} median {median:.3f} s, fastest {fastest:.3f} s, {median / anchor:.2f}x")


if __name__ == "__main__":
    main()
