"""The cost of a runtime environment (``--runtime SPEC``): its first build, and its reuse.

    PYTHONPATH=. python bench/runtime_envs.py ai-edge-litert==2.3.0 tflite-runtime==2.14.0

Each spec is built in a fresh temporary root (so the build is a first one; pip's own download
cache still applies, as it does for a user's second runtime), then asked for again (the reuse
every later command pays). Prints seconds, the venv's size and what the label resolved to.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

from tflkit.regress.runtimes import ensure_runtime


def main(specs: list[str]) -> int:
    print(f"{'runtime':44} {'first build':>12} {'reuse':>8} {'size':>8}")
    for spec in specs:
        root = Path(tempfile.mkdtemp(prefix="tflkit-bench-runtime-"))
        try:
            start = time.perf_counter()
            env = ensure_runtime(spec, root=root)
            built = time.perf_counter() - start
            start = time.perf_counter()
            ensure_runtime(spec, root=root)
            reuse = time.perf_counter() - start
            size = sum(p.lstat().st_size for p in root.rglob("*") if not p.is_symlink())
            print(f"{env.label:44} {built:10.1f} s {reuse:6.2f} s {size / 1e6:6.0f} MB")
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["ai-edge-litert==2.3.0", "tflite-runtime==2.14.0"]))
