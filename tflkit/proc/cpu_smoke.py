"""Run a model once on the CPU interpreter in a child before tflkit runs it in its own process.

The structural verifier (:mod:`tflkit.ir.structure`) proves the file is a sound flatbuffer with
indices in range, but a model can still be wrong in ways only a kernel notices, and some LiteRT
kernels crash instead of returning an error (e.g. SPLIT given a float axis segfaults in
``allocate_tensors``). Commands that run the CPU interpreter in the tflkit process (``validate``
with CPU runners, ``rewrite``'s verification) call :func:`ensure_cpu_safe` first: the model is
loaded, allocated and invoked with zeros in a :mod:`tflkit.proc.worker` child, and a crash or hang
there becomes one clear error instead of a crash of tflkit.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

from tflkit.errors import ModelLoadError
from tflkit.proc import _cpu_smoke_worker
from tflkit.proc.worker import spawn_python

__all__ = ["NativeCrashError", "ensure_cpu_safe"]

_PASSED: set[str] = set()


class NativeCrashError(ModelLoadError):
    """The LiteRT CPU interpreter crashes or hangs on this model (found in a child process)."""


def ensure_cpu_safe(data: bytes, label: str, *, timeout: float = 300.0) -> None:
    """Raise :class:`NativeCrashError` if loading or running ``data`` kills the CPU interpreter.

    A Python-level error from LiteRT is not raised here: the caller's own run meets it and
    reports it the usual way. Models that passed are remembered (by hash) for the process.
    """
    digest = hashlib.sha256(data).hexdigest()
    if digest in _PASSED:
        return
    with tempfile.TemporaryDirectory(prefix="tflkit-smoke-") as tmp:
        model = Path(tmp) / "model.tflite"
        model.write_bytes(data)
        done = spawn_python(_cpu_smoke_worker.main, model, cwd=tmp, timeout=timeout)
    if done.returncode in (0, 1) and not done.timed_out:
        _PASSED.add(digest)
        return
    stages = [line[7:] for line in done.output.splitlines() if line.startswith("stage: ")]
    where = f" during {stages[-1]}" if stages else ""
    raise NativeCrashError(
        f"{label}: the LiteRT CPU interpreter {'hangs' if done.timed_out else 'crashes'} on this "
        f"model ({done.how}{where}); refusing to run it in the tflkit process"
    )
