"""Find the op where the GPU starts to part from the CPU.

1. Capture every intermediate tensor on the CPU (reference kernels,
   ``experimental_preserve_all_tensors=True``) for one input set.
2. *Isolated* error: cut each op out with ``ir.extract_model([op])`` and run it on the GPU with the
   CPU's values of its inputs (all ops in one worker process; a crash is pinned on its op and the
   worker resumes after it). The op's own error, free of what came before.
3. *Accumulated* error: one GPU run of the whole model with every float intermediate marked as
   an output, compared with the CPU's value of each. (Marking outputs can stop the delegate from
   fusing across them, so this is close to, not exactly, the original graph's error.)
4. fp16 hazards from the CPU values: magnitudes above 65504 (overflow to inf in half precision)
   and non-zero magnitudes below 6.1e-5 (subnormal in fp16: precision lost, below 6e-8 flushed
   to zero).

Culprits are ranked: first ops at fault themselves in fp16 (their own outputs leave the fp16
range, or they make inf/NaN from representable inputs), then by isolated error relative to the
op's output peak. An op whose CPU inputs already exceed the fp16 range is ranked last: its
isolated error is inherited from the op that produced them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tflkit import ir
from tflkit.compat.probe import probe, run_jobs

__all__ = ["FP16_MAX", "FP16_MIN_NORMAL", "Localization", "OpError", "capture_cpu", "localize"]

FP16_MAX = 65504.0
FP16_MIN_NORMAL = 6.103515625e-05
FP16_MIN_SUBNORMAL = 5.960464477539063e-08


@dataclass
class Divergence:
    """GPU vs CPU on one op's outputs: ``score = max_abs / peak`` (inf for new non-finite)."""

    max_abs: float
    peak: float
    score: float
    new_nonfinite: int

    def to_json(self) -> dict[str, Any]:
        return {
            "max_abs": _num(self.max_abs),
            "peak": _num(self.peak),
            "score": _num(self.score),
            "new_nonfinite": self.new_nonfinite,
        }


@dataclass
class OpError:
    """One op of the main subgraph, its isolated and accumulated error and its fp16 hazards."""

    op_index: int
    op_type: str
    outputs: list[str]
    status: str = "ok"
    error: str | None = None
    fully_accelerated: bool | None = None
    isolated: Divergence | None = None
    accumulated: Divergence | None = None
    overflow: int = 0
    underflow: int = 0
    flushed: int = 0
    cpu_max_abs: float = 0.0
    inherited: bool = False

    @property
    def own_fault(self) -> bool:
        """Its own outputs leave the fp16 range, or it makes inf/NaN from representable inputs."""
        if self.inherited:
            return False
        return bool(self.overflow) or (
            self.isolated is not None and self.isolated.new_nonfinite > 0
        )

    @property
    def score(self) -> float:
        return self.isolated.score if self.isolated is not None else -1.0

    @property
    def hazards(self) -> list[str]:
        found = []
        if self.overflow:
            found.append(
                f"{self.overflow} values above fp16 max 65504 (max |x| "
                f"{self.cpu_max_abs:.4g}): overflow to inf"
            )
        if self.flushed:
            found.append(f"{self.flushed} non-zero values below 6e-8: flushed to 0 in fp16")
        elif self.underflow:
            found.append(f"{self.underflow} non-zero values below 6.1e-5: fp16 subnormals")
        return found

    def to_json(self) -> dict[str, Any]:
        return {
            "op_index": self.op_index,
            "op_type": self.op_type,
            "outputs": self.outputs,
            "status": self.status,
            "error": self.error,
            "fully_accelerated": self.fully_accelerated,
            "isolated": self.isolated.to_json() if self.isolated else None,
            "accumulated": self.accumulated.to_json() if self.accumulated else None,
            "fp16_overflow": self.overflow,
            "fp16_underflow": self.underflow,
            "fp16_flushed": self.flushed,
            "hazards": self.hazards,
            "input_not_fp16_representable": self.inherited,
        }


@dataclass
class Localization:
    """The per-op picture for one GPU runner against the CPU."""

    runner: str
    threshold: float
    ops: list[OpError] = field(default_factory=list)
    culprits: list[OpError] = field(default_factory=list)
    first_divergent: OpError | None = None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "runner": self.runner,
            "against": "cpu-ref",
            "threshold": self.threshold,
            "culprits": [op.op_index for op in self.culprits],
            "first_divergent": self.first_divergent.op_index if self.first_divergent else None,
            "ops": [op.to_json() for op in self.ops],
            "notes": self.notes,
            "seconds": self.seconds,
        }


def _num(value: float) -> float | str:
    if math.isfinite(value):
        return value
    return "inf" if value > 0 else ("-inf" if value < 0 else "nan")


def divergence(expected: np.ndarray, actual: np.ndarray) -> Divergence:
    """Max abs difference over finite pairs, relative to the expected peak."""
    e = np.asarray(expected, np.float64).reshape(-1)
    a = np.asarray(actual, np.float64).reshape(-1)
    fin_e, fin_a = np.isfinite(e), np.isfinite(a)
    both = fin_e & fin_a
    new_nonfinite = int((fin_e & ~fin_a).sum())
    max_abs = float(np.max(np.abs(a[both] - e[both]))) if both.any() else 0.0
    peak = float(np.max(np.abs(e[fin_e]))) if fin_e.any() else 0.0
    if new_nonfinite:
        score = math.inf
    else:
        score = max_abs / peak if peak > 0 else (0.0 if max_abs == 0 else math.inf)
    return Divergence(max_abs, peak, score, new_nonfinite)


def _merge(parts: list[Divergence]) -> Divergence:
    return max(parts, key=lambda d: (d.score, d.max_abs))


def capture_cpu(
    data: bytes, model: ir.Model, feed: Mapping[str, np.ndarray], inputs: Mapping[str, ir.Tensor]
) -> dict[int, np.ndarray]:
    """Every tensor of the main subgraph after one CPU run (reference kernels), by index."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    interpreter = Interpreter(
        model_content=data,
        experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
        experimental_preserve_all_tensors=True,
    )
    for name, tensor in inputs.items():
        if tuple(feed[name].shape) != tensor.shape:
            interpreter.resize_tensor_input(tensor.index, feed[name].shape)
    interpreter.allocate_tensors()
    for name, tensor in inputs.items():
        interpreter.set_tensor(tensor.index, feed[name])
    interpreter.invoke()
    values: dict[int, np.ndarray] = {}
    for tensor in model.main.tensors:
        if tensor.dtype is None:
            continue
        try:
            values[tensor.index] = np.array(interpreter.get_tensor(tensor.index))
        except ValueError:
            continue
    return values


def _hazards(record: OpError, values: list[np.ndarray]) -> None:
    for value in values:
        if value.dtype.kind != "f":
            continue
        mags = np.abs(value[np.isfinite(value)].astype(np.float64))
        record.overflow += int((mags > FP16_MAX).sum())
        nonzero = mags[mags > 0]
        record.underflow += int((nonzero < FP16_MIN_NORMAL).sum())
        record.flushed += int((nonzero < FP16_MIN_SUBNORMAL / 2).sum())
        if mags.size:
            record.cpu_max_abs = max(record.cpu_max_abs, float(mags.max()))


def _exceeds_fp16(value: np.ndarray) -> bool:
    if value.dtype.kind != "f":
        return False
    finite = value[np.isfinite(value)]
    return bool(finite.size) and float(np.max(np.abs(finite))) > FP16_MAX


def _float_ops(model: ir.Model) -> list[ir.Op]:
    """Ops with a float output that compute on activations.

    Ops fed by constants only (e.g. DEQUANTIZE of fp16 weights) are left out: the delegate folds
    them into the weights of their consumer, so their value is not a runtime activation.
    """
    return [
        op
        for op in model.main.ops
        if any(t.dtype is not None and np.dtype(t.dtype).kind == "f" for t in op.outputs)
        and any(t is not None and not t.is_constant for t in op.inputs)
    ]


def _accumulated(
    data: bytes, ops: list[ir.Op], feed: Mapping[str, np.ndarray], enforce_f32: bool, timeout: float
) -> tuple[dict[str, np.ndarray], str | None]:
    """GPU values of every float op output, from one run with all of them marked as outputs."""
    marked = ir.load(data)
    main = marked.main
    present = {id(t) for t in main.outputs}
    extra = [
        main.tensors[t.index]
        for op in ops
        for t in op.outputs
        if np.dtype(t.dtype).kind == "f" and id(main.tensors[t.index]) not in present
    ]
    main.outputs = list(main.outputs) + extra
    if marked.signatures:
        sig = marked.signatures[0]
        for tensor in extra:
            sig.outputs.setdefault(tensor.name, tensor)
    result = probe(
        ir.dumps(marked),
        run=True,
        inputs=dict(feed),
        enforce_f32=enforce_f32,
        timeout=timeout,
        use_cache=False,
        locate_crash=False,
    )
    if not result.ran:
        return {}, f"accumulated run {result.status}: {result.log.fatal or result.error}"
    by_name = dict(result.outputs or {})
    if marked.signatures:  # signature names -> tensor names
        sig = marked.signatures[0]
        by_name = {sig.outputs[k].name: v for k, v in by_name.items() if k in sig.outputs}
    return by_name, None


def localize(
    data: bytes,
    feed: Mapping[str, np.ndarray],
    *,
    inputs: Mapping[str, ir.Tensor] | None = None,
    runner: str = "gpu-fp16",
    threshold: float = 5e-2,
    top: int = 5,
    max_ops: int = 1000,
    timeout: float = 300.0,
    accumulated: bool = True,
) -> Localization:
    """Per-op isolated and accumulated GPU error against the CPU, ranked culprits, fp16 hazards.

    ``feed`` is one input set by entry-point name; ``inputs`` maps those names to tensors of the
    model's main subgraph (default: its graph inputs by tensor name). ``threshold`` is the score
    (max_abs / peak) above which an op counts as divergent.
    """
    start = time.perf_counter()
    model = ir.load(data)
    enforce_f32 = runner == "gpu-fp32"
    report = Localization(runner, threshold)
    if inputs is None:
        inputs = {t.name: t for t in model.main.inputs}
    if any(t.subgraph is None or t.subgraph.index != 0 for t in inputs.values()):
        report.notes.append("the entry point is not subgraph 0: localization covers subgraph 0")
        inputs = {t.name: t for t in model.main.inputs}
        feed = {t.name: feed.get(t.name) for t in model.main.inputs}  # type: ignore[misc]
    cpu = capture_cpu(data, model, feed, inputs)
    ops = _float_ops(model)
    if len(ops) > max_ops:
        report.notes.append(f"{len(ops)} float ops: only the first {max_ops} are checked")
        ops = ops[:max_ops]
    records: list[OpError] = []
    models, feeds = [], []
    for op in ops:
        record = OpError(op.index, op.type, [t.name for t in op.outputs])
        _hazards(record, [cpu[t.index] for t in op.outputs if t.index in cpu])
        if not enforce_f32:
            record.inherited = any(
                _exceeds_fp16(cpu[t.index])
                for t in op.inputs
                if t is not None and not t.is_constant and t.index in cpu
            )
        records.append(record)
        try:
            sub = ir.extract_model([op])
            originals = {t.name: t for t in op.inputs if t is not None}
            sub_feed = {t.name: cpu[originals[t.name].index] for t in sub.main.inputs}
        except Exception as exc:  # an op that cannot stand alone (e.g. reads a variable)
            record.status, record.error = "skipped", f"cannot cut out: {exc}"
            continue
        models.append((record, ir.dumps(sub)))
        feeds.append(sub_feed)
    jobs = run_jobs([m for _, m in models], feeds, enforce_f32=enforce_f32, timeout_per_job=timeout)
    for (record, _), job in zip(models, jobs, strict=True):
        record.status, record.error = job.status, job.error
        record.fully_accelerated = job.fully_accelerated if job.compiled else None
        if job.outputs is None:
            continue
        parts = [
            divergence(cpu[ops_t.index], job.outputs[ops_t.name])
            for ops_t in model.main.ops[record.op_index].outputs
            if ops_t.name in job.outputs and ops_t.index in cpu
        ]
        if parts:
            record.isolated = _merge(parts)
    if accumulated:
        values, note = _accumulated(data, ops, feed, enforce_f32, timeout)
        if note:
            report.notes.append(note)
        for record in records:
            op = model.main.ops[record.op_index]
            parts = [
                divergence(cpu[t.index], values[t.name])
                for t in op.outputs
                if t.name in values and t.index in cpu
            ]
            if parts:
                record.accumulated = _merge(parts)
    report.ops = records
    ranked = sorted(
        (r for r in records if r.own_fault or (r.isolated is not None and r.score > threshold)),
        key=lambda r: (not r.own_fault, r.inherited, -r.score, r.op_index),
    )
    crashed = [r for r in records if r.status in ("crashed", "timeout")]
    report.culprits = (crashed + ranked)[:top]
    report.first_divergent = next(
        (r for r in records if r.accumulated is not None and r.accumulated.score > threshold),
        None,
    )
    report.seconds = time.perf_counter() - start
    return report
