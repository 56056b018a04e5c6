"""LiteRT GPU accelerator (ai-edge-litert 2.3): the ML Drift GPU delegate behind ``CompiledModel``.

Rules come from the delegate's per-op support checks and were then checked op by op against the
real accelerator (compile a one-op model, read what it rejects); where the two disagreed the
runtime won. docs/compat-rules.md lists every rule with its evidence.

This module is the table: op type -> ``OpRule`` (version, types, fused activation, and the
predicates from ``tflkit.compat.predicates`` its ``checks`` run in order). A new verdict is a
predicate in its family's module there plus its name in the row of each op it holds for.
"""

from __future__ import annotations

from collections.abc import Mapping

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
from tflkit.compat.targets.common import OpRule, Target

#: Types the delegate takes for runtime tensors before per-op additions (quantized ops and
#: boolean tensors are enabled in the LiteRT accelerator: measured).
IN_DTYPES = frozenset({"FLOAT32", "FLOAT16", "BOOL", "INT8", "UINT8", "INT4", "INT2"})
OUT_DTYPES = frozenset({"FLOAT32", "FLOAT16", "INT8", "UINT8"})
ALL_PRECISION = dtypes.INTS | dtypes.UINTS | frozenset({"BOOL", "BFLOAT16"})
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


def binary_rule(op: str) -> OpRule:
    extra_in: frozenset[str] = frozenset()
    extra_out: frozenset[str] = frozenset()
    in_dtypes = out_dtypes = None
    if op in elementwise.COMPARISONS:
        extra_in, extra_out = dtypes.INTS | dtypes.UINTS, frozenset({"BOOL"})
    if op in LOGICAL:
        in_dtypes = out_dtypes = LOGICAL_DTYPES
    if op in INT_OPS:
        extra_in, extra_out = extra_in | dtypes.INTS, extra_out | dtypes.INTS
    checks = [elementwise.add_n_two_inputs] if op == "ADD_N" else [elementwise.elementwise_operands]
    if op not in SAME_INPUT_OK:
        checks.append(elementwise.identical_inputs_not_allowed)
    checks += [
        elementwise.runtime_broadcast,
        elementwise.const_operand,
        quantization.unquantized_8bit,
    ]
    if op in ACTIVATION_OPS:
        checks.append(activations.fused_tanh_ignored_on_cpu)
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
        extra = dtypes.INTS
    return OpRule(
        max_version=UNARY_VERSIONS[op],
        in_dtypes=in_dtypes,
        out_dtypes=out_dtypes,
        extra_in_dtypes=extra,
        extra_out_dtypes=extra,
        checks=(operands.unary_runtime_input,),
    )


# --- the table --------------------------------------------------------------------------------

_ACT = "fusedActivationFunction"
_POOL = (operands.unary_runtime_input, conv.positive_kernel, conv.positive_strides)
_ONE_RUNTIME = (operands.runtime_inputs(1), operands.output_count(1))
_CONV = (
    operands.runtime_input(0),
    operands.runtime_inputs(1, 2),
    conv.positive_strides,
    conv.positive_dilations,
)

RULES: dict[str, OpRule] = {
    **{op: unary_rule(op) for op in UNARY_VERSIONS},
    **{op: binary_rule(op) for op in BINARY_VERSIONS},
    "CONCATENATION": OpRule(
        max_version=6,
        extra_in_dtypes=ALL_PRECISION,
        extra_out_dtypes=ALL_PRECISION,
        checks=(data_movement.concat_fused_activation, quantization.fp16_weights_operand),
    ),
    "CONV_2D": OpRule(
        max_version=6,
        activation=_ACT,
        checks=(*_CONV, conv.int8_weights_strided_pointwise, activations.fused_tanh_ignored_on_cpu),
    ),
    "DEPTHWISE_CONV_2D": OpRule(
        max_version=6,
        activation=_ACT,
        checks=(*_CONV, activations.fused_tanh_ignored_on_cpu),
    ),
    "TRANSPOSE_CONV": OpRule(
        max_version=3,
        checks=(
            operands.runtime_input(2),
            operands.runtime_inputs(1, 2),
            conv.positive_strides,
            conv.transpose_conv_same_offset,
        ),
    ),
    "FULLY_CONNECTED": OpRule(
        max_version=14,
        activation=_ACT,
        checks=(
            matmul.fc_input_not_const,
            operands.runtime_inputs(1, 2),
            matmul.fc_weights_format,
            matmul.fc_keep_num_dims,
        ),
    ),
    "BATCH_MATMUL": OpRule(
        checks=(operands.input_count(2), operands.output_count(1), matmul.batch_matmul_operands)
    ),
    "AVERAGE_POOL_2D": OpRule(
        max_version=2,
        activation=_ACT,
        checks=(*_POOL, activations.fused_tanh_ignored_on_cpu),
    ),
    "MAX_POOL_2D": OpRule(
        max_version=2,
        activation=_ACT,
        checks=(*_POOL, activations.fused_tanh_ignored_on_cpu),
    ),
    "CUMSUM": OpRule(
        max_version=1,
        checks=(operands.input_count(2), reduction.cumsum_types, operands.const_input(1)),
    ),
    "DEPTH_TO_SPACE": OpRule(checks=(*_ONE_RUNTIME, data_movement.block_size_above_one)),
    "SPACE_TO_DEPTH": OpRule(
        max_version=2,
        checks=(*_ONE_RUNTIME, operands.const_inputs(0), data_movement.block_size_above_one),
    ),
    "DEQUANTIZE": OpRule(
        max_version=3,
        checks=(operands.input_count(1), operands.output_count(1), quantization.dequantize_input),
    ),
    "QUANTIZE": OpRule(max_version=2, checks=(*_ONE_RUNTIME, quantization.quantize_output)),
    "EMBEDDING_LOOKUP": OpRule(
        extra_in_dtypes=frozenset({"INT32"}),
        checks=(operands.input_count(2), data_movement.embedding_lookup_shapes),
    ),
    "DYNAMIC_UPDATE_SLICE": OpRule(
        extra_in_dtypes=ALL_PRECISION | frozenset({"INT32"}),
        extra_out_dtypes=ALL_PRECISION,
        checks=(slicing.dynamic_update_slice_shapes,),
    ),
    "GATHER": OpRule(
        extra_in_dtypes=ALL_PRECISION,
        extra_out_dtypes=ALL_PRECISION,
        checks=(data_movement.gather_operands, dtypes.same_dtype_in_out),
    ),
    "LSTM": OpRule(max_version=4, checks=(composite.lstm_kernel,)),
    "MEAN": OpRule(
        checks=(
            *_ONE_RUNTIME,
            operands.const_inputs(1),
            operands.const_input(1),
            reduction.reduce_axes,
        )
    ),
    **{
        op: OpRule(
            extra_in_dtypes=dtypes.INTS
            if op != "REDUCE_ANY" and op != "REDUCE_ALL"
            else frozenset(),
            extra_out_dtypes=dtypes.INTS
            if op != "REDUCE_ANY" and op != "REDUCE_ALL"
            else frozenset(),
            in_dtypes=frozenset({"BOOL"}) if op in ("REDUCE_ANY", "REDUCE_ALL") else None,
            out_dtypes=frozenset({"BOOL"}) if op in ("REDUCE_ANY", "REDUCE_ALL") else None,
            checks=(*_ONE_RUNTIME, operands.const_input(1), reduction.reduce_axes),
        )
        for op in ("SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD", "REDUCE_ANY", "REDUCE_ALL")
    },
    **{
        op: OpRule(
            max_version=5,
            extra_in_dtypes=ALL_PRECISION if op != "MIRROR_PAD" else frozenset(),
            extra_out_dtypes=ALL_PRECISION if op != "MIRROR_PAD" else frozenset(),
            checks=(
                data_movement.mirror_pad_reflect,
                operands.runtime_input(0),
                operands.runtime_inputs(1),
                operands.const_input(1),
                data_movement.paddings_4x2_or_3x2,
                data_movement.padv2_constant,
            ),
        )
        for op in ("PAD", "PADV2", "MIRROR_PAD")
    },
    "PACK": OpRule(
        extra_in_dtypes=ALL_PRECISION,
        extra_out_dtypes=ALL_PRECISION,
        checks=(data_movement.pack_inputs, quantization.fp16_weights_operand),
    ),
    "PRELU": OpRule(max_version=1, checks=(operands.runtime_input(0), activations.prelu_alpha)),
    **{
        op: OpRule(max_version=2, checks=(*_ONE_RUNTIME, operands.const_inputs(0)))
        for op in ("RELU", "RELU6", "RELU_N1_TO_1", "LEAKY_RELU")
    },
    "RESHAPE": OpRule(
        max_version=1,
        extra_in_dtypes=ALL_PRECISION,
        extra_out_dtypes=ALL_PRECISION,
        checks=_ONE_RUNTIME,
    ),
    "RESIZE_BILINEAR": OpRule(max_version=3, checks=(*_ONE_RUNTIME, conv.resize_corners)),
    "RESIZE_NEAREST_NEIGHBOR": OpRule(max_version=3, checks=_ONE_RUNTIME),
    "REVERSE_V2": OpRule(
        extra_in_dtypes=ALL_PRECISION,
        extra_out_dtypes=ALL_PRECISION,
        checks=(operands.runtime_input(0), operands.const_input(1), shapes.reverse_axes),
    ),
    **{
        op: OpRule(
            max_version=1,
            extra_in_dtypes=ALL_PRECISION,
            extra_out_dtypes=ALL_PRECISION,
            checks=(data_movement.select_operands,),
        )
        for op in ("SELECT", "SELECT_V2")
    },
    "SLICE": OpRule(
        max_version=8,
        extra_in_dtypes=ALL_PRECISION,
        extra_out_dtypes=ALL_PRECISION,
        checks=(
            operands.input_count(3),
            operands.runtime_input(0),
            operands.const_input(1),
            operands.const_input(2),
            slicing.slice_extent,
        ),
    ),
    "SOFTMAX": OpRule(
        max_version=4, checks=(*_ONE_RUNTIME, operands.const_inputs(0), reduction.softmax_beta_one)
    ),
    "SPLIT": OpRule(checks=(operands.const_input(0), operands.runtime_input(1), shapes.split_axis)),
    "SPLIT_V": OpRule(
        checks=(
            operands.runtime_inputs(1),
            operands.const_inputs(2),
            operands.const_input(2),
            shapes.split_axis,
        ),
    ),
    "STRIDED_SLICE": OpRule(
        max_version=2,
        extra_in_dtypes=ALL_PRECISION,
        extra_out_dtypes=ALL_PRECISION,
        checks=(
            slicing.strided_slice_masks,
            operands.input_count(4),
            operands.const_input(1),
            operands.const_input(2),
            operands.const_input(3),
            slicing.strided_slice_extent,
        ),
    ),
    "TILE": OpRule(
        extra_in_dtypes=dtypes.INTS,
        extra_out_dtypes=dtypes.INTS,
        checks=(*_ONE_RUNTIME, operands.const_input(1)),
    ),
    "TOPK_V2": OpRule(
        max_version=1,
        extra_out_dtypes=frozenset({"INT32"}),
        checks=(operands.runtime_input(0), reduction.topk_k, operands.output_count(2)),
    ),
    "TRANSPOSE": OpRule(
        extra_in_dtypes=ALL_PRECISION,
        extra_out_dtypes=ALL_PRECISION,
        checks=(*_ONE_RUNTIME, operands.const_input(1), shapes.transpose_perm),
    ),
    "UNPACK": OpRule(checks=(operands.runtime_input(0), shapes.unpack_axis)),
    "ARG_MAX": OpRule(
        out_dtypes=frozenset({"INT32"}),
        checks=(
            *_ONE_RUNTIME,
            operands.const_inputs(1),
            operands.const_input(1),
            reduction.arg_max_axis,
        ),
    ),
    "ONE_HOT": OpRule(
        max_version=1,
        extra_in_dtypes=frozenset({"INT32"}),
        checks=(
            operands.input_count(4),
            operands.runtime_input(0),
            data_movement.one_hot_layout,
            quantization.fp16_weights_operand,
        ),
    ),
    "CAST": OpRule(
        extra_in_dtypes=ALL_PRECISION,
        extra_out_dtypes=ALL_PRECISION,
        checks=(*_ONE_RUNTIME, operands.const_inputs(0)),
    ),
    "STABLEHLO_CLAMP": OpRule(extra_in_dtypes=dtypes.INTS, extra_out_dtypes=dtypes.INTS),
    "STABLEHLO_COMPOSITE": OpRule(checks=(composite.composite_name,)),
}

#: Custom ops the GPU delegate's source has kernels for (its custom vision ops and the
#: norm/attention custom calls).
CUSTOM_RULES: dict[str, OpRule] = {
    "Convolution2DTransposeBias": OpRule(
        checks=(operands.runtime_input(0), operands.const_input(1, dtypes.FLOATS))
    ),
    "MaxPoolingWithArgmax2D": OpRule(checks=(operands.runtime_inputs(1), operands.output_count(2))),
    "MaxUnpooling2D": OpRule(checks=(operands.runtime_inputs(2), operands.output_count(1))),
    "Resampler": OpRule(checks=(operands.runtime_inputs(2), operands.output_count(1))),
    **{
        name: OpRule(checks=(operands.runtime_input(0),))
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
