"""Check a rewrite: run the original and the rewritten model on the CPU interpreter, compare.

Both models get the same inputs (the user's, else seeded random ones) and run with TFLite's
builtin kernels and no default delegate, so the comparison sees the graph change and nothing
else. Outputs are matched by name (rewrites keep output tensor names) and judged against a
:class:`~tflkit.rewriter.rule.Contract`: bit-identical for exact rewrites.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from tflkit.errors import UsageError
from tflkit.rewriter.rule import Contract

Shapes = Mapping[str, Sequence[int]]


@dataclass
class OutputCheck:
    """One output compared: the largest differences and whether the contract holds."""

    name: str
    dtype: str
    shape: list[int]
    max_abs: float
    max_rel: float
    identical: bool
    ok: bool


@dataclass
class Verification:
    """The verdict of comparing the rewritten model with the original on the CPU."""

    ok: bool
    contract: str
    seeds: list[int]
    user_inputs: bool
    outputs: list[OutputCheck] = field(default_factory=list)
    problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def random_inputs(details: Sequence[dict[str, Any]], seed: int) -> list[np.ndarray]:
    """Seeded inputs for each input detail: normal floats, small non-negative integers."""
    rng = np.random.default_rng(seed)
    arrays = []
    for detail in details:
        shape, dtype = tuple(int(d) for d in detail["shape"]), np.dtype(detail["dtype"])
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(shape).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(rng.integers(0, 2, shape).astype(dtype))
        elif dtype.kind in "iu":
            arrays.append(rng.integers(0, 4, shape).astype(dtype))
        else:
            raise UsageError(f"cannot make a random input of type {dtype} for {detail['name']!r}")
    return arrays


def run_cpu(
    model: bytes,
    inputs: Mapping[str, np.ndarray] | None = None,
    *,
    seed: int = 0,
    input_shapes: Shapes | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Run ``model`` once on the CPU interpreter; returns (inputs, outputs) by tensor name."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    interpreter = Interpreter(
        model_content=model,
        experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    details = interpreter.get_input_details()
    shapes = dict(input_shapes or {})
    if inputs is not None:
        shapes.update({name: np.shape(value) for name, value in inputs.items()})
    for detail in details:
        if detail["name"] in shapes:
            interpreter.resize_tensor_input(detail["index"], list(shapes[detail["name"]]))
    interpreter.allocate_tensors()
    details = interpreter.get_input_details()
    if inputs is None:
        arrays = random_inputs(details, seed)
    else:
        missing = [d["name"] for d in details if d["name"] not in inputs]
        if missing:
            raise UsageError(f"no value given for model inputs {missing}")
        arrays = [np.asarray(inputs[d["name"]], dtype=d["dtype"]) for d in details]
    for detail, array in zip(details, arrays, strict=True):
        interpreter.set_tensor(detail["index"], array)
    interpreter.invoke()
    outputs = {
        d["name"]: interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()
    }
    return {d["name"]: a for d, a in zip(details, arrays, strict=True)}, outputs


def compare(name: str, old: np.ndarray, new: np.ndarray, contract: Contract) -> OutputCheck:
    """Compare one output pair under ``contract`` (NaNs must sit at the same places)."""
    shape = [int(d) for d in old.shape]
    if old.shape != new.shape or old.dtype != new.dtype:
        return OutputCheck(name, f"{old.dtype}->{new.dtype}", shape, np.inf, np.inf, False, False)
    identical = bool(np.array_equal(old, new, equal_nan=old.dtype.kind in "fc"))
    if identical or old.size == 0:
        return OutputCheck(name, str(old.dtype), shape, 0.0, 0.0, True, True)
    a, b = old.astype(np.float64), new.astype(np.float64)
    same_nan = bool(np.array_equal(np.isnan(a), np.isnan(b)))
    finite = np.isfinite(a) & np.isfinite(b)
    diff = np.where(finite, np.abs(a - b), 0.0)
    inf_ok = bool(np.array_equal(a[~finite], b[~finite], equal_nan=True))
    max_abs = float(diff.max())
    rel = diff / np.maximum(np.abs(a), np.finfo(np.float32).tiny)
    max_rel = float(np.where(finite, rel, 0.0).max())
    allowed = contract.max_abs + contract.max_rel * np.abs(np.where(finite, a, 0.0))
    within = bool(np.all(diff <= allowed))
    ok = same_nan and inf_ok and within and not contract.exact
    return OutputCheck(name, str(old.dtype), shape, max_abs, max_rel, False, ok)


def verify(
    original: bytes,
    rewritten: bytes,
    contract: Contract,
    *,
    seeds: Sequence[int] = (0, 1),
    inputs: Mapping[str, np.ndarray] | None = None,
    input_shapes: Shapes | None = None,
) -> Verification:
    """Run both models on the same inputs and judge every output against ``contract``."""
    runs: list[Mapping[str, np.ndarray] | None] = [inputs] if inputs is not None else []
    verdict = Verification(True, contract.describe(), list(seeds), inputs is not None)
    worst: dict[str, OutputCheck] = {}
    for seed in seeds if inputs is None else (0,):
        feed = runs[0] if runs else None
        try:
            fed, old_out = run_cpu(original, feed, seed=seed, input_shapes=input_shapes)
        except (RuntimeError, ValueError) as exc:
            verdict.ok = False
            verdict.problem = (
                "the original model does not run on the CPU interpreter, so there is nothing "
                f"to verify the rewrite against ({_first_line(exc)})"
            )
            return verdict
        try:
            _, new_out = run_cpu(rewritten, fed)
        except (RuntimeError, ValueError) as exc:
            verdict.ok = False
            verdict.problem = f"the rewritten model does not run on the CPU ({_first_line(exc)})"
            return verdict
        if set(old_out) != set(new_out):
            verdict.ok = False
            verdict.problem = f"output names changed: {sorted(old_out)} -> {sorted(new_out)}"
            return verdict
        _keep_worst(worst, old_out, new_out, contract)
    return _conclude(verdict, worst, f"({contract.describe()})")


def _keep_worst(
    worst: dict[str, OutputCheck],
    expected: dict[str, np.ndarray],
    actual: dict[str, np.ndarray],
    contract: Contract,
) -> None:
    """Judge each output against ``contract``; keep the worst check per output name."""
    for name, value in expected.items():
        check = compare(name, value, actual[name], contract)
        previous = worst.get(name)
        if previous is None or (previous.ok, -previous.max_abs) > (check.ok, -check.max_abs):
            worst[name] = check


def _conclude(verdict: Verification, worst: dict[str, OutputCheck], where: str) -> Verification:
    """Fill ``verdict`` from the worst check per output; ``where`` ends the problem sentence."""
    verdict.outputs = list(worst.values())
    verdict.ok = all(c.ok for c in verdict.outputs)
    if not verdict.ok:
        bad = [c.name for c in verdict.outputs if not c.ok]
        verdict.problem = f"outputs {bad} differ beyond the contract {where}"
    return verdict


def _first_line(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def verify_sequence(
    original: bytes,
    rewritten: bytes,
    contract: Contract,
    *,
    steps: int = 24,
    seed: int = 0,
) -> Verification:
    """Run the stateful original and its explicit-state rewrite side by side over ``steps``.

    The original keeps its state in resource variables inside one interpreter; the rewrite gets
    each state input from the previous step's state output (the initial value on step one),
    following the plan stored in its metadata. Every regular output is judged against
    ``contract`` at every step; the worst step per output is reported.
    """
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    from tflkit import ir
    from tflkit.rewriter.rules.streaming import initial_state, read_plan

    plan = read_plan(ir.load(rewritten)) or []
    verdict = Verification(True, f"{contract.describe()} at each of {steps} steps", [seed], False)
    resolver = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    try:
        old = Interpreter(model_content=original, experimental_op_resolver_type=resolver)
        old.allocate_tensors()
    except (RuntimeError, ValueError) as exc:
        verdict.ok = False
        verdict.problem = f"the original model does not run on the CPU ({_first_line(exc)})"
        return verdict
    old_in = old.get_input_details()
    state = {b.input: initial_state(b) for b in plan}
    next_of = {b.output: b.input for b in plan if b.output is not None}
    rng_seeds = range(seed, seed + steps)
    worst: dict[str, OutputCheck] = {}
    for step, step_seed in enumerate(rng_seeds):
        arrays = random_inputs(old_in, step_seed)
        for detail, array in zip(old_in, arrays, strict=True):
            old.set_tensor(detail["index"], array)
        old.invoke()
        old_out = {d["name"]: old.get_tensor(d["index"]) for d in old.get_output_details()}
        feed = {d["name"]: a for d, a in zip(old_in, arrays, strict=True)}
        feed.update(state)
        try:
            _, new_out = run_cpu(rewritten, feed)
        except (RuntimeError, ValueError, UsageError) as exc:
            verdict.ok = False
            verdict.problem = f"step {step}: the rewritten model does not run ({_first_line(exc)})"
            return verdict
        state.update({next_of[name]: value for name, value in new_out.items() if name in next_of})
        regular = {k: v for k, v in new_out.items() if k not in next_of}
        if set(regular) != set(old_out):
            verdict.ok = False
            verdict.problem = f"output names changed: {sorted(old_out)} -> {sorted(regular)}"
            return verdict
        _keep_worst(worst, old_out, regular, contract)
    return _conclude(verdict, worst, f"within {steps} steps")
