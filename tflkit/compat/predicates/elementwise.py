"""Elementwise ops: operand counts, identical operands, broadcasting, the constant operand."""

from __future__ import annotations

from dataclasses import replace

from tflkit.compat.predicates.operands import no_output
from tflkit.compat.predicates.shapes import broadcastable, fmt_shape
from tflkit.compat.reasons import Reason, Rejection, reject
from tflkit.compat.signature import OpSignature

COMPARISONS = frozenset({"EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL"})


def elementwise_operands(sig: OpSignature) -> Rejection | None:
    """Two-operand elementwise ops: two runtime inputs, or one runtime and one constant."""
    present = sig.present_inputs
    if len(present) != 2:
        return reject(Reason.INPUT_COUNT, sig.op_type, f"It has {len(present)} inputs; it needs 2.")
    if len(sig.runtime_inputs) == 0:
        why = "Both inputs are constants; there is nothing to compute on the GPU."
        return reject(Reason.CONST_INPUT, sig.op_type, why, input_index=0)
    return None


def identical_inputs_not_allowed(sig: OpSignature) -> Rejection | None:
    a, b = sig.input(0), sig.input(1)
    if a is None or b is None or a.tensor_index < 0 or a.tensor_index != b.tensor_index:
        return None
    why = f"Both inputs are the same tensor ({a.name}); only ADD and MUL accept that."
    return reject(Reason.SHAPE, sig.op_type, why)


def add_n_two_inputs(sig: OpSignature) -> Rejection | None:
    if sig.op_type != "ADD_N" or len(sig.present_inputs) == 2:
        return None
    why = f"It sums {len(sig.present_inputs)} tensors; the delegate takes ADD_N of 2 only."
    return reject(Reason.INPUT_COUNT, sig.op_type, why)


def runtime_broadcast(sig: OpSignature) -> Rejection | None:
    """Two runtime operands of different rank must broadcast, and neither may be a scalar."""
    a, b = sig.input(0), sig.input(1)
    if a is None or b is None or a.is_const or b.is_const or a.rank == b.rank:
        return None
    if a.tensor_index >= 0 and a.tensor_index == b.tensor_index:
        return None
    if a.rank == 0 or b.rank == 0:
        scalar = a if a.rank == 0 else b
        return reject(
            Reason.BROADCAST,
            sig.op_type,
            f"{scalar.name} is a 0-D runtime tensor broadcast against a tensor of rank "
            f"{max(a.rank, b.rank)}; give it shape [1] or make it a constant.",
        )
    if not broadcastable(a.shape, b.shape):
        why = f"Shapes {fmt_shape(a.shape)} and {fmt_shape(b.shape)} do not broadcast."
        return reject(Reason.BROADCAST, sig.op_type, why)
    return None


def const_operand(sig: OpSignature) -> Rejection | None:
    """The constant operand of a runtime-constant pair must be readable by the delegate."""
    if len(sig.runtime_inputs) != 1 or len(sig.const_inputs) != 1:
        return None
    index, t = sig.const_inputs[0]
    if t.sparse:
        return reject(
            Reason.SHAPE, sig.op_type, f"The constant {t.name} is sparse.", input_index=index
        )
    if t.num_elements > 1 and t.rank > 4:
        why = f"The constant {t.name} has shape {fmt_shape(t.shape)}."
        return reject(Reason.RANK, sig.op_type, why, input_index=index)
    return None


def narrow_broadcast(sig: OpSignature) -> Rejection | None:
    """ADD/MUL broadcasting between inputs of different rank (both above 1): 3-D into 4-D
    with batch 1, [1,1] into [1,x,y,z], or [b,c] into [b,x,y,c]."""
    if sig.op_type not in ("ADD", "MUL"):
        return None
    a, b = sig.input(0), sig.input(1)
    if a is None or b is None or a.rank <= 1 or b.rank <= 1 or a.rank == b.rank:
        return None
    longer, shorter = (a.shape, b.shape) if a.rank >= b.rank else (b.shape, a.shape)
    ok = (len(longer) == 4 and len(shorter) == 3 and longer[0] == 1) or (
        len(longer) == 4
        and len(shorter) == 2
        and (
            (longer[0] == 1 and shorter == (1, 1))
            or (longer[0] == shorter[0] and longer[3] == shorter[1])
        )
    )
    if ok:
        return None
    return reject(
        Reason.BROADCAST,
        sig.op_type,
        f"Shapes {fmt_shape(a.shape)} and {fmt_shape(b.shape)}: only 3-D into 4-D (batch 1), "
        "[1,1] or [b,c] into 4-D broadcast here.",
    )


def mul_not_smaller(sig: OpSignature) -> Rejection | None:
    """MUL of equal-rank inputs: one input must be at least as large in every dimension."""
    if sig.op_type != "MUL":
        return None
    a, b = sig.input(0), sig.input(1)
    if a is None or b is None or a.rank != b.rank:
        return None
    a_smaller = any(x < y for x, y in zip(a.shape, b.shape, strict=True))
    b_smaller = any(y < x for x, y in zip(a.shape, b.shape, strict=True))
    if a_smaller and b_smaller:
        return reject(
            Reason.BROADCAST,
            sig.op_type,
            f"Shapes {fmt_shape(a.shape)} and {fmt_shape(b.shape)} broadcast both ways "
            "(an outer product).",
        )
    return None


def comparison_feeds_cast_or_select(sig: OpSignature) -> Rejection | None:
    """A comparison is delegated only when its single reader is CAST, SELECT or SELECT_V2."""
    if sig.op_type not in COMPARISONS:
        return None
    out = sig.output(0)
    if out is None:
        return no_output(sig)
    if len(out.consumers) == 1 and out.consumers[0] in ("CAST", "SELECT", "SELECT_V2"):
        return None
    why = "Its boolean result must feed exactly one CAST or SELECT; here it does not."
    return reject(Reason.SHAPE, sig.op_type, why)


def same_input_fatal(sig: OpSignature) -> Rejection | None:
    found = identical_inputs_not_allowed(sig)
    if found is None or sig.op_type in ("ADD", "MUL"):
        return None
    return replace(found, fatal=True)
