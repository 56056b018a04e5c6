"""LiteRT GPU accelerator (ai-edge-litert 2.3): the ML Drift GPU delegate behind ``CompiledModel``.

Rules come from the delegate's per-op support checks and were then checked op by op against the
real accelerator (compile a one-op model, read what it rejects); where the two disagreed the
runtime won. docs/compat-rules.md lists every rule with its evidence.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from tflkit.compat.reasons import Reason, Rejection, reject
from tflkit.compat.signature import OpSignature
from tflkit.compat.targets.common import (
    ACTIVATION_NAMES,
    FLOATS,
    INTS,
    UINTS,
    OpRule,
    Target,
    axis_ok,
    bhwc,
    block_size_above_one,
    broadcastable,
    const_input,
    const_inputs,
    elementwise_operands,
    fc_input_not_const,
    fc_keep_num_dims,
    fc_weights_format,
    fmt_shape,
    identical_inputs_not_allowed,
    input_count,
    mirror_pad_reflect,
    no_output,
    output_count,
    paddings_4x2_or_3x2,
    positive_dilations,
    positive_kernel,
    positive_strides,
    resize_corners,
    runtime_input,
    runtime_inputs,
    same_dtype_in_out,
    softmax_beta_one,
    strided_slice_masks,
    unary_runtime_input,
)

#: Types the delegate takes for runtime tensors before per-op additions (quantized ops and
#: boolean tensors are enabled in the LiteRT accelerator: measured).
IN_DTYPES = frozenset({"FLOAT32", "FLOAT16", "BOOL", "INT8", "UINT8", "INT4", "INT2"})
OUT_DTYPES = frozenset({"FLOAT32", "FLOAT16", "INT8", "UINT8"})
ALL_PRECISION = INTS | UINTS | frozenset({"BOOL", "BFLOAT16"})
LOGICAL_DTYPES = frozenset({"BOOL", "INT8", "INT16", "INT32"})

# --- elementwise ----------------------------------------------------------------------------

#: One-operand elementwise ops and their highest accepted version.
UNARY_VERSIONS: Mapping[str, int] = {
    "ABS": 5,
    "CEIL": 2,
    "COS": 2,
    "ELU": 2,
    "EXP": 2,
    "FLOOR": 2,
    "GELU": 3,
    "LOG": 2,
    "LOGICAL_NOT": 2,
    "NEG": 2,
    "ROUND": 2,
    "RSQRT": 2,
    "LOGISTIC": 2,
    "SIGN": 2,
    "SIN": 2,
    "SQRT": 2,
    "SQUARE": 2,
    "TANH": 2,
    "HARD_SWISH": 2,
    "STABLEHLO_CBRT": 2,
}
#: Two-operand elementwise ops and their highest accepted version.
BINARY_VERSIONS: Mapping[str, int] = {
    "ADD": 6,
    "ADD_N": 6,
    "SUB": 2,
    "MUL": 8,
    "DIV": 2,
    "POW": 2,
    "SQUARED_DIFFERENCE": 2,
    "MAXIMUM": 4,
    "MINIMUM": 4,
    "FLOOR_DIV": 3,
    "FLOOR_MOD": 2,
    "ATAN2": 2,
    "EQUAL": 2,
    "NOT_EQUAL": 2,
    "LESS": 2,
    "LESS_EQUAL": 2,
    "GREATER": 2,
    "GREATER_EQUAL": 2,
    "LOGICAL_AND": 2,
    "LOGICAL_OR": 2,
    "BITWISE_XOR": 2,
    "RIGHT_SHIFT": 2,
    "STABLEHLO_SHIFT_LEFT": 2,
    "STABLEHLO_REMAINDER": 2,
}
COMPARISONS = frozenset({"EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL"})
LOGICAL = frozenset({"LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT", "BITWISE_XOR"})
#: Ops that also compute on 8/16/32-bit integers.
INT_OPS = frozenset(
    {
        "ABS", "ADD", "ATAN2", "COS", "DIV", "FLOOR_DIV", "FLOOR_MOD", "MAXIMUM", "MINIMUM",
        "MUL", "NEG", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD", "RIGHT_SHIFT", "SIGN", "SIN",
        "SUB", "SUM", "TILE", "STABLEHLO_REMAINDER", "STABLEHLO_SHIFT_LEFT",
    }
)  # fmt: skip
#: Data-movement ops that take tensors of any precision.
ANY_PRECISION_OPS = frozenset(
    {
        "CAST", "CONCATENATION", "DYNAMIC_UPDATE_SLICE", "GATHER", "PACK", "PAD", "PADV2",
        "RESHAPE", "REVERSE_V2", "SELECT", "SELECT_V2", "SLICE", "STRIDED_SLICE", "TRANSPOSE",
    }
)  # fmt: skip
#: Same tensor as both inputs: only these rewrite it (MUL(x,x)=SQUARE, ADD(x,x)=2x).
SAME_INPUT_OK = frozenset({"ADD", "MUL"})
ACTIVATION_OPS = frozenset({"ADD", "SUB", "MUL", "DIV"})


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


#: Ops that abort the accelerator when an 8-bit operand or result has no quantization.
UNQUANTIZED_8BIT_CRASH: Mapping[str, frozenset[str]] = {
    "ADD": frozenset({"INT8", "UINT8"}),
    "SUB": frozenset({"INT8", "UINT8"}),
    "SQUARED_DIFFERENCE": frozenset({"INT8"}),
}


def unquantized_8bit(sig: OpSignature) -> Rejection | None:
    dtypes = UNQUANTIZED_8BIT_CRASH.get(sig.op_type)
    if dtypes is None:
        return None
    tensors = [t for _, t in sig.present_inputs] + list(sig.outputs)
    bad = next((t for t in tensors if t.dtype in dtypes and not t.quantized), None)
    if bad is None:
        return None
    why = f"{bad.name} is {bad.dtype} without quantization parameters."
    return reject(Reason.CRASH, sig.op_type, why, fatal=True)


def binary_rule(op: str) -> OpRule:
    extra_in: frozenset[str] = frozenset()
    extra_out: frozenset[str] = frozenset()
    in_dtypes = out_dtypes = None
    if op in COMPARISONS:
        extra_in, extra_out = INTS | UINTS, frozenset({"BOOL"})
    if op in LOGICAL:
        in_dtypes = out_dtypes = LOGICAL_DTYPES
    if op in INT_OPS:
        extra_in, extra_out = extra_in | INTS, extra_out | INTS
    checks = [add_n_two_inputs] if op == "ADD_N" else [elementwise_operands]
    if op not in SAME_INPUT_OK:
        checks.append(identical_inputs_not_allowed)
    checks += [runtime_broadcast, const_operand, unquantized_8bit]
    return OpRule(
        max_version=BINARY_VERSIONS[op],
        in_dtypes=in_dtypes,
        out_dtypes=out_dtypes,
        extra_in_dtypes=extra_in | frozenset({"BFLOAT16"}),
        extra_out_dtypes=extra_out | frozenset({"BFLOAT16"}),
        activation="fusedActivationFunction" if op in ACTIVATION_OPS else None,
        checks=tuple(checks),
    )


def unary_rule(op: str) -> OpRule:
    in_dtypes = out_dtypes = None
    extra: frozenset[str] = frozenset()
    if op in LOGICAL:
        in_dtypes = out_dtypes = LOGICAL_DTYPES
    if op in INT_OPS:
        extra = INTS
    return OpRule(
        max_version=UNARY_VERSIONS[op],
        in_dtypes=in_dtypes,
        out_dtypes=out_dtypes,
        extra_in_dtypes=extra,
        extra_out_dtypes=extra,
        checks=(unary_runtime_input,),
    )


# --- op-specific predicates -----------------------------------------------------------------


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


def cumsum_types(sig: OpSignature) -> Rejection | None:
    src, dst = sig.input(0), sig.output(0)
    if dst is None:
        return no_output(sig)
    if src is not None and src.dtype in FLOATS and dst.dtype == src.dtype:
        return None
    return reject(Reason.DTYPE, sig.op_type, "Input and output must be one float type.")


def dequantize_input(sig: OpSignature) -> Rejection | None:
    src = sig.input(0)
    if src is None:
        return None
    if src.dtype == "INT16":
        return reject(Reason.DTYPE, sig.op_type, "INT16 dequantization is not supported.")
    if src.is_const and src.dtype == "FLOAT16":
        return None  # fp16 weights: folded into the consumers (see FP16_DEQUANTIZE)
    if src.is_const:
        if 2 <= src.rank <= 4:
            return None
        why = f"The constant {src.name} has {src.rank} dimensions; 2 to 4 here."
        return reject(Reason.SHAPE, sig.op_type, why, input_index=0)
    if not src.quantized and src.producer == "DENSIFY":
        return reject(
            Reason.QUANTIZATION,
            sig.op_type,
            "It expands sparse weights after DENSIFY, which the delegate does not take; store "
            "the weights dense.",
            input_index=0,
        )
    if not src.quantized:
        return reject(
            Reason.QUANTIZATION, sig.op_type, f"{src.name} has no quantization parameters."
        )
    if src.per_channel:
        why = f"{src.name} is quantized per channel; only per tensor at runtime."
        return reject(Reason.QUANTIZATION, sig.op_type, why, input_index=0)
    return None


def quantize_output(sig: OpSignature) -> Rejection | None:
    if sig.outputs and sig.outputs[0].quantized:
        return None
    return reject(Reason.QUANTIZATION, sig.op_type, "The output has no quantization parameters.")


def embedding_lookup_shapes(sig: OpSignature) -> Rejection | None:
    ids, values, out = sig.input(0), sig.input(1), sig.output(0)
    if out is None:
        return no_output(sig)
    if ids is None or values is None:
        return reject(Reason.INPUT_COUNT, sig.op_type, "It needs ids and values.")
    if ids.rank != 1:
        return reject(Reason.SHAPE, sig.op_type, "Ids must be 1-D.", input_index=0)
    if values.rank < 2 or out.rank != values.rank:
        return reject(Reason.SHAPE, sig.op_type, "Values must be 2-D or more, like the output.")
    if values.dtype == "FLOAT32" or (values.dtype in ("INT8", "INT4", "INT2") and values.quantized):
        return None
    why = f"Values are {values.dtype}; float32 or quantized int8/int4 only."
    return reject(Reason.DTYPE, sig.op_type, why, input_index=1)


def _dus_map(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (1,) * (4 - len(shape)) + tuple(shape)


def dynamic_update_slice_shapes(sig: OpSignature) -> Rejection | None:
    operand, update, start = sig.input(0), sig.input(1), sig.input(2)
    if operand is None or update is None or start is None:
        return reject(Reason.INPUT_COUNT, sig.op_type, "It needs 3 inputs.")
    if start.is_const:
        why = "start_indices is a constant; the delegate takes it as a runtime tensor."
        return reject(Reason.CONST_INPUT, sig.op_type, why, input_index=2)
    out = sig.output(0)
    if out is None:
        return no_output(sig)
    for t in (operand, update, out):
        if not 1 <= t.rank <= 4:
            return reject(Reason.SHAPE, sig.op_type, f"{t.name} must have 1 to 4 dimensions.")
    if start.rank != 1:
        return reject(Reason.SHAPE, sig.op_type, "start_indices must be 1-D.", input_index=2)
    if update.rank != operand.rank or update.dtype != operand.dtype:
        return reject(Reason.SHAPE, sig.op_type, "Update and operand differ in rank or type.")
    if operand.rank == 4 and operand.shape[0] != 1:
        return reject(Reason.SHAPE, sig.op_type, "A 4-D operand must have batch 1.")
    if any(u > o for u, o in zip(_dus_map(update.shape), _dus_map(operand.shape), strict=True)):
        return reject(Reason.SHAPE, sig.op_type, "The update is larger than the operand.")
    return None


def gather_operands(sig: OpSignature) -> Rejection | None:
    data, indices = sig.input(0), sig.input(1)
    if data is None or indices is None or len(sig.present_inputs) != 2:
        return reject(Reason.INPUT_COUNT, sig.op_type, "It needs data and indices.")
    if data.is_const and indices.is_const:
        return reject(Reason.CONST_INPUT, sig.op_type, "Data and indices are both constants.")
    if indices.rank != 1:
        why = f"Indices have shape {fmt_shape(indices.shape)}; only 1-D indices are supported."
        return reject(Reason.SHAPE, sig.op_type, why, input_index=1)
    if indices.dtype != "INT32":
        return reject(
            Reason.DTYPE, sig.op_type, f"Indices are {indices.dtype}; INT32 only.", input_index=1
        )
    if data.fp16_weights:
        # Measured: the delegate reads the FLOAT16 constant behind the DEQUANTIZE and refuses
        # the op ("Input / output dtype mismatch"); both stay on the CPU.
        why = "Its data are fp16 weights: the delegate reads them as FLOAT16, not FLOAT32."
        return reject(Reason.DTYPE, sig.op_type, why, input_index=0)
    return None


def lstm_kernel(sig: OpSignature) -> Rejection | None:
    basic = sig.option("kernelType", 0) == 1
    act = sig.option("fusedActivationFunction", 0)
    n_in, n_out = len(sig.inputs), len(sig.outputs)
    if basic:
        if n_in != 5 or n_out != 4:
            return reject(
                Reason.INPUT_COUNT, sig.op_type, "A basic LSTM needs 5 inputs, 4 outputs."
            )
        if act != 4:
            return reject(Reason.FUSED_ACTIVATION, sig.op_type, "A basic LSTM must use TANH.")
        if sig.option("cellClip", 0.0) or sig.option("projClip", 0.0):
            return reject(Reason.OPTIONS, sig.op_type, "cell_clip and proj_clip are unsupported.")
        return None
    if n_in not in (20, 24) or n_out != 1:
        return reject(
            Reason.INPUT_COUNT, sig.op_type, "A full LSTM needs 20 or 24 inputs, 1 output."
        )
    if act != 4:
        return reject(Reason.FUSED_ACTIVATION, sig.op_type, "The LSTM activation must be TANH.")
    return None


def _axes_out_of_range(sig: OpSignature) -> tuple[int, list[int]] | None:
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


def reduce_axes(sig: OpSignature) -> Rejection | None:
    bad = _axes_out_of_range(sig)
    if bad is None:
        return None
    why = f"Axes {bad[1]} do not fit a {bad[0]}-D input."
    return reject(Reason.SHAPE, sig.op_type, why, input_index=1)


def padv2_constant(sig: OpSignature) -> Rejection | None:
    if sig.op_type != "PADV2":
        return None
    value = sig.input(2)
    if value is None:
        return None
    if not value.is_const or value.num_elements != 1:
        why = "The padding value must be a constant scalar."
        return reject(Reason.NON_CONST_INPUT, sig.op_type, why, input_index=2)
    return None


def pack_inputs(sig: OpSignature) -> Rejection | None:
    present = sig.present_inputs
    # Measured: a runtime tensor stacked twice aborts the accelerator ("Check failed:
    # !IsInput(consumer, value)"); a constant stacked twice compiles (each use becomes its own
    # constant: the int32 scalars litert-torch's KV-cache graphs stack into update indices).
    ids = [t.tensor_index for _, t in present if not t.is_const]
    if len(set(ids)) != len(ids):
        return reject(
            Reason.CRASH,
            sig.op_type,
            "It stacks the same runtime tensor more than once (the accelerator dies on a "
            "failed check); stack copies or use TILE/CONCATENATION.",
            fatal=True,
        )
    if len(present) == 1 and present[0][1].is_const:
        return reject(
            Reason.CRASH,
            sig.op_type,
            "Its only input is a constant (the accelerator dies while building it).",
            input_index=present[0][0],
            fatal=True,
        )
    for index, t in present:
        # Measured (SIGSEGV): INT8 and UINT8 constants, rank 1 to 3, unquantized; quantized
        # int8 and INT32 constants compile.
        if t.is_const and t.dtype in ("INT8", "UINT8") and not t.quantized:
            return reject(
                Reason.CRASH,
                sig.op_type,
                f"Input {index} ({t.name}) is an unquantized {t.dtype} constant (the "
                "accelerator dies while building it).",
                input_index=index,
                fatal=True,
            )
    out = sig.output(0)
    if out is None:
        return no_output(sig)
    if 1 <= out.rank <= 4 and not axis_ok(out.rank, sig.option("axis", 0)):
        return reject(Reason.SHAPE, sig.op_type, "The stacking axis is out of range.")
    return None


def prelu_alpha(sig: OpSignature) -> Rejection | None:
    src, alpha = sig.input(0), sig.input(1)
    if src is None or alpha is None:
        return reject(Reason.INPUT_COUNT, sig.op_type, "It needs an input and alpha.")
    if not alpha.is_const:
        return reject(
            Reason.NON_CONST_INPUT, sig.op_type, "alpha is computed at runtime.", input_index=1
        )
    shape = bhwc(src.shape)
    if shape is None:
        return None
    _, h, w, c = shape
    if alpha.rank >= 1 and all(d == 1 for d in alpha.shape[:-1]):
        if alpha.shape[-1] == c:
            return None
        why = f"alpha has {alpha.shape[-1]} values for {c} channels."
        return reject(Reason.SHAPE, sig.op_type, why, input_index=1)
    hwc = alpha.shape[-3:] if alpha.rank >= 3 else None
    if hwc is not None and tuple(hwc) == (h, w, c) and all(d == 1 for d in alpha.shape[:-3]):
        return None
    why = f"alpha shape {fmt_shape(alpha.shape)} matches neither the channels nor HxWxC."
    return reject(Reason.SHAPE, sig.op_type, why, input_index=1)


def reverse_axes(sig: OpSignature) -> Rejection | None:
    if _axes_out_of_range(sig) is None:
        return None
    return reject(Reason.SHAPE, sig.op_type, "An axis is out of range.", input_index=1)


def select_operands(sig: OpSignature) -> Rejection | None:
    if len(sig.present_inputs) != 3 or len(sig.outputs) != 1:
        return reject(Reason.INPUT_COUNT, sig.op_type, "It needs 3 inputs and 1 output.")
    cond, out = sig.inputs[0], sig.outputs[0]
    assert cond is not None
    if cond.dtype not in ("BOOL", "FLOAT16", "FLOAT32"):
        return reject(Reason.DTYPE, sig.op_type, f"The condition is {cond.dtype}.", input_index=0)
    if cond.dtype == "FLOAT32" and cond.is_const and not cond.fp16_weights:
        # Measured: "failed to prepare", and the whole graph stays on the CPU; a runtime
        # float condition and a BOOL constant compile.
        return reject(
            Reason.KERNEL_FAILURE,
            sig.op_type,
            "The condition is a FLOAT32 constant: the delegate fails to prepare the op, and the "
            "whole graph with it; make it a BOOL constant.",
            input_index=0,
            fatal=True,
        )
    for index in (1, 2):
        t = sig.inputs[index]
        assert t is not None
        if t.rank == 0 or t.shape == out.shape or (t.rank == 1 and t.shape[0] <= 1):
            continue
        return reject(
            Reason.BROADCAST,
            sig.op_type,
            f"Input {index} has shape {fmt_shape(t.shape)}; it must be a scalar or the output "
            f"shape {fmt_shape(out.shape)}.",
            input_index=index,
        )
    if cond.num_elements > 1 and cond.rank != out.rank:
        return reject(
            Reason.KERNEL_FAILURE,
            sig.op_type,
            f"The condition {fmt_shape(cond.shape)} has another rank than the output "
            f"{fmt_shape(out.shape)}; reshape it to the output rank.",
            input_index=0,
            fatal=True,
        )
    return fp16_weights_operand(sig)


#: Operands LiteRT 2.3's GPU accelerator computes wrong when they are fp16 weights (a DEQUANTIZE
#: of a FLOAT16 constant, which the delegate reads directly: TFLite's ``FP16GraphPartitionHelper``
#: points the op at the fp16 constant): op -> operand positions, None for every input. Rule
#: ``fp16_constant_operands`` (``rewriter/rules/fp16_operands.py``) reads the same table.
FP16_WEIGHTS_WRONG: Mapping[str, tuple[int, ...] | None] = {
    "CONCATENATION": None,
    "ONE_HOT": (2, 3),
    "PACK": None,
    "SELECT": (1, 2),
    "SELECT_V2": (1, 2),
}


def fp16_weights_positions(op_type: str, num_inputs: int) -> tuple[int, ...]:
    """The positions of ``op_type``'s operands the accelerator reads wrong as fp16 weights."""
    if op_type not in FP16_WEIGHTS_WRONG:
        return ()
    positions = FP16_WEIGHTS_WRONG[op_type]
    return tuple(range(num_inputs)) if positions is None else positions


def fp16_weights_operand(sig: OpSignature) -> Rejection | None:
    """An operand of :data:`FP16_WEIGHTS_WRONG` that is fp16 weights. Measured on lavapipe
    (``tests/test_rule_fp16_constant_operands.py``), every other operand runtime or a float32
    constant:

    * SELECT/SELECT_V2 (then/else), CONCATENATION and PACK (any input): in fp32
      (``enforce_f32``) LiteRT 2.3 builds a shader that stores the operand's f16 texture read in
      an f32 variable (``var true_val : vec4<f32> = vec4<f16>(...)``); WebGPU rejects it ("Error
      while parsing WGSL" on stderr), the op never runs and its output keeps stale values
      (another tensor's, or zeros), with no error to the app. SELECT: outputs of rank 1 to 4,
      the operand a scalar, ``[1]`` or output-shaped, then, else or both, the condition
      runtime, constant or broadcast. CONCATENATION: ranks 1 to 4, every axis, the weights
      first, last or between runtime inputs, two of them, shared with another op, the graph
      partly delegated. PACK: ranks 1 to 3, first, middle or last axis, the weights first or
      last, stacked twice, two of three. All wrong in fp32, right in fp16. (A CONCATENATION of
      fp16 weights only is as wrong, but the table counts it as folded while loading.)
    * ONE_HOT (the on or off value, or both): the kernel reads the scalar's fp16 bits as a
      float32 (-2.0 becomes 6.9e-41) in fp32, and zeros in fp16: wrong in both, no log line.

    Right: float32 constants, runtime operands, int8 weights behind a DEQUANTIZE, and fp16
    weights read by elementwise ops (ADD, SUB, MUL, DIV, POW, SQUARED_DIFFERENCE, MAXIMUM,
    MINIMUM, ADD_N, comparisons: scalar, broadcast or full shape, either side), PRELU, PADV2's
    value, FULLY_CONNECTED and BATCH_MATMUL weights, and RESHAPE/TRANSPOSE of them feeding an
    ADD, MUL or CONCATENATION."""
    for index in fp16_weights_positions(sig.op_type, len(sig.inputs)):
        t = sig.input(index)
        if t is None or not t.fp16_weights:
            continue
        if sig.op_type == "ONE_HOT":
            how = (
                "LiteRT 2.3 reads its fp16 bits as a float32 (-2.0 becomes 6.9e-41) in fp32 and "
                "zeros in fp16, so the output is wrong in both precisions (measured)."
            )
        else:
            how = (
                "in fp32, LiteRT 2.3's shader for it does not compile and the op writes "
                "nothing, so its output holds stale values (measured; fp16 precision is right)."
            )
        why = f"Input {index} is fp16 weights (a DEQUANTIZE of a FLOAT16 constant): {how}"
        return reject(Reason.WRONG_RESULT, sig.op_type, why, input_index=index)
    return None


def _ints(sig: OpSignature, index: int) -> list[int] | None:
    t = sig.input(index)
    if t is None or t.values is None or not t.is_const or t.dtype != "INT32":
        return None
    return [int(v) for v in t.values]


def slice_extent(sig: OpSignature) -> Rejection | None:
    src, out = sig.input(0), sig.output(0)
    begin, size = _ints(sig, 1), _ints(sig, 2)
    if out is None:
        return no_output(sig)
    if src is None or begin is None or size is None or not 1 <= src.rank <= 4:
        return None
    r, n = src.rank, len(begin)
    if n != len(size) or not (n == r or (r == 4 and n == 3)):
        why = f"begin/size have {n} values for a {r}-D input."
        return reject(Reason.SHAPE, sig.op_type, why, input_index=1)
    shape = bhwc(src.shape)
    out_shape = bhwc(out.shape)
    if shape is None or out_shape is None:
        return None
    slots = {4: (0, 1, 2, 3), 3: (0, 2, 3), 2: (0, 3), 1: (0,)}[r]
    if r == 4 and n == 3:
        slots = (1, 2, 3)
    starts, sizes = [0, 0, 0, 0], list(shape)
    for slot, b, s in zip(slots, begin, size, strict=True):
        starts[slot], sizes[slot] = b, s
    extent = []
    for i in range(4):
        length = shape[i] - starts[i] if sizes[i] == -1 else sizes[i]
        end = starts[i] + length
        if end < 0:
            end += shape[i]
        extent.append(end - starts[i])
    if tuple(extent) == out_shape:
        return None
    return reject(Reason.SHAPE, sig.op_type, "begin/size do not match the output shape.")


def _update_mask(mask: int, rank: int) -> int:
    if rank == 3:
        return ((mask & 4) << 1) | ((mask & 2) << 1) | (mask & 1)
    if rank == 2:
        return ((mask & 2) << 2) | (mask & 1)
    return mask


def _round_up_div(n: int, d: int) -> int:
    return math.trunc((n + d - 1) / d)


def tflite_strided_slice_shape(
    shape: tuple[int, ...],
    begin: list[int],
    end: list[int],
    strides: list[int],
    begin_mask: int,
    end_mask: int,
) -> tuple[int, ...] | None:
    """The output shape TFLite's kernel computes (Python slicing semantics, with clamping), for
    slices without ellipsis, new-axis or shrink masks; None when it does not apply."""
    if not len(begin) == len(end) == len(strides) or len(begin) > len(shape):
        return None
    out = []
    for i, n in enumerate(shape):
        if i >= len(begin):
            out.append(n)
            continue
        step = strides[i]
        if step == 0:
            return None
        b = (0 if step > 0 else n - 1) if begin_mask >> i & 1 else begin[i]
        e = (n if step > 0 else -1) if end_mask >> i & 1 else end[i]
        if not begin_mask >> i & 1:
            b = b + n if b < 0 else b
            b = min(max(b, 0), n) if step > 0 else min(max(b, -1), n - 1)
        if not end_mask >> i & 1:
            e = e + n if e < 0 else e
            e = min(max(e, 0), n) if step > 0 else min(max(e, -1), n - 1)
        out.append(max(0, math.ceil((e - b) / step)))
    return tuple(out)


def strided_slice_extent(sig: OpSignature) -> Rejection | None:
    """The delegate's own slice arithmetic (no clamping of out-of-range ends) must reproduce
    the output shape TFLite computes."""
    src, out = sig.input(0), sig.output(0)
    begin, end, strides = _ints(sig, 1), _ints(sig, 2), _ints(sig, 3)
    if out is None:
        return no_output(sig)
    if src is None or begin is None or end is None or strides is None or src.rank > 4:
        return None
    if strided_slice_masks(sig) is not None:
        return None
    computed = tflite_strided_slice_shape(
        src.shape, begin, end, strides, sig.option("beginMask", 0), sig.option("endMask", 0)
    )
    shape, out_shape = bhwc(src.shape), bhwc(computed if computed is not None else out.shape)
    if shape is None or out_shape is None:
        return None
    r, n = src.rank, len(begin)
    if n not in (r, r - 1):
        why = f"begin/end/strides have {n} values for a {r}-D input."
        return reject(Reason.SHAPE, sig.op_type, why, input_index=1)

    def read(values: list[int], current: list[int]) -> list[int]:
        v, c = values, current
        if n == r:  # the values include the batch dimension
            if len(v) == 4:
                return list(v)
            if len(v) == 3:
                return [v[0], c[1], v[1], v[2]]
            if len(v) == 2:
                return [v[0], c[1], c[2], v[1]]
            return [v[0], c[1], c[2], c[3]]
        if len(v) == 3:
            return [c[0], v[0], v[1], v[2]]
        if len(v) == 2:
            return [c[0], c[1], v[0], v[1]]
        return [c[0], c[1], c[2], v[0]]

    starts = read(begin, [0, 0, 0, 0])
    ends = read(end, list(shape))
    steps = read(strides, [1, 1, 1, 1])
    for i in range(4):
        if ends[i] < 0:
            ends[i] += shape[i]
        if starts[i] < 0:
            starts[i] += shape[i]
    begin_mask = _update_mask(sig.option("beginMask", 0), r)
    end_mask = _update_mask(sig.option("endMask", 0), r)
    for i, bit in enumerate((1, 2, 4, 8)):
        if begin_mask & bit:
            starts[i] = 0
        if end_mask & bit:
            ends[i] = shape[i]
    if any(s == 0 for s in steps):
        return reject(Reason.OPTIONS, sig.op_type, "A stride is 0.", input_index=3)
    if any(s < 0 for s in steps):
        why = "A stride is negative: reverse slices are not supported (use REVERSE_V2)."
        return reject(Reason.OPTIONS, sig.op_type, why, input_index=3)
    expected = tuple(_round_up_div(ends[i] - starts[i], steps[i]) for i in range(4))
    if expected == out_shape and computed is not None and 0 in computed:
        why = f"It produces an empty tensor {fmt_shape(computed)} from {fmt_shape(src.shape)}."
        return reject(Reason.CRASH, sig.op_type, why, fatal=True)
    if expected == out_shape:
        return None
    return reject(
        Reason.SHAPE,
        sig.op_type,
        "Its begin/end do not give the output shape without clamping (an end beyond the "
        "dimension, without end_mask).",
    )


def split_axis(sig: OpSignature) -> Rejection | None:
    axis_index, data_index = (0, 1) if sig.op_type == "SPLIT" else (2, 0)
    axis = _ints(sig, axis_index)
    src = sig.input(data_index)
    if axis is None or src is None or src.rank > 4:
        return None
    if axis and axis_ok(src.rank, axis[0]):
        return None
    return reject(Reason.SHAPE, sig.op_type, "The split axis is out of range.")


def topk_k(sig: OpSignature) -> Rejection | None:
    k = sig.input(1)
    if k is None or not k.is_const:
        return reject(Reason.NON_CONST_INPUT, sig.op_type, "k must be a constant.", input_index=1)
    if k.num_elements != 1:
        return reject(Reason.SHAPE, sig.op_type, "k must be a scalar.", input_index=1)
    return None


def transpose_perm(sig: OpSignature) -> Rejection | None:
    perm = sig.input(1)
    if perm is None or not perm.is_const:
        return None
    if 2 <= perm.num_elements <= 4:
        return None
    why = f"The permutation has {perm.num_elements} entries; 2 to 4 here."
    return reject(Reason.RANK, sig.op_type, why, input_index=1)


def unpack_axis(sig: OpSignature) -> Rejection | None:
    src = sig.input(0)
    if src is None or src.rank > 4 or sig.option("num", 0) == 1:
        return None
    if axis_ok(src.rank, sig.option("axis", 0)):
        return None
    return reject(Reason.SHAPE, sig.op_type, "The unpack axis is out of range.")


def arg_max_axis(sig: OpSignature) -> Rejection | None:
    src, axis = sig.input(0), _ints(sig, 1)
    if src is None or axis is None or src.rank > 4:
        return None
    if axis and axis_ok(src.rank, axis[0]):
        return None
    return reject(Reason.SHAPE, sig.op_type, "The axis is out of range.", input_index=1)


def one_hot_layout(sig: OpSignature) -> Rejection | None:
    indices = sig.input(0)
    if indices is None:
        return None
    if indices.dtype != "INT32":
        return reject(Reason.DTYPE, sig.op_type, "Indices must be INT32.", input_index=0)
    axis = sig.option("axis", -1)
    if axis not in (-1, indices.rank):
        why = f"axis is {axis}; the one-hot dimension must be the last one."
        return reject(Reason.OPTIONS, sig.op_type, why)
    dims = indices.shape
    for i, d in enumerate(dims[:-1]):
        if len(dims) > 3 and i == 0:
            continue
        if d != 1:
            why = f"Indices {fmt_shape(dims)}: only batch and last dimensions may exceed 1."
            return reject(Reason.SHAPE, sig.op_type, why, input_index=0)
    for index in (2, 3):
        t = sig.input(index)
        if t is None or not t.is_const or t.dtype != "FLOAT32" or t.num_elements != 1:
            why = "on/off values must be float32 constant scalars."
            return reject(Reason.NON_CONST_INPUT, sig.op_type, why, input_index=index)
    return None


def concat_fused_activation(sig: OpSignature) -> Rejection | None:
    """Measured (LiteRT 2.3, lavapipe): a CONCATENATION with any fused activation (RELU,
    RELU_N1_TO_1, RELU6, TANH), of 2-D or 4-D runtime inputs, fails the whole graph ("Failed to
    modify graph with delegate"), where the same op without it compiles. TFLite's CPU kernel
    refuses it too ("params->activation != kTfLiteActNone"): no runtime here runs it."""
    value = sig.option(_ACT, 0)
    if not value:
        return None
    name = ACTIVATION_NAMES.get(value, str(value))
    return reject(
        Reason.FUSED_ACTIVATION,
        sig.op_type,
        f"Its fused {name} makes the accelerator fail to build the whole graph (measured: "
        '"Failed to modify graph with delegate"), and TFLite\'s CPU kernel refuses it too: make '
        "the activation an op of its own when converting.",
        fatal=True,
    )


def composite_name(sig: OpSignature) -> Rejection | None:
    name = sig.option("name", b"")
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    from tflkit.ir.composites import describe

    if name in CRASHING_COMPOSITES:
        return reject(
            Reason.CRASH,
            sig.op_type,
            f"The composite {describe(name)} kills it while compiling (measured on LiteRT 2.3: "
            "SIGSEGV, though LiteRT's source has a kernel for it); inlined, its decomposition "
            "runs on the GPU.",
            fatal=True,
        )
    what = describe(name) if name else "without a name (no StableHLOCompositeOptions)"
    return reject(
        Reason.UNSUPPORTED_OP,
        sig.op_type,
        f"The composite {what} has no GPU implementation; its decomposition subgraph runs on "
        "the CPU.",
    )


#: Composites LiteRT's GPU source has kernels for, on which LiteRT 2.3's accelerator dies with
#: SIGSEGV while compiling (measured on every graph of the LLM corpus, and on one
#: ``odml.rms_norm`` over a 6-op decomposition: ``tests/test_rule_composite.py``).
CRASHING_COMPOSITES = frozenset(
    {"odml.group_norm", "odml.rms_norm", "odml.scaled_dot_product_attention"}
)

# --- the table --------------------------------------------------------------------------------

_ACT = "fusedActivationFunction"
_ONE_RUNTIME = (runtime_inputs(1), output_count(1))

RULES: dict[str, OpRule] = {
    **{op: unary_rule(op) for op in UNARY_VERSIONS},
    **{op: binary_rule(op) for op in BINARY_VERSIONS},
    "CONCATENATION": OpRule(
        max_version=6,
        extra_in_dtypes=ALL_PRECISION,
        extra_out_dtypes=ALL_PRECISION,
        checks=(concat_fused_activation, fp16_weights_operand),
    ),
    "CONV_2D": OpRule(
        max_version=6,
        activation=_ACT,
        checks=(runtime_input(0), runtime_inputs(1, 2), positive_strides, positive_dilations),
    ),
    "DEPTHWISE_CONV_2D": OpRule(
        max_version=6,
        activation=_ACT,
        checks=(runtime_input(0), runtime_inputs(1, 2), positive_strides, positive_dilations),
    ),
    "TRANSPOSE_CONV": OpRule(
        max_version=3,
        checks=(runtime_input(2), runtime_inputs(1, 2), positive_strides),
    ),
    "FULLY_CONNECTED": OpRule(
        max_version=14,
        activation=_ACT,
        checks=(fc_input_not_const, runtime_inputs(1, 2), fc_weights_format, fc_keep_num_dims),
    ),
    "BATCH_MATMUL": OpRule(checks=(input_count(2), output_count(1), batch_matmul_operands)),
    "AVERAGE_POOL_2D": OpRule(
        max_version=2,
        activation=_ACT,
        checks=(unary_runtime_input, positive_kernel, positive_strides),
    ),
    "MAX_POOL_2D": OpRule(
        max_version=2,
        activation=_ACT,
        checks=(unary_runtime_input, positive_kernel, positive_strides),
    ),
    "CUMSUM": OpRule(max_version=1, checks=(input_count(2), cumsum_types, const_input(1))),
    "DEPTH_TO_SPACE": OpRule(checks=(*_ONE_RUNTIME, block_size_above_one)),
    "SPACE_TO_DEPTH": OpRule(
        max_version=2, checks=(*_ONE_RUNTIME, const_inputs(0), block_size_above_one)
    ),
    "DEQUANTIZE": OpRule(max_version=3, checks=(input_count(1), output_count(1), dequantize_input)),
    "QUANTIZE": OpRule(max_version=2, checks=(*_ONE_RUNTIME, quantize_output)),
    "EMBEDDING_LOOKUP": OpRule(
        extra_in_dtypes=frozenset({"INT32"}), checks=(input_count(2), embedding_lookup_shapes)
    ),
    "DYNAMIC_UPDATE_SLICE": OpRule(
        extra_in_dtypes=ALL_PRECISION | frozenset({"INT32"}),
        extra_out_dtypes=ALL_PRECISION,
        checks=(dynamic_update_slice_shapes,),
    ),
    "GATHER": OpRule(
        extra_in_dtypes=ALL_PRECISION,
        extra_out_dtypes=ALL_PRECISION,
        checks=(gather_operands, same_dtype_in_out),
    ),
    "LSTM": OpRule(max_version=4, checks=(lstm_kernel,)),
    "MEAN": OpRule(checks=(*_ONE_RUNTIME, const_inputs(1), const_input(1), reduce_axes)),
    **{
        op: OpRule(
            extra_in_dtypes=INTS if op != "REDUCE_ANY" and op != "REDUCE_ALL" else frozenset(),
            extra_out_dtypes=INTS if op != "REDUCE_ANY" and op != "REDUCE_ALL" else frozenset(),
            in_dtypes=frozenset({"BOOL"}) if op in ("REDUCE_ANY", "REDUCE_ALL") else None,
            out_dtypes=frozenset({"BOOL"}) if op in ("REDUCE_ANY", "REDUCE_ALL") else None,
            checks=(*_ONE_RUNTIME, const_input(1), reduce_axes),
        )
        for op in ("SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD", "REDUCE_ANY", "REDUCE_ALL")
    },
    **{
        op: OpRule(
            max_version=5,
            extra_in_dtypes=ALL_PRECISION if op != "MIRROR_PAD" else frozenset(),
            extra_out_dtypes=ALL_PRECISION if op != "MIRROR_PAD" else frozenset(),
            checks=(
                mirror_pad_reflect,
                runtime_input(0),
                runtime_inputs(1),
                const_input(1),
                paddings_4x2_or_3x2,
                padv2_constant,
            ),
        )
        for op in ("PAD", "PADV2", "MIRROR_PAD")
    },
    "PACK": OpRule(
        extra_in_dtypes=ALL_PRECISION,
        extra_out_dtypes=ALL_PRECISION,
        checks=(pack_inputs, fp16_weights_operand),
    ),
    "PRELU": OpRule(max_version=1, checks=(runtime_input(0), prelu_alpha)),
    **{
        op: OpRule(max_version=2, checks=(*_ONE_RUNTIME, const_inputs(0)))
        for op in ("RELU", "RELU6", "RELU_N1_TO_1", "LEAKY_RELU")
    },
    "RESHAPE": OpRule(
        max_version=1,
        extra_in_dtypes=ALL_PRECISION,
        extra_out_dtypes=ALL_PRECISION,
        checks=_ONE_RUNTIME,
    ),
    "RESIZE_BILINEAR": OpRule(max_version=3, checks=(*_ONE_RUNTIME, resize_corners)),
    "RESIZE_NEAREST_NEIGHBOR": OpRule(max_version=3, checks=_ONE_RUNTIME),
    "REVERSE_V2": OpRule(
        extra_in_dtypes=ALL_PRECISION,
        extra_out_dtypes=ALL_PRECISION,
        checks=(runtime_input(0), const_input(1), reverse_axes),
    ),
    **{
        op: OpRule(
            max_version=1,
            extra_in_dtypes=ALL_PRECISION,
            extra_out_dtypes=ALL_PRECISION,
            checks=(select_operands,),
        )
        for op in ("SELECT", "SELECT_V2")
    },
    "SLICE": OpRule(
        max_version=8,
        extra_in_dtypes=ALL_PRECISION,
        extra_out_dtypes=ALL_PRECISION,
        checks=(input_count(3), runtime_input(0), const_input(1), const_input(2), slice_extent),
    ),
    "SOFTMAX": OpRule(max_version=4, checks=(*_ONE_RUNTIME, const_inputs(0), softmax_beta_one)),
    "SPLIT": OpRule(checks=(const_input(0), runtime_input(1), split_axis)),
    "SPLIT_V": OpRule(
        checks=(runtime_inputs(1), const_inputs(2), const_input(2), split_axis),
    ),
    "STRIDED_SLICE": OpRule(
        max_version=2,
        extra_in_dtypes=ALL_PRECISION,
        extra_out_dtypes=ALL_PRECISION,
        checks=(
            strided_slice_masks,
            input_count(4),
            const_input(1),
            const_input(2),
            const_input(3),
            strided_slice_extent,
        ),
    ),
    "TILE": OpRule(
        extra_in_dtypes=INTS, extra_out_dtypes=INTS, checks=(*_ONE_RUNTIME, const_input(1))
    ),
    "TOPK_V2": OpRule(
        max_version=1,
        extra_out_dtypes=frozenset({"INT32"}),
        checks=(runtime_input(0), topk_k, output_count(2)),
    ),
    "TRANSPOSE": OpRule(
        extra_in_dtypes=ALL_PRECISION,
        extra_out_dtypes=ALL_PRECISION,
        checks=(*_ONE_RUNTIME, const_input(1), transpose_perm),
    ),
    "UNPACK": OpRule(checks=(runtime_input(0), unpack_axis)),
    "ARG_MAX": OpRule(
        out_dtypes=frozenset({"INT32"}),
        checks=(*_ONE_RUNTIME, const_inputs(1), const_input(1), arg_max_axis),
    ),
    "ONE_HOT": OpRule(
        max_version=1,
        extra_in_dtypes=frozenset({"INT32"}),
        checks=(input_count(4), runtime_input(0), one_hot_layout, fp16_weights_operand),
    ),
    "CAST": OpRule(
        extra_in_dtypes=ALL_PRECISION,
        extra_out_dtypes=ALL_PRECISION,
        checks=(*_ONE_RUNTIME, const_inputs(0)),
    ),
    "STABLEHLO_CLAMP": OpRule(extra_in_dtypes=INTS, extra_out_dtypes=INTS),
    "STABLEHLO_COMPOSITE": OpRule(checks=(composite_name,)),
}

#: Custom ops the GPU delegate's source has kernels for (its custom vision ops and the
#: norm/attention custom calls).
CUSTOM_RULES: dict[str, OpRule] = {
    "Convolution2DTransposeBias": OpRule(checks=(runtime_input(0), const_input(1, FLOATS))),
    "MaxPoolingWithArgmax2D": OpRule(checks=(runtime_inputs(1), output_count(2))),
    "MaxUnpooling2D": OpRule(checks=(runtime_inputs(2), output_count(1))),
    "Resampler": OpRule(checks=(runtime_inputs(2), output_count(1))),
    **{
        name: OpRule(checks=(runtime_input(0),))
        for name in (
            "custom_call.GroupNorm",
            "custom_call.LayerNorm",
            "custom_call.RmsNorm",
            "custom_call.PixelShuffle",
            "custom_call.absolute_positional_embedding",
            "custom_call.rotary_positional_embedding",
        )
    },
}

#: Ops TFLite evaluates while loading when all their inputs are constants (measured: the
#: accelerator never sees them, so they count as accelerated).
CONST_FOLDED = frozenset(
    {
        "ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE", "EQUAL",
        "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "CONCATENATION",
        "STRIDED_SLICE",
    }
)  # fmt: skip

TARGET = Target(
    name="litert-gpu",
    title="LiteRT GPU accelerator (ai-edge-litert 2.3, ML Drift over WebGPU/OpenCL/Metal)",
    rules=RULES,
    custom_rules=CUSTOM_RULES,
    in_dtypes=IN_DTYPES,
    out_dtypes=OUT_DTYPES,
    const_folded=CONST_FOLDED,
    flex_fatal=True,
    unknown_custom_fatal=True,
    variable_tensors_fatal=True,
    max_partitions=1,
    provenance=(
        "ML Drift delegate model_builder (LiteRT) and tflite/tools/versioning/"
        "gpu_compatibility.cc, verified against CompiledModel GPU on lavapipe"
    ),
)
