"""An fp16 GPU, predicted on the CPU independently of any GPU backend.

Every op of the main subgraph is cut out (``ir.extract_model([op])``) with its float32 constants
rounded to fp16, and the ops run one after the other on the CPU interpreter; every float value
that flows between ops (the graph inputs too) is rounded to fp16 on the way (values beyond
65504 become inf, values below 2^-24 flush to zero). What a half-precision GPU stores between
kernels is therefore modelled op by op, whatever fusions a backend applies: an overflow,
underflow or cancellation shows up here, at the op that causes it.

What it does not model: a backend's accumulators (fp32 on most GPUs, fp16 on some: inside one op
this runner computes in fp32) and its transcendental approximations. Integer tensors (indices,
shapes, quantized tensors) pass unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import Feed, RunnerUnavailable, RunResult

__all__ = ["FP16_MAX", "Fp16EmulationRunner", "round_fp16", "round_model_constants"]

FP16_MAX = 65504.0
_STATEFUL = {"WHILE", "IF", "CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL"}


def round_fp16(value: np.ndarray) -> np.ndarray:
    """``value`` rounded to the nearest fp16 (inf beyond 65504), kept in its float dtype."""
    if value.dtype.kind != "f":
        return value
    with np.errstate(over="ignore", invalid="ignore"):
        return value.astype(np.float16).astype(value.dtype)


@dataclass
class _Step:
    """One op as a standalone interpreter, with where its tensors live in the full graph."""

    index: int
    op_type: str
    interpreter: Any
    inputs: list[tuple[int, int]]  # (interpreter tensor index, full-graph tensor index)
    outputs: list[tuple[int, int]]


@dataclass
class Fp16Hazard:
    """An op that made inf/NaN from finite inputs, or overflowed fp16 (first input set seen)."""

    op_index: int
    op_type: str
    what: str

    def to_json(self) -> dict[str, Any]:
        return {"op_index": self.op_index, "op_type": self.op_type, "what": self.what}


class Fp16EmulationRunner:
    """Runs a ``.tflite`` op by op on the CPU, rounding weights and every op's output to fp16."""

    def __init__(self, model: bytes, *, signature: str | None = None, name: str = "cpu-fp16"):
        self.model = model
        self.signature = signature
        self.name = name
        self._steps: list[_Step] = []
        self._feeds: dict[str, int] = {}
        self._outputs: dict[str, int] = {}
        self._empty: dict[int, np.ndarray] = {}
        self._compile_seconds: float | None = None

    def activate(self) -> None:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        from tflkit import ir
        from tflkit.inputs import entry_point

        start = time.perf_counter()
        model = ir.load(self.model)
        _, subgraph, ins, outs = entry_point(model, self.signature)
        if subgraph is not model.main:
            raise RunnerUnavailable("fp16 emulation covers the main subgraph only")
        stateful = sorted({op.type for op in subgraph.ops if op.type in _STATEFUL})
        if stateful or len(model.subgraphs) > 1:
            raise RunnerUnavailable(
                "fp16 emulation runs ops one by one and cannot cut out "
                + (", ".join(stateful) if stateful else "ops that call other subgraphs")
            )
        self._feeds = {name: t.index for name, t in ins.items()}
        # zero-element constants (an empty shape vector) have no bytes, so a cut-out op takes
        # them as inputs: feed them their (empty) value
        self._empty = {
            t.index: np.zeros(t.shape, t.dtype)
            for t in subgraph.tensors
            if t.producer is None and t.buffer is not None and not t.is_constant
            and t.dtype is not None and not t.is_graph_input
        }
        self._outputs = {name: t.index for name, t in outs.items()}
        resolver = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        self._steps = []
        for op in subgraph.ops:
            try:
                sub = ir.extract_model([op])
            except Exception as exc:
                raise RunnerUnavailable(
                    f"op #{op.index} {op.type} cannot stand alone: {exc}"
                ) from None
            round_model_constants(sub)
            interpreter = Interpreter(
                model_content=ir.dumps(sub), experimental_op_resolver_type=resolver
            )
            by_name = {t.name: t.index for t in op.inputs if t is not None}
            by_name.update({t.name: t.index for t in op.outputs})
            details_in = interpreter.get_input_details()
            details_out = interpreter.get_output_details()
            self._steps.append(
                _Step(
                    op.index,
                    op.type,
                    interpreter,
                    [(d["index"], by_name[d["name"]]) for d in details_in],
                    [(d["index"], by_name[d["name"]]) for d in details_out],
                )
            )
        self._compile_seconds = time.perf_counter() - start

    def trace(
        self, feed: Feed, hazards: dict[int, Fp16Hazard] | None = None
    ) -> dict[int, np.ndarray]:
        """Every tensor's emulated value after one run, by index in the main subgraph."""
        values: dict[int, np.ndarray] = dict(self._empty)
        values.update(
            {self._feeds[name]: round_fp16(np.asarray(array)) for name, array in feed.items()}
        )
        for step in self._steps:
            self._run(step, values, {} if hazards is None else hazards)
        return values

    def infer(self, feeds: Sequence[Feed]) -> RunResult:
        outputs, times = [], []
        hazards: dict[int, Fp16Hazard] = {}
        for feed in feeds:
            start = time.perf_counter()
            values = self.trace(feed, hazards)
            outputs.append({name: np.array(values[i]) for name, i in self._outputs.items()})
            times.append(time.perf_counter() - start)
        ordered = [hazards[k] for k in sorted(hazards)]
        notes = [f"fp16 hazard at op #{h.op_index} {h.op_type}: {h.what}" for h in ordered[:5]]
        return RunResult(
            self.name,
            "ok",
            outputs=outputs,
            executed={
                "runtime": "LiteRT Interpreter, op by op",
                "device": "CPU",
                "kernels": "builtin, one op per interpreter",
                "precision": "fp16 (emulated: weights and every op output rounded)",
                "ops": len(self._steps),
                "fp16_hazards": [h.to_json() for h in ordered],
            },
            compile_seconds=self._compile_seconds,
            infer_seconds=times,
            notes=notes,
        )

    @staticmethod
    def _run(step: _Step, values: dict[int, np.ndarray], hazards: dict[int, Fp16Hazard]) -> None:
        interpreter = step.interpreter
        resized = False
        for slot, tensor in step.inputs:
            value = values[tensor]
            if tuple(interpreter.get_tensor_details()[slot]["shape"]) != value.shape:
                interpreter.resize_tensor_input(slot, value.shape)
                resized = True
        if resized or not getattr(interpreter, "_tflkit_allocated", False):
            interpreter.allocate_tensors()
            interpreter._tflkit_allocated = True
        finite_in = True
        for slot, tensor in step.inputs:
            value = values[tensor]
            interpreter.set_tensor(slot, value)
            if value.dtype.kind == "f" and not np.isfinite(value).all():
                finite_in = False
        interpreter.invoke()
        for slot, tensor in step.outputs:
            raw = np.array(interpreter.get_tensor(slot))
            rounded = round_fp16(raw)
            values[tensor] = rounded
            if step.index in hazards or raw.dtype.kind != "f" or not finite_in:
                continue  # an op fed inf/NaN inherits them (kernels may clamp them to 3.4e38)
            if not np.isfinite(raw).all():
                hazards[step.index] = Fp16Hazard(
                    step.index, step.op_type, "makes inf/NaN from finite fp16 inputs"
                )
            elif np.isfinite(raw).all() and not np.isfinite(rounded).all():
                peak = float(np.max(np.abs(raw)))
                hazards[step.index] = Fp16Hazard(
                    step.index,
                    step.op_type,
                    f"output overflows fp16 (max |x| {peak:.4g} > {FP16_MAX:g})",
                )

    def deactivate(self) -> None:
        self._steps = []


def round_model_constants(model: Any) -> None:
    """Round every float32 constant of ``model`` to fp16 (what a half-precision GPU holds)."""
    for tensor in model.main.tensors:
        data = tensor.data
        if not tensor.is_constant or data is None or data.dtype != np.float32:
            continue
        if tensor.sparsity is not None:
            continue
        tensor.buffer = model.intern_buffer(round_fp16(np.asarray(data)))
