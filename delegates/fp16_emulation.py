"""An fp16 GPU, predicted on the CPU independently of any GPU backend.

Every op of the entry subgraph (the main one, or the signature's own: an LLM graph's decode) is
cut out (``ir.extract_model([op])``) with its float32 constants rounded to fp16, and the ops run
one after the other on the CPU interpreter; every float value that flows between ops (the graph
inputs too) is rounded to fp16 on the way (values beyond 65504 become inf, values below 2^-24
flush to zero). What a half-precision GPU stores between kernels is therefore modelled op by op,
whatever fusions a backend applies: an overflow, underflow or cancellation shows up here, at the
op that causes it.

Control flow is followed, not cut out: an IF runs the branch its (emulated) condition picks and a
WHILE runs its condition and body subgraphs in turn, each of their ops cut out and rounded the
same way; values cross into and out of a branch rounded to fp16. What it cannot emulate (stateful
variables, CALL_ONCE, a CALL) makes the runner unavailable, with the reason.

What it does not model: a backend's accumulators (fp32 on most GPUs, fp16 on some: inside one op
this runner computes in fp32) and its transcendental approximations. Integer tensors (indices,
shapes, quantized tensors) pass unchanged.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tflkit.ir.op_traits import CONDITIONAL as _CONTROL
from tflkit.ir.op_traits import MOVES_DATA as _LAYOUT
from tflkit.ir.op_traits import STATEFUL as _STATEFUL
from tflkit.jsonable import plain_fields

from .litert_cpu import invoke_slots, start_interpreter
from .protocol import Feed, RunnerId, RunnerUnavailable, RunResult

__all__ = [
    "FP16_MAX",
    "Fp16EmulationRunner",
    "beyond_fp16",
    "round_fp16",
    "round_model_constants",
]

FP16_MAX = 65504.0


def beyond_fp16(value: np.ndarray) -> bool:
    """A float value fp16 cannot hold: a finite element above :data:`FP16_MAX` in magnitude."""
    value = np.asarray(value)
    if value.dtype.kind != "f":
        return False
    finite = value[np.isfinite(value)]
    return bool(finite.size) and float(np.max(np.abs(finite))) > FP16_MAX


#: a WHILE whose condition stays true this long is reported, not run for ever
MAX_ITERATIONS = 100_000


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
    #: IF: (then, else) subgraph indices; WHILE: (cond, body)
    calls: tuple[int, int] | None = None
    #: per output, the zero point of a per-tensor quantized output (else None)
    zero_points: list[int | None] | None = None
    #: how many products or values each output element sums (:func:`reduction_length`)
    terms: int = 1


@dataclass
class _Program:
    """One subgraph as a list of steps, with its inputs, outputs and the values it starts from."""

    inputs: list[int]
    outputs: list[int]
    steps: list[_Step]
    #: values no op produces: zero-element tensors, and constants a control-flow op passes on
    start: dict[int, np.ndarray]


@dataclass
class Fp16Hazard:
    """An op that made inf/NaN from finite inputs, or overflowed fp16 (first input set seen)."""

    op_index: int
    op_type: str
    what: str

    def to_json(self) -> dict[str, Any]:
        return plain_fields(self)


class Fp16EmulationRunner:
    """Runs a ``.tflite`` op by op on the CPU, rounding weights and every op's output to fp16.

    ``store`` (what every value between ops becomes) and ``fp16_constants`` are the two things a
    variant of this runner changes (:mod:`tflkit.delegates.step_flips`).
    """

    fp16_constants = True

    def store(self, value: np.ndarray, zero_point: int | None = None, terms: int = 1) -> np.ndarray:
        """What a value an op stores becomes (``zero_point``: of a quantized op output; None
        for graph inputs and branch arguments; ``terms``: how many values each element of it
        sums): here, rounded to fp16."""
        return round_fp16(value)

    def __init__(self, model: bytes, *, signature: str | None = None, name: str | None = None):
        self.model = model
        self.signature = signature
        self.name = name or RunnerId("cpu", "fp16").name
        self._programs: dict[int, _Program] = {}
        self._feeds: dict[str, int] = {}
        self._outputs: dict[str, int] = {}
        self._compile_seconds: float | None = None
        self._entry = 0

    def activate(self) -> None:
        from tflkit import ir
        from tflkit.ir.entry import entry_point

        start = time.perf_counter()
        model = ir.load(self.model)
        _, subgraph, ins, outs = entry_point(model, self.signature)
        # a signature's own subgraph (an LLM graph's decode) is emulated like the main one
        self._entry = next(i for i, sg in enumerate(model.subgraphs) if sg is subgraph)
        stateful = sorted({op.type for sg in model.subgraphs for op in sg.ops} & _STATEFUL)
        if stateful:
            raise RunnerUnavailable(
                "fp16 emulation runs ops one by one and cannot cut out " + ", ".join(stateful)
            )
        self._feeds = {name: t.index for name, t in ins.items()}
        self._outputs = {name: t.index for name, t in outs.items()}
        self._programs = {}
        pending = [self._entry]
        while pending:
            index = pending.pop()
            if index in self._programs:
                continue
            program = _program(model, index, self.fp16_constants)
            self._programs[index] = program
            pending += [i for step in program.steps if step.calls for i in step.calls]
        self._compile_seconds = time.perf_counter() - start

    def trace(
        self, feed: Feed, hazards: dict[int, Fp16Hazard] | None = None
    ) -> dict[int, np.ndarray]:
        """Every tensor's emulated value after one run, by index in the entry subgraph."""
        main = self._programs[self._entry]
        values: dict[int, np.ndarray] = dict(main.start)
        values.update(
            {self._feeds[name]: self.store(np.asarray(array)) for name, array in feed.items()}
        )
        self._execute(main, values, {} if hazards is None else hazards)
        return values

    def run_one(self, feed: Feed) -> tuple[dict[str, np.ndarray], list[Fp16Hazard]]:
        """One input set: its outputs by name and the hazards it met, in op order."""
        hazards: dict[int, Fp16Hazard] = {}
        values = self.trace(feed, hazards)
        outputs = {name: np.array(values[i]) for name, i in self._outputs.items()}
        return outputs, [hazards[k] for k in sorted(hazards)]

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
        branches = sorted(set(self._programs) - {self._entry})
        if branches:
            notes.append(
                "control flow followed: subgraphs "
                + ", ".join(map(str, branches))
                + " run op by op where the model's IF/WHILE ops call them"
            )
        return RunResult(
            self.name,
            "ok",
            outputs=outputs,
            executed={
                "runtime": "LiteRT Interpreter, op by op",
                "device": "CPU",
                "kernels": "builtin, one op per interpreter",
                "precision": "fp16 (emulated: weights and every op output rounded)",
                "ops": sum(len(p.steps) for p in self._programs.values()),
                "fp16_hazards": [h.to_json() for h in ordered],
            },
            compile_seconds=self._compile_seconds,
            infer_seconds=times,
            notes=notes,
        )

    def _call(self, index: int, args: Sequence[np.ndarray]) -> tuple[list[np.ndarray], dict]:
        """Run subgraph ``index`` on ``args``: (its outputs, the hazards inside it)."""
        program = self._programs[index]
        values = dict(program.start)
        values.update(
            {i: self.store(np.asarray(a)) for i, a in zip(program.inputs, args, strict=True)}
        )
        hazards: dict[int, Fp16Hazard] = {}
        self._execute(program, values, hazards)
        return [values[i] for i in program.outputs], hazards

    def storage_effects(
        self, feed: Feed, output: str, *, budget: float = 30.0
    ) -> tuple[list[tuple[int, str, float]], bool]:
        """Which ops' fp16 storage moves ``output``: per op of the main subgraph, the largest
        change of ``output`` when only that op's outputs are rounded to fp16 (the inputs and
        every other op kept in fp32, weights in fp16), largest first; and whether every op was
        tried within ``budget`` seconds. Ops whose outputs fp16 holds exactly, and ops that only
        move values (RESHAPE, CONCATENATION...: their producer counts), are skipped."""
        main = self._programs[self._entry]
        target = self._outputs[output]

        def run(only: int) -> dict[int, np.ndarray]:
            values = dict(main.start)
            values.update({self._feeds[n]: np.asarray(a) for n, a in feed.items()})
            self._execute(main, values, {}, only=only)
            return values

        exact = run(-1)
        reference = exact[target].astype(np.float64)
        effects, start = [], time.perf_counter()
        for step in main.steps:
            produced = [exact[t] for _, t in step.outputs]
            if step.op_type in _LAYOUT or all(
                v.dtype.kind != "f" or np.array_equal(round_fp16(v), v) for v in produced
            ):
                continue
            if time.perf_counter() - start > budget:
                return sorted(effects, key=lambda e: -e[2]), False
            moved = run(step.index)[target].astype(np.float64)
            both = np.isfinite(moved) & np.isfinite(reference)
            change = np.abs(np.where(both, moved - reference, 0.0)).max(initial=0.0)
            if not both.all():
                change = np.inf
            effects.append((step.index, step.op_type, float(change)))
        return sorted(effects, key=lambda e: -e[2]), True

    def _execute(
        self,
        program: _Program,
        values: dict[int, np.ndarray],
        hazards: dict[int, Fp16Hazard],
        only: int | None = None,
    ) -> None:
        """Run ``program`` on ``values``; with ``only``, store the outputs of that op alone as
        :meth:`store` makes them, every other op's exactly."""
        for step in program.steps:
            store = self.store if only is None or step.index == only else _keep
            if step.calls is None:
                _run(step, values, hazards, store)
                continue
            args = [values[t] for _, t in step.inputs]
            if step.op_type == "IF":
                chosen = (
                    step.calls[0] if bool(np.asarray(args[0]).reshape(-1)[0]) else step.calls[1]
                )
                results, inner = self._call(chosen, args[1:])
            else:
                results, inner = self._loop(step, args)
            for (_, tensor), value in zip(step.outputs, results, strict=True):
                values[tensor] = store(np.asarray(value))
            if inner and step.index not in hazards:
                first = inner[min(inner)]
                hazards[step.index] = Fp16Hazard(
                    step.index,
                    step.op_type,
                    f"inside it, op #{first.op_index} {first.op_type}: {first.what}",
                )

    def _loop(self, step: _Step, args: list[np.ndarray]) -> tuple[list[np.ndarray], dict]:
        assert step.calls is not None
        cond, body = step.calls
        hazards: dict[int, Fp16Hazard] = {}
        for _ in range(MAX_ITERATIONS):
            (go, *_), inner = self._call(cond, args)
            hazards = hazards or inner
            if not bool(np.asarray(go).reshape(-1)[0]):
                return args, hazards
            args, inner = self._call(body, args)
            hazards = hazards or inner
        raise RuntimeError(f"WHILE op #{step.index} ran {MAX_ITERATIONS} iterations")

    def deactivate(self) -> None:
        self._programs = {}


def _program(model: Any, index: int, fp16: bool = True) -> _Program:
    """Subgraph ``index`` of ``model`` as standalone one-op interpreters (constants in fp16)."""
    keep = round_fp16 if fp16 else (lambda value: value)
    from tflkit import ir

    subgraph = model.subgraphs[index]
    # zero-element constants (an empty shape vector) have no bytes, so a cut-out op takes
    # them as inputs: feed them their (empty) value
    start = {
        t.index: np.zeros(t.shape, t.dtype)
        for t in subgraph.tensors
        if t.producer is None
        and t.buffer is not None
        and not t.is_constant
        and t.dtype is not None
        and not t.is_graph_input
    }
    steps = []
    for op in subgraph.ops:
        if op.type in _CONTROL:
            calls = op.referenced_subgraphs
            keys = ("thenSubgraphIndex", "elseSubgraphIndex")
            if op.type == "WHILE":
                keys = ("condSubgraphIndex", "bodySubgraphIndex")
            for t in op.inputs:  # constants passed to a branch: their fp16 value
                if t is not None and t.is_constant and t.data is not None:
                    start[t.index] = keep(np.array(t.data))
            steps.append(
                _Step(
                    op.index,
                    op.type,
                    None,
                    [(-1, t.index) for t in op.inputs if t is not None],
                    [(-1, t.index) for t in op.outputs],
                    calls=(calls[keys[0]], calls[keys[1]]),
                )
            )
            continue
        try:
            sub = ir.extract_model([op])
        except Exception as exc:
            raise RunnerUnavailable(f"op #{op.index} {op.type} cannot stand alone: {exc}") from None
        if fp16:
            round_model_constants(sub)
        interpreter = start_interpreter(ir.dumps(sub), kernels="builtin")
        by_name = {t.name: t.index for t in op.inputs if t is not None}
        by_name.update({t.name: t.index for t in op.outputs})
        details_in = interpreter.get_input_details()
        details_out = interpreter.get_output_details()
        produced = {t.name: t for t in op.outputs}
        steps.append(
            _Step(
                op.index,
                op.type,
                interpreter,
                [(d["index"], by_name[d["name"]]) for d in details_in],
                [(d["index"], by_name[d["name"]]) for d in details_out],
                zero_points=[_zero_point(produced[d["name"]]) for d in details_out],
                terms=reduction_length(op),
            )
        )
    return _Program(
        [t.index for t in subgraph.inputs], [t.index for t in subgraph.outputs], steps, start
    )


def _keep(value: np.ndarray, zero_point: int | None = None, terms: int = 1) -> np.ndarray:
    return value


def reduction_length(op: Any) -> int:
    """How many products or values each output element of ``op`` sums (1 for ops that sum
    nothing): the length of the accumulation a GPU carries out at its own precision."""
    inputs = [t for t in op.inputs if t is not None]
    shapes = [tuple(int(d) for d in (t.shape or ())) for t in inputs]
    if op.type in ("CONV_2D", "TRANSPOSE_CONV") and len(shapes) > 1:  # weights [O, kh, kw, I]
        return max(1, math.prod(shapes[1][1:]))
    if op.type == "CONV_3D" and len(shapes) > 1:  # weights [kd, kh, kw, I, O]
        return max(1, math.prod(shapes[1][:-1]))
    if op.type == "DEPTHWISE_CONV_2D" and len(shapes) > 1 and len(shapes[1]) == 4:
        return max(1, shapes[1][1] * shapes[1][2])
    if op.type == "FULLY_CONNECTED" and len(shapes) > 1 and shapes[1]:
        return max(1, shapes[1][-1])
    if op.type == "BATCH_MATMUL" and shapes and shapes[0]:
        adjoint = bool(getattr(op.options, "adjX", False))
        return max(1, shapes[0][-2] if adjoint and len(shapes[0]) > 1 else shapes[0][-1])
    if op.type == "AVERAGE_POOL_2D":
        options = op.options
        return max(1, getattr(options, "filterHeight", 1) * getattr(options, "filterWidth", 1))
    if op.type in ("MEAN", "SUM") and inputs and op.outputs:
        size = math.prod(max(1, d) for d in shapes[0])
        out = math.prod(max(1, int(d)) for d in (op.outputs[0].shape or ()))
        return max(1, size // max(1, out))
    return 1


def _zero_point(tensor: Any) -> int | None:
    """The zero point of a per-tensor quantized tensor, else None."""
    grid = tensor.scale_zero_point
    return None if grid is None else grid[1]


def _run(
    step: _Step,
    values: dict[int, np.ndarray],
    hazards: dict[int, Fp16Hazard],
    store: Callable[[np.ndarray, int | None, int], np.ndarray] | None = None,
) -> None:
    """Run one cut-out op on ``values``, keep its outputs as ``store`` makes them (rounded to
    fp16), note a new fp16 hazard."""
    interpreter = step.interpreter
    fed = {slot: values[tensor] for slot, tensor in step.inputs}
    finite_in = all(v.dtype.kind != "f" or np.isfinite(v).all() for v in fed.values())
    invoke_slots(interpreter, fed)
    zero_points = step.zero_points or [None] * len(step.outputs)
    for (slot, tensor), zero_point in zip(step.outputs, zero_points, strict=True):
        raw = np.array(interpreter.get_tensor(slot))
        rounded = round_fp16(raw) if store is None else store(raw, zero_point, step.terms)
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


def round_model_constants(model: Any) -> None:
    """Round every float32 constant of ``model`` to fp16 (what a half-precision GPU holds)."""
    for tensor in (t for sg in model.subgraphs for t in sg.tensors):
        data = tensor.data
        if not tensor.is_constant or data is None or data.dtype != np.float32:
            continue
        if tensor.sparsity is not None:
            continue
        tensor.buffer = model.intern_buffer(round_fp16(np.asarray(data)))
