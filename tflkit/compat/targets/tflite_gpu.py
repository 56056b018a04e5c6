"""Classic TFLite GPU delegate (TFLite 2.x ``GpuDelegateV2`` as shipped in Android apps).

Derived from the delegate's sources (``delegates/gpu/common/model_builder.cc`` and
``tools/versioning/gpu_compatibility.cc``, TFLite 2.16-2.18): no such runtime runs on this
machine, so unlike ``litert-gpu`` these rules are not runtime-verified. Where the classic delegate
is stricter than LiteRT's accelerator it says so here: no integer arithmetic, the narrow
ADD/MUL broadcasting, comparison ops only in front of CAST/SELECT, fewer op types.
"""

from __future__ import annotations

from dataclasses import replace

from tflkit.compat.reasons import Reason, Rejection, reject
from tflkit.compat.signature import OpSignature
from tflkit.compat.targets import litert_gpu as litert
from tflkit.compat.targets.common import (
    FLOATS,
    OpRule,
    Target,
    block_size_above_one,
    const_input,
    const_inputs,
    depthwise_multiplier,
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
    rank_in,
    resize_corners,
    runtime_input,
    runtime_inputs,
    softmax_beta_one,
    strided_slice_masks,
    unary_runtime_input,
)

#: GPU delegate V2 defaults enable quantized models, so int8/uint8 pass the type check.
IN_DTYPES = frozenset({"FLOAT32", "FLOAT16", "INT8", "UINT8"})
OUT_DTYPES = IN_DTYPES
COMPARISONS = litert.COMPARISONS

UNARY_OPS = (
    "ABS", "COS", "ELU", "EXP", "FLOOR", "GELU", "LOG", "LOGISTIC", "NEG", "RSQRT", "SIGN",
    "SIN", "SQRT", "SQUARE", "TANH",
)  # fmt: skip
BINARY_OPS = (
    "ADD", "ADD_N", "SUB", "MUL", "DIV", "POW", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM",
    "FLOOR_DIV", "FLOOR_MOD", "EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER",
    "GREATER_EQUAL", "LOGICAL_AND",
)  # fmt: skip


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


def gather_classic(sig: OpSignature) -> Rejection | None:
    found = litert.gather_operands(sig)
    if found is not None:
        return found
    data = sig.input(0)
    if data is not None and data.dtype == "INT32":
        return reject(Reason.DTYPE, sig.op_type, "The data input is INT32.", input_index=0)
    return None


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


def depthwise_shapes(sig: OpSignature) -> Rejection | None:
    src, weights, out = sig.input(0), sig.input(1), sig.output(0)
    if out is None:
        return no_output(sig)
    if src is None or weights is None:
        return None
    if src.rank != 4 or weights.rank != 4 or out.rank != 4:
        return reject(Reason.SHAPE, sig.op_type, "Input, filter and output must be 4-D.")
    if weights.shape[3] != out.shape[3]:
        return reject(Reason.SHAPE, sig.op_type, "Filter and output channels differ.")
    return depthwise_multiplier(sig)


def one_hot_classic(sig: OpSignature) -> Rejection | None:
    indices = sig.input(0)
    if indices is None or indices.rank == 0:
        return None
    axis = sig.option("axis", -1)
    if axis not in (-1, indices.shape[-1]):
        return reject(Reason.OPTIONS, sig.op_type, f"axis is {axis}.")
    return litert.one_hot_layout(replace(sig, option_fields={"axis": -1}))


def select_classic(sig: OpSignature) -> Rejection | None:
    found = litert.select_operands(sig)
    if found is not None and found.code != Reason.KERNEL_FAILURE:
        return found
    for index in (1, 2):
        t = sig.input(index)
        if t is not None and t.dtype not in FLOATS:
            return reject(Reason.DTYPE, sig.op_type, f"Input {index} must be float.")
        if t is not None and t.is_const and t.rank == 2:
            return reject(
                Reason.SHAPE, sig.op_type, f"Input {index} is a 2-D constant.", input_index=index
            )
    return None


def binary_rule(op: str) -> OpRule:
    checks = [litert.add_n_two_inputs] if op == "ADD_N" else [elementwise_operands]
    checks += [same_input_fatal, narrow_broadcast, mul_not_smaller, comparison_feeds_cast_or_select]
    extra_out = frozenset({"BOOL"}) if op in COMPARISONS or op == "LOGICAL_AND" else frozenset()
    extra_in = frozenset({"BOOL"}) if op == "LOGICAL_AND" else frozenset()
    return OpRule(
        max_version=3 if op == "MUL" else 2,
        extra_in_dtypes=extra_in,
        extra_out_dtypes=extra_out,
        activation="fusedActivationFunction" if op in ("SUB", "MUL", "DIV") else None,
        checks=tuple(checks),
    )


_ACT = "fusedActivationFunction"
_ONE = (runtime_inputs(1), output_count(1))
_CONV_IO = (runtime_inputs(1, 2), output_count(1))

RULES: dict[str, OpRule] = {
    **{op: OpRule(max_version=2, checks=(unary_runtime_input,)) for op in UNARY_OPS},
    **{op: binary_rule(op) for op in BINARY_OPS},
    "HARD_SWISH": OpRule(checks=_ONE),
    "AVERAGE_POOL_2D": OpRule(
        max_version=2, activation=_ACT, checks=(*_ONE, positive_kernel, positive_strides)
    ),
    "MAX_POOL_2D": OpRule(
        max_version=2, activation=_ACT, checks=(*_ONE, positive_kernel, positive_strides)
    ),
    "BATCH_MATMUL": OpRule(checks=(input_count(2), output_count(1), batch_matmul_classic)),
    "CAST": OpRule(
        extra_in_dtypes=frozenset({"BOOL", "INT32"}),
        extra_out_dtypes=frozenset({"BOOL", "INT32"}),
        checks=(*_ONE, cast_types),
    ),
    "CONCATENATION": OpRule(max_version=2, activation=_ACT),
    "CONV_2D": OpRule(
        max_version=6,
        activation=_ACT,
        checks=(*_CONV_IO, runtime_input(0), positive_strides, positive_dilations),
    ),
    "DEPTHWISE_CONV_2D": OpRule(
        max_version=6,
        activation=_ACT,
        checks=(*_CONV_IO, positive_strides, positive_dilations, depthwise_shapes),
    ),
    "TRANSPOSE_CONV": OpRule(max_version=3, checks=(*_CONV_IO, positive_strides)),
    "CUMSUM": OpRule(max_version=1, checks=(input_count(2), litert.cumsum_types, const_input(1))),
    "DENSIFY": OpRule(max_version=1, checks=(runtime_inputs(0), output_count(1))),
    "DEPTH_TO_SPACE": OpRule(checks=(*_ONE, block_size_above_one)),
    "SPACE_TO_DEPTH": OpRule(max_version=2, checks=(*_ONE, block_size_above_one)),
    "DEQUANTIZE": OpRule(
        max_version=3, checks=(input_count(1), output_count(1), litert.dequantize_input)
    ),
    "QUANTIZE": OpRule(max_version=2, checks=(*_ONE, litert.quantize_output)),
    "FULLY_CONNECTED": OpRule(
        max_version=9,
        activation=_ACT,
        checks=(fc_weights_format, runtime_inputs(1, 2), fc_input_not_const, fc_keep_num_dims),
    ),
    "GATHER": OpRule(max_version=1, extra_in_dtypes=frozenset({"INT32"}), checks=(gather_classic,)),
    "LSTM": OpRule(max_version=4, checks=(litert.lstm_kernel,)),
    "MEAN": OpRule(checks=(*_ONE, const_inputs(1), const_input(1))),
    **{
        op: OpRule(checks=(*_ONE, const_input(1)))
        for op in ("SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD")
    },
    **{
        op: OpRule(
            max_version=2,
            checks=(mirror_pad_reflect, *_ONE, const_input(1), paddings_4x2_or_3x2),
        )
        for op in ("PAD", "PADV2", "MIRROR_PAD")
    },
    "PACK": OpRule(checks=(litert.pack_inputs,)),
    "ONE_HOT": OpRule(
        max_version=1,
        extra_in_dtypes=frozenset({"INT32"}),
        checks=(input_count(4), one_hot_classic),
    ),
    "PRELU": OpRule(max_version=1, checks=(runtime_input(0), litert.prelu_alpha)),
    **{
        op: OpRule(max_version=2)
        for op in ("RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "LEAKY_RELU")
    },
    "RESHAPE": OpRule(max_version=1, checks=_ONE),
    "RESIZE_BILINEAR": OpRule(max_version=3, checks=(*_ONE, resize_corners)),
    "RESIZE_NEAREST_NEIGHBOR": OpRule(max_version=3, checks=_ONE),
    **{
        op: OpRule(
            max_version=1,
            extra_in_dtypes=frozenset({"BOOL"}),
            checks=(select_classic,),
        )
        for op in ("SELECT", "SELECT_V2")
    },
    "SLICE": OpRule(max_version=2, checks=(input_count(3), rank_in(0, frozenset({3, 4})))),
    "SOFTMAX": OpRule(max_version=2, checks=(softmax_beta_one,)),
    "SPLIT": OpRule(),
    "SPLIT_V": OpRule(),
    "STRIDED_SLICE": OpRule(
        max_version=4,
        checks=(
            strided_slice_masks,
            input_count(4),
            rank_in(0, frozenset({3, 4})),
            litert.strided_slice_extent,
        ),
    ),
    "TILE": OpRule(checks=_ONE),
    "TRANSPOSE": OpRule(max_version=4, checks=(*_ONE, litert.transpose_perm)),
    "UNPACK": OpRule(),
}

CUSTOM_RULES: dict[str, OpRule] = {
    name: rule for name, rule in litert.CUSTOM_RULES.items() if not name.startswith("custom_call.")
}

TARGET = Target(
    name="tflite-gpu",
    title="TFLite GPU delegate (classic GpuDelegateV2, TFLite 2.x on Android)",
    rules=RULES,
    custom_rules=CUSTOM_RULES,
    in_dtypes=IN_DTYPES,
    out_dtypes=OUT_DTYPES,
    const_folded=litert.CONST_FOLDED,
    flex_fatal=True,
    unknown_custom_fatal=True,
    max_partitions=1,
    provenance=(
        "TFLite delegates/gpu/common/model_builder.cc and tools/versioning/gpu_compatibility.cc "
        "(source only: this runtime does not run here)"
    ),
)
