"""Operand counts and which operands are constants: the first gate of most table rows.

Factories build a predicate from the allowed counts (``runtime_inputs(1)``, ``const_input(1)``).
"""

from __future__ import annotations

from collections.abc import Callable

from tflkit.compat.reasons import Reason, Rejection, reject
from tflkit.compat.signature import OpSignature

Check = Callable[[OpSignature], "Rejection | None"]


def runtime_inputs(*allowed: int) -> Check:
    """The number of non-constant inputs must be one of ``allowed``."""

    def check(sig: OpSignature) -> Rejection | None:
        n = len(sig.runtime_inputs)
        if n in allowed:
            return None
        want = " or ".join(str(a) for a in allowed)
        if n < min(allowed):
            first_const = sig.const_inputs[0][0] if sig.const_inputs else None
            why = f"It has {n} runtime input(s); the delegate needs {want}."
            return reject(Reason.CONST_INPUT, sig.op_type, why, input_index=first_const)
        why = f"It has {n} runtime inputs; the delegate takes {want}."
        return reject(Reason.INPUT_COUNT, sig.op_type, why)

    return check


def const_inputs(*allowed: int) -> Check:
    """The number of constant inputs must be one of ``allowed``."""

    def check(sig: OpSignature) -> Rejection | None:
        consts = sig.const_inputs
        if len(consts) in allowed:
            return None
        want = " or ".join(str(a) for a in allowed)
        if len(consts) > max(allowed):
            why = f"It has {len(consts)} constant input(s); the delegate takes {want}."
            return reject(Reason.CONST_INPUT, sig.op_type, why, input_index=consts[0][0])
        missing = next((i for i, t in sig.runtime_inputs), None)
        why = f"It has {len(consts)} constant input(s); the delegate needs {want}."
        return reject(Reason.NON_CONST_INPUT, sig.op_type, why, input_index=missing)

    return check


def input_count(low: int, high: int | None = None) -> Check:
    """The number of present inputs must lie in ``[low, high]``."""
    high = low if high is None else high

    def check(sig: OpSignature) -> Rejection | None:
        n = len(sig.present_inputs)
        if low <= n <= high:
            return None
        want = str(low) if low == high else f"{low} to {high}"
        return reject(
            Reason.INPUT_COUNT, sig.op_type, f"It has {n} inputs; the delegate takes {want}."
        )

    return check


def no_output(sig: OpSignature) -> Rejection:
    """The rejection of an op without the output a predicate needs (malformed models)."""
    return reject(Reason.INPUT_COUNT, sig.op_type, "It has no output tensor.")


def output_count(n: int) -> Check:
    def check(sig: OpSignature) -> Rejection | None:
        if len(sig.outputs) == n:
            return None
        why = f"It has {len(sig.outputs)} outputs; the delegate takes {n}."
        return reject(Reason.INPUT_COUNT, sig.op_type, why)

    return check


def runtime_input(index: int) -> Check:
    """Input ``index`` must be computed at runtime."""

    def check(sig: OpSignature) -> Rejection | None:
        t = sig.input(index)
        if t is None or not t.is_const:
            return None
        why = f"Input {index} ({t.name}) is a constant."
        return reject(Reason.CONST_INPUT, sig.op_type, why, input_index=index)

    return check


def const_input(index: int, dtypes: frozenset[str] = frozenset({"INT32"})) -> Check:
    """Input ``index`` must be a constant of one of ``dtypes`` (when present)."""

    def check(sig: OpSignature) -> Rejection | None:
        t = sig.input(index)
        if t is None:
            return None
        if not t.is_const:
            why = f"Input {index} ({t.name}) is computed at runtime."
            return reject(Reason.NON_CONST_INPUT, sig.op_type, why, input_index=index)
        if t.dtype not in dtypes:
            want = "/".join(sorted(dtypes))
            why = f"Input {index} ({t.name}) is {t.dtype}; it must be {want}."
            return reject(Reason.DTYPE, sig.op_type, why, input_index=index)
        return None

    return check


def unary_runtime_input(sig: OpSignature) -> Rejection | None:
    """One-operand ops: exactly one input, computed at runtime."""
    present = sig.present_inputs
    if len(present) == 1 and not present[0][1].is_const:
        return None
    if len(present) == 1:
        why = f"Its input ({present[0][1].name}) is a constant."
        return reject(Reason.CONST_INPUT, sig.op_type, why, input_index=present[0][0])
    return reject(Reason.INPUT_COUNT, sig.op_type, f"It has {len(present)} inputs; it needs 1.")
