"""Build a runner from its :class:`~tflkit.delegates.base.RunnerSpec`: the one place that turns
what a runner is (its device, kernels, precision) into the object that runs it.

The runners of this machine's backends are built here: the CPU interpreter (XNNPACK or LiteRT's
reference kernels), the fp16 emulation, the GPU accelerator, LiteRT.js in the browser and the
LiteRT-LM engine (on a ``.litertlm`` bundle's path). The
external delegate and the framework reference need the model's ports and the user's files:
``tflkit.validation.runners`` builds them; a device's runners come back from its harness
(``tflkit.harness.device_runs``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base import RunnerSpec

__all__ = ["build", "builds_here"]

#: the devices whose runners :func:`build` makes
_HERE = ("cpu", "gpu", "browser", "engine")


def builds_here(spec: RunnerSpec) -> bool:
    """:func:`build` makes this runner (a CPU, GPU or browser runner of this machine)."""
    return spec.device in _HERE


def build(
    spec: RunnerSpec,
    model: bytes,
    *,
    signature: str | None = None,
    timeout: float = 300.0,
    browser_adapter: str = "swiftshader",
    session: Any = None,
) -> Any:
    """The runner ``spec`` names, on ``model`` (``session``: the :class:`BrowserSession` a
    browser runner shares with the others of its validation; a new one when None)."""
    if spec.device == "cpu" and spec.emulated:
        from .fp16_emulation import Fp16EmulationRunner

        return Fp16EmulationRunner(model, signature=signature, name=spec.name)
    if spec.device == "cpu":
        from .litert_cpu import LiteRTCpuRunner

        assert spec.kernels is not None
        return LiteRTCpuRunner(model, kernels=spec.kernels, signature=signature, name=spec.name)
    if spec.device == "gpu":
        from .litert_gpu import LiteRTGpuRunner

        return LiteRTGpuRunner(
            model,
            enforce_f32=spec.precision == "fp32",
            signature=signature,
            timeout=timeout,
            name=spec.name,
        )
    if spec.device == "engine":  # ``model``: the bundle's path
        from .litert_lm import LiteRtLmRunner

        return LiteRtLmRunner(model, spec, timeout=timeout)
    if spec.device == "browser":
        from .litert_js import LiteRtJsRunner

        if session is None:
            session = browser_session(model, [spec.name], browser_adapter, signature, timeout)
        return LiteRtJsRunner(session, spec.name)
    raise ValueError(f"{spec.name} runs on {spec.device}: not built from its spec alone")


def browser_session(
    model: bytes,
    names: Sequence[str],
    adapter: str,
    signature: str | None,
    timeout: float,
) -> Any:
    """One browser job for the browser runners ``names`` (one Chromium, one page)."""
    from .litert_js import BrowserSession

    return BrowserSession(model, names, adapter=adapter, signature=signature, timeout=timeout)
