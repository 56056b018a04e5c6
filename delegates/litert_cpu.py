"""LiteRT on the CPU, in this process: XNNPACK (the default) or the reference kernels.

The classic ``Interpreter`` reads every dtype back (int64 included), so it is the ground every
other runner is compared with. ``kernels="reference"`` uses ``OpResolverType.BUILTIN_REF``: the
slow, straightforward kernels, useful to tell an XNNPACK difference from a model problem.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from .base import Feed, RunResult

__all__ = ["LiteRTCpuRunner"]

KERNELS = ("xnnpack", "reference")


class LiteRTCpuRunner:
    """Runs a ``.tflite`` with ``ai_edge_litert.interpreter.Interpreter`` on the CPU."""

    def __init__(
        self,
        model: bytes,
        *,
        kernels: str = "xnnpack",
        signature: str | None = None,
        num_threads: int | None = None,
        name: str | None = None,
    ) -> None:
        if kernels not in KERNELS:
            raise ValueError(f"kernels must be one of {KERNELS}, got {kernels!r}")
        self.model = model
        self.kernels = kernels
        self.signature = signature
        self.num_threads = num_threads
        self.name = name or ("cpu" if kernels == "xnnpack" else "cpu-ref")
        self._interpreter: Any = None
        self._compile_seconds: float | None = None

    def activate(self) -> None:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        resolver = (
            OpResolverType.BUILTIN if self.kernels == "xnnpack" else OpResolverType.BUILTIN_REF
        )
        start = time.perf_counter()
        self._interpreter = Interpreter(
            model_content=self.model,
            experimental_op_resolver_type=resolver,
            num_threads=self.num_threads,
        )
        # No allocate_tensors() here: the first feed resizes dynamic inputs first (XNNPACK
        # cannot prepare some graphs at the stored placeholder shape, e.g. [1, 1] audio).
        self._compile_seconds = time.perf_counter() - start

    def infer(self, feeds: Sequence[Feed]) -> RunResult:
        interpreter = self._interpreter
        signatures = interpreter.get_signature_list()
        call = self._signature_call(signatures) if signatures else self._tensor_call()
        outputs, times = [], []
        for feed in feeds:
            start = time.perf_counter()
            result = call(feed)
            times.append(time.perf_counter() - start)
            outputs.append(result)
        return RunResult(
            self.name,
            "ok",
            outputs=outputs,
            executed={
                "runtime": "LiteRT Interpreter",
                "device": "CPU",
                "kernels": "XNNPACK" if self.kernels == "xnnpack" else "reference (BUILTIN_REF)",
                "precision": self._precision(),
            },
            compile_seconds=self._compile_seconds,
            infer_seconds=times,
        )

    def _precision(self) -> str:
        """ "int8" when ops write quantized 8-bit tensors (the kernels compute on their grid),
        "fp32, int8 weights" when only constants are quantized (dynamic range), else "fp32"."""
        interpreter = self._interpreter
        written = {i for op in interpreter._get_ops_details() for i in op["outputs"]}
        weights = False
        for detail in interpreter.get_tensor_details():
            scales = detail.get("quantization_parameters", {}).get("scales")
            if detail["dtype"] in (np.int8, np.uint8) and scales is not None and len(scales):
                if detail["index"] in written:
                    return "int8"
                weights = True
        return "fp32, int8 weights" if weights else "fp32"

    def _signature_call(self, signatures: dict[str, Any]) -> Any:
        key = self.signature or next(iter(signatures))
        if key not in signatures:
            raise ValueError(f"no signature {key!r}; the model has {list(signatures)}")
        runner = self._interpreter.get_signature_runner(key)

        def call(feed: Feed) -> dict[str, np.ndarray]:
            return {k: np.array(v) for k, v in runner(**feed).items()}

        return call

    def _tensor_call(self) -> Any:
        interpreter = self._interpreter
        inputs = {d["name"]: d for d in interpreter.get_input_details()}
        outputs = interpreter.get_output_details()

        allocated = False

        def call(feed: Feed) -> dict[str, np.ndarray]:
            nonlocal allocated
            for name, array in feed.items():
                detail = inputs[name]
                if tuple(detail["shape"]) != array.shape:
                    interpreter.resize_tensor_input(detail["index"], array.shape)
                    detail["shape"] = np.array(array.shape)
                    allocated = False
            if not allocated:
                interpreter.allocate_tensors()
                allocated = True
            for name, array in feed.items():
                interpreter.set_tensor(inputs[name]["index"], array)
            interpreter.invoke()
            return {d["name"]: np.array(interpreter.get_tensor(d["index"])) for d in outputs}

        return call

    def deactivate(self) -> None:
        self._interpreter = None
