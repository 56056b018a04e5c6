"""Build a runner from its :class:`~tflkit.delegates.protocol.RunnerSpec`: :func:`build`, the one
function that turns what a runner is (its spec) and what it runs on (a
:class:`~tflkit.delegates.protocol.BuildRequest`) into the object that runs it.

Each spec of the registry (:data:`tflkit.delegates.base.RUNNER_SPECS`) carries its factory, one
of the functions below: the CPU interpreter (XNNPACK or LiteRT's reference kernels), the fp16
emulation, the GPU accelerator, LiteRT.js in the browser, an external delegate, the framework
reference, the LiteRT-LM engine (on a ``.litertlm`` bundle's path); with ``request.steps``, the
step runner of a KV-cache program (``validate --steps``). A device's runners come back from its
harness (``tflkit.harness.device_runs``): their specs have no factory. This module imports the
protocol alone, and each runner's module only when it is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .protocol import BuildRequest, Runner, RunnerSpec

__all__ = [
    "browser",
    "browser_session",
    "build",
    "builds_here",
    "cpu",
    "engine",
    "external",
    "fp16_emulation",
    "gpu",
    "reference",
]


def build(spec: RunnerSpec, request: BuildRequest) -> Runner:
    """The runner ``spec`` names, on ``request``'s model: its factory's (a step runner with
    ``request.steps``); a ValueError for a runner only a device's harness runs."""
    if spec.factory is None:
        raise ValueError(f"{spec.name} runs on {spec.device}: only its device's harness runs it")
    if request.steps is not None:
        if not spec.steps:
            raise ValueError(f"{spec.name} does not run a program step by step")
        from .step_runner import step_runner

        return step_runner(spec, request)
    return spec.factory(spec, request)


def builds_here(spec: RunnerSpec) -> bool:
    """:func:`build` makes this runner from the spec and the model alone (a CPU, GPU, browser or
    engine runner of this machine; an external delegate and the reference need their files)."""
    return spec.factory is not None and spec.device not in ("external", "framework")


def cpu(spec: RunnerSpec, request: BuildRequest) -> Runner:
    """LiteRT's CPU interpreter on the spec's kernels."""
    from .litert_cpu import LiteRTCpuRunner

    assert spec.kernels is not None
    return LiteRTCpuRunner(
        request.model, kernels=spec.kernels, signature=request.signature, name=spec.name
    )


def fp16_emulation(spec: RunnerSpec, request: BuildRequest) -> Runner:
    """The fp16 emulation on the CPU, op by op."""
    from .fp16_emulation import Fp16EmulationRunner

    return Fp16EmulationRunner(request.model, signature=request.signature, name=spec.name)


def gpu(spec: RunnerSpec, request: BuildRequest) -> Runner:
    """LiteRT's GPU accelerator at the spec's precision, in a child process."""
    from .litert_gpu import LiteRTGpuRunner

    return LiteRTGpuRunner(
        request.model,
        enforce_f32=spec.precision == "fp32",
        signature=request.signature,
        timeout=request.timeout,
        name=spec.name,
    )


def browser(spec: RunnerSpec, request: BuildRequest) -> Runner:
    """LiteRT.js in headless Chromium: a runner of ``request.session`` (a new browser job for
    this runner alone when None)."""
    from .litert_js import LiteRtJsRunner

    session = request.session
    if session is None:
        session = browser_session(
            request.model, [spec], request.browser_adapter, request.signature, request.timeout
        )
    return LiteRtJsRunner(session, spec)


def external(spec: RunnerSpec, request: BuildRequest) -> Runner:
    """An external delegate ``.so`` (``request.delegate``), in a child process."""
    from .external import ExternalDelegateRunner

    assert request.delegate is not None
    return ExternalDelegateRunner(
        request.model,
        request.delegate,
        options=dict(request.delegate_options),
        input_tensors=dict(request.input_tensors),
        output_names=dict(request.output_names),
        timeout=request.timeout,
    )


def reference(spec: RunnerSpec, request: BuildRequest) -> Runner:
    """The framework reference (Keras, SavedModel or a ``.npz`` reference file at
    ``request.model``), each output read at its shape in ``request.outputs``."""
    from .tf_reference import ReferenceRunner

    return ReferenceRunner(
        request.model,
        outputs=dict(request.outputs),
        signature=request.signature,
        timeout=request.timeout,
    )


def engine(spec: RunnerSpec, request: BuildRequest) -> Runner:
    """The LiteRT-LM engine on the bundle at ``request.model`` (``request.engine``:
    ``max_output_tokens``, ``one_cpu``)."""
    from .litert_lm import LiteRtLmRunner

    return LiteRtLmRunner(request.model, spec, timeout=request.timeout, **request.engine)


def browser_session(
    model: bytes,
    specs: Sequence[RunnerSpec],
    adapter: str,
    signature: str | None,
    timeout: float,
) -> Any:
    """One browser job for the browser runners ``specs`` (one Chromium, one page)."""
    from .litert_js import BrowserSession

    return BrowserSession(model, specs, adapter=adapter, signature=signature, timeout=timeout)
