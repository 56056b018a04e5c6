"""Other LiteRT runtimes (``--runtime SPEC``): each in its own venv, built on first use by the
converter environments' machinery (:func:`tflkit.converters.envs.ensure_spec_env`); their
runners run there through the Linux harness (:mod:`tflkit.harness.runtimes`).

Specs: ``ai-edge-litert==2.2.0``, ``ai-edge-litert-nightly`` (unpinned: the newest when first
built), ``tflite-runtime==2.14.0`` (numpy < 2 in its venv; no GPU accelerator API, so its GPU
runners are "unavailable" with the reason). Venvs live in ``$TFLKIT_RUNTIMES_DIR`` (default
``$XDG_CACHE_HOME/tflkit/runtimes``). A runtime's label is the distribution and the version
installed in its venv (``ai-edge-litert-nightly==2.4.0.dev20261026``): results name it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tflkit.errors import UsageError
from tflkit.harness.runtimes import RuntimeEnv

__all__ = ["DIR_ENV", "DISTRIBUTIONS", "ensure_runtime", "parse_runtime", "runtimes_dir"]

#: distribution -> (the module it provides, extra pins of its venv)
DISTRIBUTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "ai-edge-litert": ("ai_edge_litert", ()),
    "ai-edge-litert-nightly": ("ai_edge_litert", ()),
    # 2.14 fails to load models with numpy 2 ("CreateWrapperFromFile ... returned a result with
    # an exception set"), measured: see docs/regress.md
    "tflite-runtime": ("tflite_runtime", ("numpy<2",)),
}
DIR_ENV = "TFLKIT_RUNTIMES_DIR"


def runtimes_dir() -> Path:
    """``$TFLKIT_RUNTIMES_DIR``, else ``$XDG_CACHE_HOME/tflkit/runtimes``."""
    configured = os.environ.get(DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "tflkit" / "runtimes"


def parse_runtime(text: str) -> Any:
    """``DIST[==VERSION]`` -> the :class:`tflkit.converters.envs.EnvSpec` of its venv."""
    from tflkit.converters.envs import EnvSpec

    dist, sep, version = text.strip().partition("==")
    if dist not in DISTRIBUTIONS or (sep and not version):
        known = ", ".join(f"{d}[==VERSION]" for d in DISTRIBUTIONS)
        raise UsageError(f"--runtime takes {known}; got {text!r}")
    module, extra = DISTRIBUTIONS[dist]
    return EnvSpec(
        route=text.strip(),
        packages=(text.strip(), *extra),
        modules=(module,),
        python_min=(3, 9),
        python_max=(3, 13),
        note=f"{dist} {version or '(newest)'}",
        kind="runtime",
    )


def ensure_runtime(text: str, *, root: Path | None = None) -> RuntimeEnv:
    """The venv of runtime ``text``, built now on first use (under a lock; reused after)."""
    from tflkit.converters.envs import base_for, ensure_spec_env

    spec = parse_runtime(text)
    base, version = base_for(spec)
    env = ensure_spec_env(spec, base, version, root=root or runtimes_dir())
    dist = text.partition("==")[0].strip()
    normal = dist.replace("-", "_").lower()
    installed = next(
        (
            line.partition("==")[2]
            for line in env.record.get("freeze", [])
            if line.partition("==")[0].replace("-", "_").lower() == normal
        ),
        "",
    )
    label = f"{dist}=={installed}" if installed else text
    return RuntimeEnv(text, label, env.python, gpu=dist != "tflite-runtime")
