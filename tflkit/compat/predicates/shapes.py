"""Shapes and axes: the delegate's BHWC view of a tensor, broadcasting, ranks, axis operands.

The GPU delegate maps a tensor of rank 1 to 4 onto BHWC: ``[n] -> (n,1,1,1)``,
``[a,b] -> (a,1,1,b)``, ``[a,b,c] -> (a,1,b,c)``.
"""

from __future__ import annotations

from tflkit.compat.predicates.operands import Check
from tflkit.compat.reasons import Reason, Rejection, reject
from tflkit.compat.signature import OpSignature


def bhwc(shape: tuple[int, ...]) -> tuple[int, int, int, int] | None:
    """The delegate's BHWC view of a rank 1-4 shape, or None for other ranks."""
    r = len(shape)
    if r == 1:
        return (shape[0], 1, 1, 1)
    if r == 2:
        return (shape[0], 1, 1, shape[1])
    if r == 3:
        return (shape[0], 1, shape[1], shape[2])
    if r == 4:
        return (shape[0], shape[1], shape[2], shape[3])
    return None


def fmt_shape(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def axis_ok(rank: int, axis: int) -> bool:
    """Whether ``axis`` names a dimension of a rank 1-4 tensor (negative counts from the end)."""
    if not 1 <= rank <= 4:
        return False
    return -rank <= axis < rank


def broadcastable(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """numpy-style broadcast compatibility."""
    for x, y in zip(reversed(a), reversed(b), strict=False):
        if x != y and x != 1 and y != 1:
            return False
    return True


def rank_in(index: int, ranks: frozenset[int]) -> Check:
    def check(sig: OpSignature) -> Rejection | None:
        t = sig.input(index)
        if t is None or t.rank in ranks:
            return None
        want = " or ".join(str(r) for r in sorted(ranks))
        why = f"Input {index} ({t.name}) has {t.rank} dimensions; the delegate takes {want}."
        return reject(Reason.SHAPE, sig.op_type, why, input_index=index)

    return check


def const_ints(sig: OpSignature, index: int) -> list[int] | None:
    t = sig.input(index)
    if t is None or t.values is None or not t.is_const or t.dtype != "INT32":
        return None
    return [int(v) for v in t.values]


def axes_out_of_range(sig: OpSignature) -> tuple[int, list[int]] | None:
    """(input rank, axes) when a constant axes input (input 1) names an axis the input of rank
    <= 4 does not have; None when the axes fit, or are not known or not axes (a malformed op:
    other checks reject it)."""
    src, axes = sig.input(0), sig.input(1)
    if src is None or axes is None or axes.values is None or src.rank > 4:
        return None
    if axes.dtype not in ("INT32", "INT64"):
        return None
    values = [int(a) for a in axes.values]
    return None if all(axis_ok(src.rank, a) for a in values) else (src.rank, values)


def reverse_axes(sig: OpSignature) -> Rejection | None:
    if axes_out_of_range(sig) is None:
        return None
    return reject(Reason.SHAPE, sig.op_type, "An axis is out of range.", input_index=1)


def split_axis(sig: OpSignature) -> Rejection | None:
    axis_index, data_index = (0, 1) if sig.op_type == "SPLIT" else (2, 0)
    axis = const_ints(sig, axis_index)
    src = sig.input(data_index)
    if axis is None or src is None or src.rank > 4:
        return None
    if axis and axis_ok(src.rank, axis[0]):
        return None
    return reject(Reason.SHAPE, sig.op_type, "The split axis is out of range.")


def unpack_axis(sig: OpSignature) -> Rejection | None:
    src = sig.input(0)
    if src is None or src.rank > 4 or sig.option("num", 0) == 1:
        return None
    if axis_ok(src.rank, sig.option("axis", 0)):
        return None
    return reject(Reason.SHAPE, sig.op_type, "The unpack axis is out of range.")


def transpose_perm(sig: OpSignature) -> Rejection | None:
    perm = sig.input(1)
    if perm is None or not perm.is_const:
        return None
    if 2 <= perm.num_elements <= 4:
        return None
    why = f"The permutation has {perm.num_elements} entries; 2 to 4 here."
    return reject(Reason.RANK, sig.op_type, why, input_index=1)
