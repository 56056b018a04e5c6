"""Check a rewrite: run the original and the rewritten model on the CPU interpreter, compare.

Both models get the same inputs (the user's, else seeded random ones) and run with TFLite's
builtin kernels and no default delegate (no XNNPACK: a STABLEHLO_COMPOSITE runs its
decomposition), so the comparison sees the graph change and nothing else. Outputs are matched
by name (rewrites keep output tensor names) and judged against a
:class:`~tflkit.rewriter.rule.Contract`: bit-identical for exact rewrites. Signatures on other
subgraphs than the main one (an LLM's ``decode`` beside ``prefill``) are compared too, on
seeded random inputs, their outputs named ``SIGNATURE:OUTPUT``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tflkit.errors import UsageError
from tflkit.jsonable import plain_fields
from tflkit.rewriter.contract import Contract

if TYPE_CHECKING:
    import numpy as np

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
        return plain_fields(self)


def run_cpu(
    model: bytes,
    inputs: Mapping[str, np.ndarray] | None = None,
    *,
    seed: int = 0,
    input_shapes: Shapes | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Run ``model`` once on the CPU interpreter (builtin kernels, no default delegate);
    returns (inputs, outputs) by tensor name. Without ``inputs``, seeded random ones
    (:mod:`tflkit.ir.feeds`)."""
    from tflkit.delegates.litert_cpu import run_once

    run = run_once(
        model,
        inputs,
        kernels="builtin",
        shapes=input_shapes,
        fill="random" if inputs is None else None,
        seed=seed,
        cast=True,
    )
    return run.inputs, run.outputs


def compare(name: str, old: np.ndarray, new: np.ndarray, contract: Contract) -> OutputCheck:
    """Compare one output pair under ``contract`` (NaNs must sit at the same places)."""
    import numpy as np

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
    magnitude = np.abs(np.where(finite, a, 0.0))
    allowed = contract.max_abs + contract.max_rel * magnitude + contract.peak_rel * magnitude.max()
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
                f"to verify the rewrite against ({first_line(exc)})"
            )
            return verdict
        try:
            _, new_out = run_cpu(rewritten, fed)
        except (RuntimeError, ValueError) as exc:
            verdict.ok = False
            verdict.problem = f"the rewritten model does not run on the CPU ({first_line(exc)})"
            return verdict
        if not judge(verdict, worst, old_out, new_out, contract):
            return verdict
    if not other_signatures(verdict, worst, original, rewritten, contract, seeds):
        return verdict
    return conclude(verdict, worst, f"({contract.describe()})")


def other_signatures(
    verdict: Verification,
    worst: dict[str, OutputCheck],
    original: bytes,
    rewritten: bytes,
    contract: Contract,
    seeds: Sequence[int],
) -> bool:
    """Compare the signatures of other subgraphs than the main one on seeded random inputs
    (:func:`judge`); signatures the original cannot run there (dynamic inputs...) are left
    out. False, with ``verdict`` failed, when the rewritten model does not run one."""
    from tflkit import ir
    from tflkit.ir.feeds import random_feed

    model = ir.load(original)
    keys = [s.key for s in model.signatures if s.subgraph is not model.main]
    for key in keys:
        tensors = model.signature(key).inputs
        if any(t.is_dynamic for t in tensors.values()):
            continue
        for seed in seeds:
            try:
                by_tensor = random_feed(list(tensors.values()), seed)
                feed = {name: by_tensor[t.name] for name, t in tensors.items()}
                old_out = run_signature(original, key, feed)
            except (RuntimeError, ValueError, UsageError):
                break  # nothing to compare this signature with
            try:
                new_out = run_signature(rewritten, key, feed)
            except (RuntimeError, ValueError) as exc:
                verdict.ok = False
                verdict.problem = (
                    f"signature {key!r} of the rewritten model does not run on the CPU "
                    f"({first_line(exc)})"
                )
                return False
            prefixed = ({f"{key}:{k}": v for k, v in out.items()} for out in (old_out, new_out))
            if not judge(verdict, worst, *prefixed, contract):
                return False
    return True


def run_signature(
    model: bytes, key: str, feed: Mapping[str, np.ndarray], kernels: str = "builtin"
) -> dict[str, np.ndarray]:
    """Run signature ``key`` of ``model`` once on the CPU interpreter (``kernels``: builtin, no
    default delegate, unless told); outputs by signature output name."""
    import numpy as np

    from tflkit.delegates.litert_cpu import start_interpreter

    interpreter = start_interpreter(model, kernels=kernels)
    runner = interpreter.get_signature_runner(key)
    return {k: np.array(v) for k, v in runner(**feed).items()}


def judge(
    verdict: Verification,
    worst: dict[str, OutputCheck],
    expected: dict[str, np.ndarray],
    actual: dict[str, np.ndarray],
    contract: Contract,
) -> bool:
    """Judge one run's outputs (:func:`keep_worst`); False, with ``verdict`` failed, when the
    rewrite changed the output names."""
    if set(expected) != set(actual):
        verdict.ok = False
        verdict.problem = f"output names changed: {sorted(expected)} -> {sorted(actual)}"
        return False
    keep_worst(worst, expected, actual, contract)
    return True


def keep_worst(
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


def conclude(verdict: Verification, worst: dict[str, OutputCheck], where: str) -> Verification:
    """Fill ``verdict`` from the worst check per output; ``where`` ends the problem sentence."""
    verdict.outputs = list(worst.values())
    verdict.ok = all(c.ok for c in verdict.outputs)
    if not verdict.ok:
        bad = [c.name for c in verdict.outputs if not c.ok]
        verdict.problem = f"outputs {bad} differ beyond the contract {where}"
    return verdict


def first_line(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
