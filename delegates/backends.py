"""The backends of the device job protocol (:mod:`tflkit.delegates.device_protocol`): its own
words, which the runner registry (:data:`tflkit.delegates.base.RUNNER_SPECS`) gives its runners as
their ``harness``. A leaf: the registry, the protocol and the browser runtime (a runner's child)
all read it, and it reads nothing.
"""

from __future__ import annotations

__all__ = [
    "BACKENDS",
    "BROWSER_BACKENDS",
    "CPU",
    "GPU_DELEGATE",
    "GPU_FP16",
    "GPU_FP32",
    "RECORD_BACKENDS",
    "WASM",
    "WEBGPU_BACKENDS",
    "WEBGPU_FP16",
    "WEBGPU_FP32",
]

#: The backends of a device's harness. cpu: Interpreter
#: (XNNPACK); gpu_fp16 / gpu_fp32: CompiledModel with the GPU accelerator (fp32 with
#: enforce_f32); gpu_delegate: the classic GpuDelegate (Android only).
BACKENDS = CPU, GPU_FP16, GPU_FP32, GPU_DELEGATE = ("cpu", "gpu_fp16", "gpu_fp32", "gpu_delegate")
#: Protocol 1.1, the browser harness only: LiteRT.js's WebGPU accelerator (ML Drift) at fp32 or
#: fp16 precision, and its CPU path (XNNPACK in Wasm). The Linux harness refuses them. A job's
#: default order: the WebGPU backends (fp32 first), then Wasm.
WEBGPU_BACKENDS = WEBGPU_FP32, WEBGPU_FP16 = ("webgpu_fp32", "webgpu_fp16")
WASM = "wasm"
BROWSER_BACKENDS = (*WEBGPU_BACKENDS, WASM)
#: What a job runs when it names no backends, and the runners ``regress record`` records when
#: none is named (``tflkit.delegates.base.RECORD_DEFAULT`` reads it).
RECORD_BACKENDS = (CPU, GPU_FP16, GPU_FP32)
