"""Classic TFLite GPU delegate (TFLite 2.x ``GpuDelegateV2`` as shipped in Android apps).

Derived from the delegate's sources (``delegates/gpu/common/model_builder.cc`` and
``tools/versioning/gpu_compatibility.cc``, TFLite 2.16-2.18): no such runtime runs on this
machine, so unlike ``litert-gpu`` these rules are not runtime-verified. Where the classic delegate
is stricter than LiteRT's accelerator it says so here: no integer arithmetic, the narrow
ADD/MUL broadcasting, comparison ops only in front of CAST/SELECT, fewer op types. Like
``litert_gpu.py`` this module is a table whose rows name predicates of ``tflkit.compat.predicates``
(the classic delegate's own ones live there too: the ``*_classic`` variants, and its narrower
broadcasting, comparison, cast and depthwise checks).
"""

from __future__ import annotations

from tflkit.compat.predicates import (
    activations,
    composite,
    conv,
    data_movement,
    dtypes,
    elementwise,
    matmul,
    operands,
    quantization,
    reduction,
    shapes,
    slicing,
)
from tflkit.compat.targets import litert_gpu as litert
from tflkit.compat.targets.common import OpRule, Target

#: GPU delegate V2 defaults enable quantized models, so int8/uint8 pass the type check.
IN_DTYPES = frozenset({"FLOAT32", "FLOAT16", "INT8", "UINT8"})
OUT_DTYPES = IN_DTYPES

UNARY_OPS = (
    "ABS", "COS", "ELU", "EXP", "FLOOR", "GELU", "LOG", "LOGISTIC", "NEG", "RSQRT", "SIGN",
    "SIN", "SQRT", "SQUARE", "TANH",
)  # fmt: skip
BINARY_OPS = (
    "ADD", "ADD_N", "SUB", "MUL", "DIV", "POW", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM",
    "FLOOR_DIV", "FLOOR_MOD", "EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER",
    "GREATER_EQUAL", "LOGICAL_AND",
)  # fmt: skip


def binary_rule(op: str) -> OpRule:
    checks = [elementwise.add_n_two_inputs] if op == "ADD_N" else [elementwise.elementwise_operands]
    checks += [
        elementwise.same_input_fatal,
        elementwise.narrow_broadcast,
        elementwise.mul_not_smaller,
        elementwise.comparison_feeds_cast_or_select,
    ]
    extra_out = (
        frozenset({"BOOL"}) if op in elementwise.COMPARISONS or op == "LOGICAL_AND" else frozenset()
    )
    extra_in = frozenset({"BOOL"}) if op == "LOGICAL_AND" else frozenset()
    return OpRule(
        max_version=3 if op == "MUL" else 2,
        extra_in_dtypes=extra_in,
        extra_out_dtypes=extra_out,
        activation="fusedActivationFunction" if op in ("SUB", "MUL", "DIV") else None,
        checks=tuple(checks),
    )


_ACT = "fusedActivationFunction"
_ONE = (operands.runtime_inputs(1), operands.output_count(1))
_CONV_IO = (operands.runtime_inputs(1, 2), operands.output_count(1))

RULES: dict[str, OpRule] = {
    **{op: OpRule(max_version=2, checks=(operands.unary_runtime_input,)) for op in UNARY_OPS},
    **{op: binary_rule(op) for op in BINARY_OPS},
    "HARD_SWISH": OpRule(checks=_ONE),
    "AVERAGE_POOL_2D": OpRule(
        max_version=2, activation=_ACT, checks=(*_ONE, conv.positive_kernel, conv.positive_strides)
    ),
    "MAX_POOL_2D": OpRule(
        max_version=2, activation=_ACT, checks=(*_ONE, conv.positive_kernel, conv.positive_strides)
    ),
    "BATCH_MATMUL": OpRule(
        checks=(operands.input_count(2), operands.output_count(1), matmul.batch_matmul_classic)
    ),
    "CAST": OpRule(
        extra_in_dtypes=frozenset({"BOOL", "INT32"}),
        extra_out_dtypes=frozenset({"BOOL", "INT32"}),
        checks=(*_ONE, dtypes.cast_types),
    ),
    "CONCATENATION": OpRule(max_version=2, activation=_ACT),
    "CONV_2D": OpRule(
        max_version=6,
        activation=_ACT,
        checks=(
            *_CONV_IO,
            operands.runtime_input(0),
            conv.positive_strides,
            conv.positive_dilations,
        ),
    ),
    "DEPTHWISE_CONV_2D": OpRule(
        max_version=6,
        activation=_ACT,
        checks=(*_CONV_IO, conv.positive_strides, conv.positive_dilations, conv.depthwise_shapes),
    ),
    "TRANSPOSE_CONV": OpRule(max_version=3, checks=(*_CONV_IO, conv.positive_strides)),
    "CUMSUM": OpRule(
        max_version=1,
        checks=(operands.input_count(2), reduction.cumsum_types, operands.const_input(1)),
    ),
    "DENSIFY": OpRule(max_version=1, checks=(operands.runtime_inputs(0), operands.output_count(1))),
    "DEPTH_TO_SPACE": OpRule(checks=(*_ONE, data_movement.block_size_above_one)),
    "SPACE_TO_DEPTH": OpRule(max_version=2, checks=(*_ONE, data_movement.block_size_above_one)),
    "DEQUANTIZE": OpRule(
        max_version=3,
        checks=(operands.input_count(1), operands.output_count(1), quantization.dequantize_input),
    ),
    "QUANTIZE": OpRule(max_version=2, checks=(*_ONE, quantization.quantize_output)),
    "FULLY_CONNECTED": OpRule(
        max_version=9,
        activation=_ACT,
        checks=(
            matmul.fc_weights_format,
            operands.runtime_inputs(1, 2),
            matmul.fc_input_not_const,
            matmul.fc_keep_num_dims,
        ),
    ),
    "GATHER": OpRule(
        max_version=1, extra_in_dtypes=frozenset({"INT32"}), checks=(data_movement.gather_classic,)
    ),
    "LSTM": OpRule(max_version=4, checks=(composite.lstm_kernel,)),
    "MEAN": OpRule(checks=(*_ONE, operands.const_inputs(1), operands.const_input(1))),
    **{
        op: OpRule(checks=(*_ONE, operands.const_input(1)))
        for op in ("SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD")
    },
    **{
        op: OpRule(
            max_version=2,
            checks=(
                data_movement.mirror_pad_reflect,
                *_ONE,
                operands.const_input(1),
                data_movement.paddings_4x2_or_3x2,
            ),
        )
        for op in ("PAD", "PADV2", "MIRROR_PAD")
    },
    "PACK": OpRule(checks=(data_movement.pack_inputs,)),
    "ONE_HOT": OpRule(
        max_version=1,
        extra_in_dtypes=frozenset({"INT32"}),
        checks=(operands.input_count(4), data_movement.one_hot_classic),
    ),
    "PRELU": OpRule(max_version=1, checks=(operands.runtime_input(0), activations.prelu_alpha)),
    **{
        op: OpRule(max_version=2)
        for op in ("RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "LEAKY_RELU")
    },
    "RESHAPE": OpRule(max_version=1, checks=_ONE),
    "RESIZE_BILINEAR": OpRule(max_version=3, checks=(*_ONE, conv.resize_corners)),
    "RESIZE_NEAREST_NEIGHBOR": OpRule(max_version=3, checks=_ONE),
    **{
        op: OpRule(
            max_version=1,
            extra_in_dtypes=frozenset({"BOOL"}),
            checks=(data_movement.select_classic,),
        )
        for op in ("SELECT", "SELECT_V2")
    },
    "SLICE": OpRule(
        max_version=2, checks=(operands.input_count(3), shapes.rank_in(0, frozenset({3, 4})))
    ),
    "SOFTMAX": OpRule(max_version=2, checks=(reduction.softmax_beta_one,)),
    "SPLIT": OpRule(),
    "SPLIT_V": OpRule(),
    "STRIDED_SLICE": OpRule(
        max_version=4,
        checks=(
            slicing.strided_slice_masks,
            operands.input_count(4),
            shapes.rank_in(0, frozenset({3, 4})),
            slicing.strided_slice_extent,
        ),
    ),
    "TILE": OpRule(checks=_ONE),
    "TRANSPOSE": OpRule(max_version=4, checks=(*_ONE, shapes.transpose_perm)),
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
