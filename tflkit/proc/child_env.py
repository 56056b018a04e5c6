"""The one place that knows what a process touching the GPU accelerator needs.

GPU work always happens in a child process (the accelerator can abort its process, and importing
TensorFlow next to it segfaulted here). :func:`child_env` is the environment for that child. A
leaf module: it imports nothing of tflkit (whether the GPU works is
:func:`tflkit.gpu.availability.gpu_available`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

__all__ = ["child_env", "project_root"]


def project_root() -> Path:
    """The directory holding the ``tflkit`` package this module was imported from."""
    return Path(__file__).resolve().parents[2]  # tflkit/proc/child_env.py


def child_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for a child process that compiles or runs models on the GPU accelerator.

    ``XDG_RUNTIME_DIR`` defaults to the temp dir (the Vulkan/WebGPU stack warns without it), and
    ``PYTHONPATH`` starts with this tflkit's root so the child imports the same code. Logging is
    left untouched: the accelerator's INFO and ERROR lines are what tflkit parses.
    """
    env = dict(os.environ if base is None else base)
    if not env.get("XDG_RUNTIME_DIR"):
        env["XDG_RUNTIME_DIR"] = tempfile.gettempdir()
    paths = [str(project_root())]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env
