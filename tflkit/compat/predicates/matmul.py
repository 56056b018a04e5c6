"""FULLY_CONNECTED and BATCH_MATMUL: weight formats, constant operands, batch broadcasting."""

from __future__ import annotations

from tflkit.compat.predicates.operands import no_output
from tflkit.compat.reasons import Reason, Rejection, reject
from tflkit.compat.signature import OpSignature


def fc_weights_format(sig: OpSignature) -> Rejection | None:
    if sig.option("weightsFormat", 0) == 0:
        return None
    return reject(Reason.OPTIONS, sig.op_type, "The weights use the shuffled int8 format.")


def fc_input_not_const(sig: OpSignature) -> Rejection | None:
    t = sig.input(0)
    if t is None or not t.is_const:
        return None
    return reject(
        Reason.CONST_INPUT, sig.op_type, f"Its data input ({t.name}) is a constant.", input_index=0
    )


def fc_keep_num_dims(sig: OpSignature) -> Rejection | None:
    if not sig.option("keepNumDims", False):
        return None
    src, dst = sig.input(0), sig.output(0)
    if dst is None:
        return no_output(sig)
    if src is None or src.rank == dst.rank:
        return None
    why = "keep_num_dims is set but input and output ranks differ."
    return reject(Reason.OPTIONS, sig.op_type, why)


def batch_matmul_operands(sig: OpSignature) -> Rejection | None:
    runtime = len(sig.runtime_inputs)
    if runtime == 2:
        return batch_matmul_broadcast(sig)
    a, b = sig.input(0), sig.input(1)
    if runtime == 1 and a is not None and not a.is_const and b is not None:
        if b.rank in (2, 3, 4):
            return None
        why = f"The constant right-hand side has {b.rank} dimensions; 2 to 4 here."
        return reject(Reason.SHAPE, sig.op_type, why, input_index=1)
    if runtime == 1:
        why = "The left-hand side is a constant; only the right-hand side may be."
        return reject(Reason.CONST_INPUT, sig.op_type, why, input_index=0)
    return reject(Reason.CONST_INPUT, sig.op_type, "Both operands are constants.", input_index=0)


def batch_matmul_broadcast(sig: OpSignature) -> Rejection | None:
    """Two runtime operands whose batch dimensions differ (one broadcast over the other's
    batch): LiteRT 2.3's kernel computes ``out[i] = x[i] @ y[i]`` over flat batch indices only
    as far as the smaller operand's batch reaches, and writes zeros (or pairs the wrong
    matrices) beyond it, fp32 and fp16 alike. Measured on lavapipe
    (``tests/test_rule_batch_matmul_broadcast.py``): ``x [4,1,32] @ y [32,16]``,
    ``[4,2,32] @ [1,32,16]``, ``[1,4,1,32] @ [1,1,32,16]``, ``[1,1,32] @ [4,32,16]``,
    ``[2,4,1,32] @ [2,1,32,16]``, adj_x too: wrong. Right: equal batches once padded with
    leading 1s (``[4,1,32] @ [1,4,32,16]``), one batch in all, a constant ``y``, and
    ``adj_y`` with ``y`` of batch 1 when K and N are multiples of 4 (another kernel)."""
    x, y = sig.input(0), sig.input(1)
    if x is None or y is None or x.rank < 2 or y.rank < 2 or x.is_dynamic or y.is_dynamic:
        return None
    width = max(x.rank, y.rank) - 2
    bx = (1,) * (width - x.rank + 2) + tuple(x.shape[:-2])
    by = (1,) * (width - y.rank + 2) + tuple(y.shape[:-2])
    if bx == by:
        return None
    k, n = (y.shape[-1], y.shape[-2]) if sig.option("adjY", False) else y.shape[-2:]
    if sig.option("adjY", False) and set(by) <= {1} and k % 4 == 0 and n % 4 == 0:
        return None
    why = (
        f"Its runtime operands' batches differ ({list(x.shape)} x {list(y.shape)}): LiteRT 2.3 "
        "computes the first batch and returns zeros or wrong values for the others (measured)."
    )
    return reject(Reason.WRONG_RESULT, sig.op_type, why, input_index=1)


def batch_matmul_classic(sig: OpSignature) -> Rejection | None:
    runtime = len(sig.runtime_inputs)
    rhs = sig.input(1)
    if runtime == 2:
        return None
    if runtime == 1 and rhs is not None and rhs.is_const and rhs.rank == 2:
        return None
    return reject(
        Reason.SHAPE,
        sig.op_type,
        "Only two runtime operands, or a runtime left and a 2-D constant right, build; the "
        "delegate fails while building this graph.",
        fatal=True,
    )
