"""Find the op where a runner starts to part from the CPU.

Three kinds of runner are localized, each the same way:

- a GPU (``gpu-fp16``/``gpu-fp32``): every op cut out with ``ir.extract_model([op])`` and run
  alone on the GPU with the CPU's values of its inputs (all ops in one worker process; a crash
  is pinned on its op and the worker resumes after it);
- the fp16 emulation (``cpu-fp16``): every op alone with its constants, inputs and outputs
  rounded to fp16;
- a ``.tflite`` reference (``reference``): every op of the model alone, fed with the reference
  model's values of the same-named tensors (put on this model's quantization grid where the two
  differ: its ops read integers with their own scale and zero point), against the reference's
  value of its outputs (a rewritten model checked against the one it replaces).

1. Capture every intermediate tensor on the CPU (reference kernels,
   ``experimental_preserve_all_tensors=True``) for one input set: the expected values (the
   reference model's own, in the reference mode).
2. *Isolated* error: each op run alone on the runner with the expected values of its inputs,
   against the expected value of its outputs. The op's own error, free of what came before.
3. *Accumulated* error: the runner's value of every intermediate on the same input set (one GPU
   run with every intermediate marked as an output; the emulation's own chain; the model's CPU
   values), against the expected value.
4. fp16 hazards from the CPU values: magnitudes above 65504 (overflow to inf in half precision)
   and non-zero magnitudes below 6.1e-5 (subnormal in fp16: precision lost, below 6e-8 flushed
   to zero).

Quantized tensors are compared dequantized (their scale and zero point). Culprits are ranked:
first ops at fault themselves in fp16 (their own outputs leave the fp16 range, or they make
inf/NaN from representable inputs), then by isolated error relative to the op's output peak. An
op whose CPU inputs already exceed the fp16 range is ranked last: its isolated error is inherited
from the op that produced them; so is, against a ``.tflite`` reference, an op whose inputs'
reference values leave its own quantization grid (clipped when put on it). The *first divergent
op* is the earliest op at fault or whose isolated error exceeds the threshold, so it never comes
after a culprit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tflkit import ir
from tflkit.compare.divergence import Divergence, Localization, OpError, divergence, merge
from tflkit.delegates.base import RunnerSpec, find_spec, runner_spec
from tflkit.delegates.fp16_emulation import FP16_MAX, beyond_fp16, round_fp16, round_model_constants
from tflkit.delegates.litert_cpu import capture, run_once
from tflkit.gpu.probe import probe, run_jobs, signature_model

__all__ = [
    "FP16_MAX",
    "FP16_MIN_NORMAL",
    "capture_cpu",
    "dequantize",
    "localize",
    "localize_signature",
    "requantize",
]

FP16_MIN_NORMAL = 6.103515625e-05
FP16_MIN_SUBNORMAL = 5.960464477539063e-08


def dequantize(tensor: ir.Tensor, value: np.ndarray) -> np.ndarray:
    """``value`` of ``tensor`` in real units: quantized integers through scale and zero point."""
    value = np.asarray(value)
    params = tensor.quant_params
    if value.dtype.kind not in "iu" or params is None:
        with np.errstate(invalid="ignore"):  # a GPU's stale buffer may hold signaling NaNs
            return value.astype(np.float64)
    return params.dequantize(value)


def requantize(tensor: ir.Tensor, real: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Real values on ``tensor``'s own quantization grid (rounded, clamped to ``dtype``)."""
    params = tensor.quant_params
    assert params is not None, f"{tensor.name} is not quantized"
    scale, zero = params.broadcast(np.ndim(real))
    info = np.iinfo(dtype)
    return np.clip(np.round(np.asarray(real) / scale) + zero, info.min, info.max).astype(dtype)


def capture_cpu(
    data: bytes, model: ir.Model, feed: Mapping[str, np.ndarray], inputs: Mapping[str, ir.Tensor]
) -> dict[int, np.ndarray]:
    """Every tensor of the main subgraph after one CPU run (reference kernels), by index."""
    by_index = {tensor.index: feed[name] for name, tensor in inputs.items()}
    wanted = [t.index for t in model.main.tensors if t.dtype is not None]
    return capture(data, by_index, kernels="reference", tensors=wanted)


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


def _numeric(tensor: ir.Tensor) -> bool:
    """A float tensor, or a quantized one (compared dequantized)."""
    dtype = tensor.dtype
    if dtype is None:
        return False
    return np.dtype(dtype).kind == "f" or (np.dtype(dtype).kind in "iu" and tensor.is_quantized)


def _float_ops(model: ir.Model) -> list[ir.Op]:
    """Ops with a float or quantized output that compute on activations.

    Ops fed by constants only (e.g. DEQUANTIZE of fp16 weights) are left out: the delegate folds
    them into the weights of their consumer, so their value is not a runtime activation.
    """
    return [
        op
        for op in model.main.ops
        if any(_numeric(t) for t in op.outputs)
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
        if _numeric(t) and id(main.tensors[t.index]) not in present
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


#: the runner localized when none is named: the GPU accelerator in its default precision
_DEFAULT_RUNNER = find_spec(device="gpu", precision="fp16").name


def _localized(runner: str) -> RunnerSpec:
    """The spec of a runner localization can run ops on (or the reference)."""
    spec = runner_spec(runner)
    if spec is None or not (spec.localize or spec.device == "framework"):
        raise ValueError(f"localization does not run on {runner!r}")
    return spec


def localize(
    data: bytes,
    feed: Mapping[str, np.ndarray],
    *,
    inputs: Mapping[str, ir.Tensor] | None = None,
    runner: str = _DEFAULT_RUNNER,
    threshold: float = 5e-2,
    top: int = 5,
    max_ops: int = 1000,
    timeout: float = 300.0,
    accumulated: bool = True,
    reference: bytes | None = None,
    reference_feed: Mapping[str, np.ndarray] | None = None,
) -> Localization:
    """Per-op isolated and accumulated error of ``runner`` against the CPU, ranked culprits,
    fp16 hazards.

    ``runner``: a runner whose spec can localize (the GPU in fp16 or fp32, the fp16 emulation)
    or the reference (then ``reference`` holds the ``.tflite`` the model replaces;
    ``reference_feed``: the same input set in the reference's names and types, when they
    differ). ``feed`` is one input set by entry-point name; ``inputs`` maps those names to
    tensors of the model's main subgraph (default: its graph inputs by tensor name).
    ``threshold`` is the score (max_abs / peak) above which an op counts as divergent.
    """
    start = time.perf_counter()
    spec = _localized(runner)
    model = ir.load(data)
    report = Localization(runner, threshold)
    if inputs is None:
        inputs = {t.name: t for t in model.main.inputs}
    if any(t.subgraph is None or t.subgraph.index != 0 for t in inputs.values()):
        report.notes.append("the entry point is not subgraph 0: localization covers subgraph 0")
        inputs = {t.name: t for t in model.main.inputs}
        feed = {t.name: feed.get(t.name) for t in model.main.inputs}  # type: ignore[misc]
    cpu = capture_cpu(data, model, feed, inputs)
    expected = cpu
    real = {t.index: dequantize(t, cpu[t.index]) for t in model.main.tensors if t.index in cpu}
    off_grid: set[int] = set()
    if spec.device == "framework":
        if reference is None:
            raise ValueError("localizing against a reference needs the reference model's bytes")
        report.against = "reference (.tflite, reference kernels)"
        theirs = feed if reference_feed is None else reference_feed
        expected, real, off_grid = _capture_by_name(reference, model, theirs)
    ops = _float_ops(model)
    if not ops:
        report.unavailable = (
            "no op of the main subgraph computes on float or quantized activations, so there is "
            "nothing to localize"
        )
        report.seconds = time.perf_counter() - start
        return report
    if len(ops) > max_ops:
        report.notes.append(f"{len(ops)} ops: only the first {max_ops} are checked")
        ops = ops[:max_ops]
    records = [_record(op, cpu, spec.precision == "fp16") for op in ops]
    for op, record in zip(ops, records, strict=True):
        record.off_grid = any(t is not None and t.index in off_grid for t in op.inputs)
    isolate = _isolated_cpu if spec.device == "framework" else _isolated_gpu
    isolate = _isolated_fp16 if spec.emulated else isolate
    isolate(_Isolation(ops, records, expected, real, spec, timeout))
    if accumulated:
        values, note = _runner_values(data, model, ops, feed, inputs, spec, timeout, cpu)
        if note:
            report.notes.append(note)
        _add_accumulated(ops, records, real, values)
    if spec.device == "framework" and not any(r.isolated is not None for r in records):
        report.unavailable = (
            "no op's tensors have a same-named counterpart in the reference model, so ops cannot "
            "be compared one by one"
        )
    _rank(report, records, top)
    report.seconds = time.perf_counter() - start
    return report


def _add_accumulated(
    ops: list[ir.Op],
    records: list[OpError],
    real: Mapping[int, np.ndarray],
    values: Mapping[int, np.ndarray],
) -> None:
    """Each op's accumulated error: the runner's values of its outputs against the real ones."""
    for op, record in zip(ops, records, strict=True):
        parts = [
            divergence(real[t.index], dequantize(t, values[t.index]))
            for t in op.outputs
            if t.index in values and t.index in real
        ]
        if parts:
            record.accumulated = merge(parts)


def _rank(report: Localization, records: list[OpError], top: int) -> None:
    """The report's ops, ranked culprits (crashes first) and first divergent op."""
    report.ops = records
    divergent = [
        r
        for r in records
        if r.status in ("crashed", "timeout")
        or r.own_fault
        or (r.isolated is not None and r.score > report.threshold)
    ]
    ranked = sorted(
        (r for r in divergent if r.status not in ("crashed", "timeout")),
        key=lambda r: (not r.own_fault, r.inherited or r.off_grid, -r.score, r.op_index),
    )
    crashed = [r for r in divergent if r.status in ("crashed", "timeout")]
    report.culprits = (crashed + ranked)[:top]
    report.first_divergent = min(divergent, key=lambda r: r.op_index) if divergent else None


def localize_signature(
    data: bytes, key: str, feed: Mapping[str, np.ndarray], **options: Any
) -> Localization:
    """:func:`localize` on signature ``key``'s own subgraph (:func:`signature_model`), ``feed``
    by signature input name; op indices are those of that subgraph. ``options`` as for
    :func:`localize` (runner, threshold, timeout, ...)."""
    sub, names = signature_model(ir.load(data), key)
    by_tensor = {names[k]: np.asarray(v) for k, v in feed.items() if k in names}
    report = localize(sub, by_tensor, **options)
    unused = sorted(set(feed) - set(names))
    if unused:
        report.notes.append(f"signature inputs no op of {key!r} reads: {unused}")
    return report


def _record(op: ir.Op, cpu: Mapping[int, np.ndarray], fp16: bool) -> OpError:
    record = OpError(op.index, op.type, [t.name for t in op.outputs])
    _hazards(record, [cpu[t.index] for t in op.outputs if t.index in cpu])
    if fp16:
        record.inherited = any(
            beyond_fp16(cpu[t.index])
            for t in op.inputs
            if t is not None and not t.is_constant and t.index in cpu
        )
    else:  # overflow is only a fault where values are stored in fp16
        record.overflow = 0
    return record


def _cut(op: ir.Op, values: Mapping[int, np.ndarray]) -> tuple[ir.Model, dict[str, np.ndarray]]:
    """``op`` as a standalone model, and its feed from ``values`` (by full-graph index).

    Producers of its weights that read constants only (DEQUANTIZE of fp16 or int8 weights) come
    along, so a changed weight shows in the op's own error and the GPU folds them as it would.
    """
    chain = [
        t.producer
        for t in op.inputs
        if t is not None
        and t.producer is not None
        and all(i is None or i.is_constant for i in t.producer.inputs)
    ]
    sub = ir.extract_model([*chain, op])
    originals = {t.name: t for t in op.inputs if t is not None}
    return sub, {t.name: values[originals[t.name].index] for t in sub.main.inputs}


def _compare_outputs(
    op: ir.Op, real: Mapping[int, np.ndarray], got: Mapping[str, np.ndarray]
) -> Divergence | None:
    """``op``'s outputs as a runner gave them (by name) against the expected real values."""
    parts = [
        divergence(real[t.index], dequantize(t, got[t.name]))
        for t in op.outputs
        if t.name in got and t.index in real
    ]
    return merge(parts) if parts else None


@dataclass
class _Isolation:
    """The ops to run alone, their records, the values to feed them (``expected``, by tensor
    index, as the model holds them) and the real values to judge their outputs against."""

    ops: list[ir.Op]
    records: list[OpError]
    expected: Mapping[int, np.ndarray]
    real: Mapping[int, np.ndarray]
    spec: RunnerSpec
    timeout: float


def _isolated_gpu(case: _Isolation) -> None:
    ops, records, expected, real = case.ops, case.records, case.expected, case.real
    models, feeds, owners = [], [], []
    for op, record in zip(ops, records, strict=True):
        try:
            sub, sub_feed = _cut(op, expected)
        except Exception as exc:  # an op that cannot stand alone (e.g. reads a variable)
            record.status, record.error = "skipped", f"cannot cut out: {exc}"
            continue
        models.append(ir.dumps(sub))
        feeds.append(sub_feed)
        owners.append((op, record))
    jobs = run_jobs(
        models, feeds, enforce_f32=case.spec.precision == "fp32", timeout_per_job=case.timeout
    )
    for (op, record), job in zip(owners, jobs, strict=True):
        record.status, record.error = job.status, job.error
        record.fully_accelerated = job.fully_accelerated if job.compiled else None
        if job.outputs is not None:
            record.isolated = _compare_outputs(op, real, job.outputs)


def _run_alone(sub: ir.Model, feed: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run a one-op model on the CPU (reference kernels); outputs by tensor name."""
    return run_once(ir.dumps(sub), feed, kernels="reference").outputs


def _each_alone(case: _Isolation, run: Callable[[ir.Op], dict[str, np.ndarray]]) -> None:
    """``run`` each op alone (outputs by tensor name) and record its error against the real
    values; an op that cannot run alone is skipped with the reason."""
    for op, record in zip(case.ops, case.records, strict=True):
        if record.status == "skipped":
            continue
        try:
            record.isolated = _compare_outputs(op, case.real, run(op))
        except Exception as exc:
            record.status, record.error = "skipped", f"cannot run alone: {exc}"


def _isolated_cpu(case: _Isolation) -> None:
    """Each op of the model alone on the CPU, fed with the reference's values."""
    expected = case.expected
    for op, record in zip(case.ops, case.records, strict=True):
        if any(t.index not in expected for t in op.outputs) or any(
            t is not None and not t.is_constant and t.index not in expected for t in op.inputs
        ):
            record.status, record.error = "skipped", "no same-named tensors in the reference"
    _each_alone(case, lambda op: _run_alone(*_cut(op, expected)))


def _isolated_fp16(case: _Isolation) -> None:
    """Each op alone with fp16 constants, inputs and outputs, against its fp32 CPU value."""

    def run(op: ir.Op) -> dict[str, np.ndarray]:
        sub, feed = _cut(op, case.expected)
        round_model_constants(sub)
        got = _run_alone(sub, {k: round_fp16(np.asarray(v)) for k, v in feed.items()})
        return {k: round_fp16(v) for k, v in got.items()}

    _each_alone(case, run)


def _capture_by_name(
    reference: bytes, model: ir.Model, feed: Mapping[str, np.ndarray]
) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray], set[int]]:
    """The reference model's intermediates, on this model's grid and dequantized with the
    reference's own quantization, keyed by the index of the same-named tensor here; and the
    indices whose reference values leave this model's grid (clipped)."""
    ref_model = ir.load(reference)
    ref_inputs = {t.name: t for t in ref_model.main.inputs}
    ref_feed = dict(feed)
    if set(ref_feed) != set(ref_inputs) and len(ref_inputs) == len(feed):
        ref_feed = dict(zip(ref_inputs, feed.values(), strict=True))
    if ref_model.signatures and set(ref_feed) != set(ref_inputs):
        sig = ref_model.signatures[0]
        ref_feed = {sig.inputs[k].name: v for k, v in feed.items() if k in sig.inputs}
    values = capture_cpu(reference, ref_model, ref_feed, ref_inputs)
    raw = {t.name: values[t.index] for t in ref_model.main.tensors if t.index in values}
    real = {
        t.name: dequantize(t, values[t.index]) for t in ref_model.main.tensors if t.index in values
    }
    grids = {t.name: _quant_key(t) for t in ref_model.main.tensors}
    here = [t for t in model.main.tensors if t.name in raw]
    fed = {}
    off_grid = set()
    for t in here:
        value = raw[t.name]
        if t.is_quantized and value.dtype.kind in "iu" and grids[t.name] != _quant_key(t):
            # the same real value on this model's grid: its ops read integers with its own
            # scale and zero point, so the reference's integers would be misread
            value = requantize(t, real[t.name], value.dtype)
            if np.any(np.abs(dequantize(t, value) - real[t.name]) > _step(t) / 2 + 1e-12):
                off_grid.add(t.index)
        fed[t.index] = value
    return fed, {t.index: real[t.name] for t in here}, off_grid


def _step(tensor: ir.Tensor) -> float:
    params = tensor.quant_params
    return float(np.max(params.scales)) if params is not None else 0.0


def _quant_key(tensor: ir.Tensor) -> tuple[Any, ...]:
    params = tensor.quant_params
    if params is None:
        return ()
    return tuple(params.scales.tolist()), tuple(params.zero_points.tolist())


def _runner_values(
    data: bytes,
    model: ir.Model,
    ops: list[ir.Op],
    feed: Mapping[str, np.ndarray],
    inputs: Mapping[str, ir.Tensor],
    spec: RunnerSpec,
    timeout: float,
    cpu: Mapping[int, np.ndarray],
) -> tuple[dict[int, np.ndarray], str | None]:
    """The runner's own value of every compared intermediate, on the same input set."""
    if spec.device == "framework":
        return dict(cpu), None
    if spec.emulated:
        from tflkit.delegates.fp16_emulation import Fp16EmulationRunner

        emulation = Fp16EmulationRunner(data)
        try:
            emulation.activate()
        except Exception as exc:
            return {}, f"accumulated error not measured: {exc}"
        by_feed = {name: feed[name] for name in inputs}
        return emulation.trace(by_feed), None
    by_name, note = _accumulated(data, ops, feed, spec.precision == "fp32", timeout)
    index = {t.name: t.index for t in model.main.tensors}
    values = {index[n]: v for n, v in by_name.items() if n in index}
    # Measured on the software GPU: an intermediate marked as an output that the accelerator
    # fuses away (e.g. the MEAN/SUB of a layer norm) comes back all zeros while the outputs
    # downstream are right. Such values say nothing about the accumulated error.
    with np.errstate(invalid="ignore"):  # signaling NaNs in a GPU's stale buffers
        blank = [
            i
            for i, v in values.items()
            if v.size and not np.any(v) and i in cpu and np.any(np.asarray(cpu[i]))
        ]
    for i in blank:
        del values[i]
    if blank:
        extra = (
            f"{len(blank)} intermediates came back all zeros from the GPU (fused away when "
            "marked as outputs): no accumulated error for them"
        )
        note = f"{note}; {extra}" if note else extra
    return values, note
