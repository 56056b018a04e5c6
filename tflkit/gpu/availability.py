"""Whether the GPU accelerator works on this machine, and in a sentence why not.

:func:`gpu_available` compiles a tiny built-in model (:func:`canary_model`) with the probe, once
per process, and turns what the accelerator or the Vulkan loader printed into a reason a user
can act on.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

__all__ = ["canary_model", "gpu_available", "software_gpu", "why_not"]

#: Hints keyed on what the accelerator or the Vulkan loader printed, most specific first.
_WHY_NOT: tuple[tuple[str, str], ...] = (
    (
        "Found no drivers",
        "no Vulkan driver (ICD) is installed: install Mesa's Vulkan drivers (lavapipe, Mesa >= 25)",
    ),
    (
        "VK_ERROR_INCOMPATIBLE_DRIVER",
        "no usable Vulkan driver (ICD): install Mesa's Vulkan drivers (lavapipe, Mesa >= 25)",
    ),
    (
        "No adapters found",
        "the accelerator found no usable GPU adapter (a Vulkan driver without the features it "
        "needs, e.g. Mesa older than 25: install Mesa >= 25)",
    ),
    (
        "libvulkan",
        "the Vulkan loader (libvulkan.so.1) is missing: install libvulkan1",
    ),
)


def canary_model() -> bytes:
    """A tiny static FULLY_CONNECTED model (float32 [1, 4] -> [1, 3]) every GPU delegate takes."""
    from tflkit import ir
    from tflkit.ir.builder import OpBuilder

    model = ir.Model(description="tflkit canary")
    graph = model.add_subgraph("main")
    x = graph.new_tensor("x", (1, 4), np.float32)
    weights = np.arange(12, dtype=np.float32).reshape(3, 4) / 10.0
    bias = np.array([0.5, -0.25, 0.0], dtype=np.float32)
    y = OpBuilder(graph, prefix="canary").FULLY_CONNECTED(
        x, weights, bias, options=ir.schema.fb.FullyConnectedOptionsT(), shape=(1, 3)
    )
    graph.inputs, graph.outputs = [x], [y]
    model.signatures.append(ir.SignatureDef("serving_default", graph, {"x": x}, {"y": y}))
    return ir.dumps(model)


def why_not(text: str) -> str | None:
    """A user-facing reason found in an accelerator or Vulkan loader log, if one matches."""
    for needle, reason in _WHY_NOT:
        if needle in text:
            return reason
    return None


@functools.cache
def _canary(timeout: float) -> Any:
    """The canary model through the probe, once per process, without the on-disk probe cache:
    the answer depends on the machine's drivers, not on the model."""
    from tflkit.gpu.probe import probe

    return probe(canary_model(), timeout=timeout, use_cache=False, locate_crash=False)


def software_gpu(timeout: float = 120.0) -> bool:
    """Whether the GPU adapter the accelerator selects here is a software one (lavapipe)."""
    adapter = _canary(timeout).log.adapter
    return adapter is not None and adapter.is_software


@functools.cache
def gpu_available(timeout: float = 120.0) -> tuple[bool, str]:
    """Whether the GPU accelerator compiles and fully accelerates a tiny model here, and why not.

    Runs once per process (cached), in a child process (:func:`_canary`).
    """
    result = _canary(timeout)
    adapter = result.log.adapter
    if result.compiled and result.is_fully_accelerated:
        if adapter is None:
            return True, "GPU accelerator compiled the canary model (adapter not reported)"
        kind = "software GPU" if adapter.is_software else "GPU"
        return True, f"{adapter.name} ({kind}, {adapter.vendor}, {adapter.backend})"
    if result.timed_out:
        return False, f"the GPU accelerator did not compile a 1-op model within {timeout:g} s"
    hint = why_not(result.log_text)
    detail = result.log.fatal or result.error or result.exit_description
    if hint:
        return False, f"{hint} [{detail}]" if detail else hint
    if result.compiled:
        return False, "the GPU accelerator compiled a 1-op FULLY_CONNECTED model but not fully"
    return False, f"the GPU accelerator failed: {detail or 'no reason given'}"
