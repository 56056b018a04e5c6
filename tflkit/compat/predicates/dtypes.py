"""Tensor types: the type families and the predicates on input/output types."""

from __future__ import annotations

from tflkit.compat.predicates.elementwise import COMPARISONS
from tflkit.compat.predicates.operands import no_output
from tflkit.compat.reasons import Reason, Rejection, reject
from tflkit.compat.signature import OpSignature

FLOATS = frozenset({"FLOAT32", "FLOAT16"})


INTS = frozenset({"INT8", "INT16", "INT32"})


UINTS = frozenset({"UINT8", "UINT16", "UINT32"})


def same_dtype_in_out(sig: OpSignature) -> Rejection | None:
    src, dst = sig.input(0), sig.outputs[0] if sig.outputs else None
    if src is None or dst is None or src.dtype == dst.dtype:
        return None
    return reject(Reason.DTYPE, sig.op_type, f"Input is {src.dtype} but output is {dst.dtype}.")


def cast_types(sig: OpSignature) -> Rejection | None:
    src, dst = sig.input(0), sig.output(0)
    if dst is None:
        return no_output(sig)
    if src is None:
        return None
    pair = (src.dtype, dst.dtype)
    if src.dtype == "BOOL" and dst.dtype in FLOATS:
        if src.producer not in COMPARISONS or len(src.consumers) != 1:
            why = "A bool-to-float CAST must directly follow a comparison used only by it."
            return reject(Reason.SHAPE, sig.op_type, why)
        if len(dst.consumers) != 1:
            return reject(
                Reason.SHAPE, sig.op_type, "A bool-to-float CAST cannot produce a graph output."
            )
        return None
    if src.dtype in FLOATS and dst.dtype == "BOOL":
        return None
    if set(pair) <= {"FLOAT32", "INT32"}:
        return None
    return reject(Reason.DTYPE, sig.op_type, f"Cast from {pair[0]} to {pair[1]}.")
