"""Small generated models for the static-vs-accelerator agreement test, built with the IR.

Each :class:`CompatCase` builds a model that hits ONE constraint of the ``litert-gpu`` target
(or its allowed neighbour, the same op one step inside the rule) and names the op it is about
(``target_op``, an index into the main subgraph) and the static verdict expected for that op.
Cases come in neighbour pairs, so a rule that rejects (or accepts) everything fails half of
them. ``crashes`` marks forms that abort the accelerator: the test probes them on their own.
``about_values`` marks forms the accelerator takes whatever their verdict (it places the op on
the GPU) but computes wrong (``WRONG_RESULT``) or right: placement cannot judge them, so they
are kept apart in :data:`VALUE_CASES` and ``tests/test_rule_batch_matmul_broadcast.py``
compares what the GPU computes with numpy.
No TensorFlow: every model is built in microseconds. Forms the CPU runtime itself refuses (an
op version it does not know, RESIZE_BILINEAR with align_corners and half_pixel_centers,
REDUCE_ANY on floats) are left out: the accelerator cannot be asked about them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tflkit import ir
from tflkit.ir.builder import OpBuilder

fb = ir.schema.fb
F32 = np.float32
ACT = fb.ActivationFunctionType


@dataclass(frozen=True)
class CompatCase:
    """One generated model: what it is about, and the expected static verdict of its op."""

    name: str
    family: str
    build: Callable[[], ir.Model]
    expect_ok: bool
    target_op: int = -1
    crashes: bool = False
    #: The verdict is about the values the GPU computes, not where the op runs.
    about_values: bool = False


class Net:
    """A one-subgraph model under construction (signature ``serving_default``)."""

    def __init__(self, name: str) -> None:
        self.model = ir.Model(description=f"tflkit compat case {name}")
        self.sg = self.model.add_subgraph("main")
        self.b = OpBuilder(self.sg, prefix="c")

    def input(self, shape: Sequence[int], dtype: Any = F32, name: str = "x") -> ir.Tensor:
        tensor = self.sg.new_tensor(name, shape, dtype)
        self.sg.inputs.append(tensor)
        return tensor

    def op(self, op_type: str, *inputs: Any, **kwargs: Any) -> Any:
        return self.b.op(op_type, inputs, **kwargs)

    def done(self, *outputs: ir.Tensor) -> ir.Model:
        self.sg.outputs = list(outputs)
        return self.model


def opts(cls_name: str, **fields: Any) -> Any:
    """A schema options object (``opts("Conv2DOptionsT", strideH=1)``)."""
    instance = getattr(fb, cls_name)()
    for key, value in fields.items():
        setattr(instance, key, value)
    return instance


CASES: list[CompatCase] = []
#: Cases judged by the values the GPU computes (``about_values``), not by placement.
VALUE_CASES: list[CompatCase] = []


def case(
    name: str,
    family: str,
    expect_ok: bool,
    *,
    target_op: int = -1,
    crashes: bool = False,
    about_values: bool = False,
) -> Callable[[Callable[[Net], ir.Tensor | tuple[ir.Tensor, ...]]], None]:
    """Register ``fn(net) -> output tensor(s)`` as a case."""

    def register(fn: Callable[[Net], ir.Tensor | tuple[ir.Tensor, ...]]) -> None:
        def build() -> ir.Model:
            net = Net(name)
            out = fn(net)
            return net.done(*(out if isinstance(out, tuple) else (out,)))

        found = CompatCase(name, family, build, expect_ok, target_op, crashes, about_values)
        (VALUE_CASES if about_values else CASES).append(found)

    return register


def _unary(
    op_type: str,
    name: str,
    family: str,
    ok: bool,
    shape: Sequence[int] = (1, 4, 4, 8),
    dtype: Any = F32,
    options: Any = None,
    version: int = 1,
) -> None:
    @case(name, family, ok)
    def _(n: Net) -> ir.Tensor:
        return n.op(op_type, n.input(shape, dtype), options=options, version=version)


# --- op type supported or not ---------------------------------------------------------------------
_unary("SOFTMAX", "softmax", "UNSUPPORTED_OP", True, options=opts("SoftmaxOptionsT", beta=1.0))
_unary("LOG_SOFTMAX", "log_softmax", "UNSUPPORTED_OP", False)
_unary(
    "MAX_POOL_2D",
    "max_pool",
    "UNSUPPORTED_OP",
    True,
    options=opts("Pool2DOptionsT", strideW=2, strideH=2, filterWidth=2, filterHeight=2),
)
_unary(
    "L2_POOL_2D",
    "l2_pool",
    "UNSUPPORTED_OP",
    False,
    options=opts("Pool2DOptionsT", strideW=2, strideH=2, filterWidth=2, filterHeight=2),
)
_unary("RELU6", "relu6", "UNSUPPORTED_OP", True)
_unary("RELU_0_TO_1", "relu_0_to_1", "UNSUPPORTED_OP", False)
_unary("TANH", "tanh", "UNSUPPORTED_OP", True)
_unary("L2_NORMALIZATION", "l2_norm", "UNSUPPORTED_OP", False, options=opts("L2NormOptionsT"))
_unary("HARD_SWISH", "hard_swish", "UNSUPPORTED_OP", True)
_unary("ZEROS_LIKE", "zeros_like", "UNSUPPORTED_OP", False)


@case("argmax_int32", "UNSUPPORTED_OP", True)
def _(n: Net) -> ir.Tensor:
    x = n.input((1, 4, 4, 8))
    return n.op(
        "ARG_MAX",
        x,
        np.array([3], np.int32),
        shape=(1, 4, 4),
        dtype=np.int32,
        options=opts("ArgMaxOptionsT", outputType=fb.TensorType.INT32),
    )


@case("argmin_int32", "UNSUPPORTED_OP", False)
def _(n: Net) -> ir.Tensor:
    x = n.input((1, 4, 4, 8))
    return n.op(
        "ARG_MIN",
        x,
        np.array([3], np.int32),
        shape=(1, 4, 4),
        dtype=np.int32,
        options=opts("ArgMinOptionsT", outputType=fb.TensorType.INT32),
    )


@case("reshape_to_3d", "UNSUPPORTED_OP", True)
def _(n: Net) -> ir.Tensor:
    return n.op("RESHAPE", n.input((1, 4, 4, 8)), np.array([1, 16, 8], np.int32), shape=(1, 16, 8))


@case("squeeze", "UNSUPPORTED_OP", False)
def _(n: Net) -> ir.Tensor:
    return n.op(
        "SQUEEZE",
        n.input((1, 4, 1, 8)),
        shape=(1, 4, 8),
        options=opts("SqueezeOptionsT", squeezeDims=[2]),
    )


# --- dtype ----------------------------------------------------------------------------------------
@case("argmax_int64_output", "DTYPE", False)
def _(n: Net) -> ir.Tensor:
    x = n.input((1, 4, 4, 8))
    return n.op(
        "ARG_MAX",
        x,
        np.array([3], np.int32),
        shape=(1, 4, 4),
        dtype=np.int64,
        options=opts("ArgMaxOptionsT", outputType=fb.TensorType.INT64),
    )


@case("cast_to_int32", "DTYPE", True)
def _(n: Net) -> ir.Tensor:
    return n.op("CAST", n.input((1, 4, 4, 8)), dtype=np.int32)


@case("cast_to_int64", "DTYPE", False)
def _(n: Net) -> ir.Tensor:
    return n.op("CAST", n.input((1, 4, 4, 8)), dtype=np.int64)


@case("add_int32", "DTYPE", True)
def _(n: Net) -> ir.Tensor:
    x = n.input((1, 4, 4, 8), np.int32)
    return n.op("ADD", x, np.ones((1, 1, 1, 8), np.int32), options=opts("AddOptionsT"))


@case("add_int64", "DTYPE", False)
def _(n: Net) -> ir.Tensor:
    x = n.input((1, 4, 4, 8), np.int64)
    return n.op("ADD", x, np.ones((1, 1, 1, 8), np.int64), options=opts("AddOptionsT"), version=4)


@case("greater_bool_output", "DTYPE", True)
def _(n: Net) -> ir.Tensor:
    x = n.input((1, 4, 4, 8))
    return n.op("GREATER", x, np.zeros((1, 1, 1, 8), F32), dtype=np.bool_)


@case("cumsum_float", "DTYPE", True)
def _(n: Net) -> ir.Tensor:
    return n.op(
        "CUMSUM", n.input((1, 4, 4, 8)), np.array(3, np.int32), options=opts("CumsumOptionsT")
    )


@case("cumsum_int32", "DTYPE", False)
def _(n: Net) -> ir.Tensor:
    return n.op(
        "CUMSUM",
        n.input((1, 4, 4, 8), np.int32),
        np.array(3, np.int32),
        options=opts("CumsumOptionsT"),
    )


# --- rank -----------------------------------------------------------------------------------------
_unary("RELU", "relu_rank4", "RANK", True)
_unary("RELU", "relu_rank5", "RANK", False, shape=(1, 2, 4, 4, 8))


@case("transpose_rank4", "RANK", True)
def _(n: Net) -> ir.Tensor:
    return n.op(
        "TRANSPOSE", n.input((1, 2, 4, 8)), np.array([0, 2, 1, 3], np.int32), shape=(1, 4, 2, 8)
    )


@case("transpose_rank5", "RANK", False)
def _(n: Net) -> ir.Tensor:
    return n.op(
        "TRANSPOSE",
        n.input((1, 2, 3, 4, 8)),
        np.array([0, 2, 1, 3, 4], np.int32),
        shape=(1, 3, 2, 4, 8),
    )


# --- constant / runtime inputs --------------------------------------------------------------------
@case("prelu_const_alpha", "NON_CONST_INPUT", True)
def _(n: Net) -> ir.Tensor:
    return n.op("PRELU", n.input((1, 4, 4, 8)), np.full((1, 1, 8), 0.1, F32))


@case("prelu_runtime_alpha", "NON_CONST_INPUT", False)
def _(n: Net) -> ir.Tensor:
    return n.op("PRELU", n.input((1, 4, 4, 8)), n.input((1, 1, 8), name="alpha"))


@case("conv_const_weights", "NON_CONST_INPUT", True)
def _(n: Net) -> ir.Tensor:
    return n.op(
        "CONV_2D",
        n.input((1, 8, 8, 4)),
        np.ones((8, 3, 3, 4), F32),
        np.zeros(8, F32),
        options=opts("Conv2DOptionsT", strideH=1, strideW=1),
        shape=(1, 6, 6, 8),
    )


@case("conv_runtime_weights", "NON_CONST_INPUT", True)
def _(n: Net) -> ir.Tensor:
    weights = n.input((8, 3, 3, 4), name="w")
    return n.op(
        "CONV_2D",
        n.input((1, 8, 8, 4)),
        weights,
        np.zeros(8, F32),
        options=opts("Conv2DOptionsT", strideH=1, strideW=1),
        shape=(1, 6, 6, 8),
    )


@case("fc_runtime_data", "NON_CONST_INPUT", True)
def _(n: Net) -> ir.Tensor:
    return n.op(
        "FULLY_CONNECTED",
        n.input((1, 16)),
        np.ones((4, 16), F32),
        None,
        options=opts("FullyConnectedOptionsT"),
        shape=(1, 4),
    )


@case("mean_const_axes", "NON_CONST_INPUT", True)
def _(n: Net) -> ir.Tensor:
    return n.op(
        "MEAN",
        n.input((1, 4, 4, 8)),
        np.array([1, 2], np.int32),
        shape=(1, 1, 1, 8),
        options=opts("ReducerOptionsT", keepDims=True),
    )


@case("gather_1d_indices", "SHAPE", True)
def _(n: Net) -> ir.Tensor:
    return n.op(
        "GATHER",
        n.input((1, 4, 4, 8)),
        np.array([0, 2], np.int32),
        shape=(1, 4, 4, 2),
        options=opts("GatherOptionsT", axis=3),
    )


@case("gather_runtime_scalar_index", "SHAPE", False)
def _(n: Net) -> ir.Tensor:
    index = n.input((), np.int32, name="i")
    return n.op(
        "GATHER", n.input((10, 1, 8)), index, shape=(1, 8), options=opts("GatherOptionsT", axis=0)
    )


# --- fused activation -----------------------------------------------------------------------------
@case("add_relu6", "FUSED_ACTIVATION", True)
def _(n: Net) -> ir.Tensor:
    x = n.input((1, 4, 4, 8))
    return n.op(
        "ADD",
        x,
        n.input((1, 4, 4, 8), name="y"),
        options=opts("AddOptionsT", fusedActivationFunction=ACT.RELU6),
    )


@case("add_sign_bit", "FUSED_ACTIVATION", False)
def _(n: Net) -> ir.Tensor:
    x = n.input((1, 4, 4, 8))
    return n.op(
        "ADD",
        x,
        n.input((1, 4, 4, 8), name="y"),
        options=opts("AddOptionsT", fusedActivationFunction=ACT.SIGN_BIT),
    )


#: LiteRT's CPU kernels ignore a fused TANH, the GPU applies it: a WRONG_RESULT verdict, judged
#: by value (``tests/test_fused_activations.py`` has every op x activation).
@case("conv_tanh", "WRONG_RESULT", False, about_values=True)
def _(n: Net) -> ir.Tensor:
    return n.op(
        "CONV_2D",
        n.input((1, 8, 8, 4)),
        np.ones((8, 3, 3, 4), F32),
        np.zeros(8, F32),
        options=opts("Conv2DOptionsT", strideH=1, strideW=1, fusedActivationFunction=ACT.TANH),
        shape=(1, 6, 6, 8),
    )


@case("conv_sign_bit", "FUSED_ACTIVATION", False)
def _(n: Net) -> ir.Tensor:
    return n.op(
        "CONV_2D",
        n.input((1, 8, 8, 4)),
        np.ones((8, 3, 3, 4), F32),
        np.zeros(8, F32),
        options=opts("Conv2DOptionsT", strideH=1, strideW=1, fusedActivationFunction=ACT.SIGN_BIT),
        shape=(1, 6, 6, 8),
    )


@case("concat_relu", "FUSED_ACTIVATION", False)
def _(n: Net) -> ir.Tensor:
    # measured: any fused activation on CONCATENATION fails the whole graph
    return n.op(
        "CONCATENATION",
        n.input((1, 4, 4, 8)),
        n.input((1, 4, 4, 8), name="y"),
        shape=(1, 4, 4, 16),
        options=opts("ConcatenationOptionsT", axis=3, fusedActivationFunction=ACT.RELU),
    )


# --- broadcast ------------------------------------------------------------------------------------
@case("add_broadcast_channel", "BROADCAST", True)
def _(n: Net) -> ir.Tensor:
    return n.op("ADD", n.input((1, 4, 4, 8)), n.input((8,), name="y"), options=opts("AddOptionsT"))


@case("add_runtime_scalar", "BROADCAST", False)
def _(n: Net) -> ir.Tensor:
    return n.op("ADD", n.input((1, 4, 4, 8)), n.input((), name="y"), options=opts("AddOptionsT"))


@case("mul_outer_product", "BROADCAST", True)
def _(n: Net) -> ir.Tensor:
    return n.op(
        "MUL",
        n.input((1, 1, 4, 1)),
        n.input((1, 1, 1, 4), name="y"),
        shape=(1, 1, 4, 4),
        options=opts("MulOptionsT"),
    )


@case("sub_same_tensor_twice", "BROADCAST", False)
def _(n: Net) -> ir.Tensor:
    x = n.input((1, 4, 4, 8))
    return n.op("SUB", x, x, options=opts("SubOptionsT"))


@case("mul_same_tensor_twice", "BROADCAST", True)
def _(n: Net) -> ir.Tensor:
    x = n.input((1, 4, 4, 8))
    return n.op("MUL", x, x, options=opts("MulOptionsT"))


# --- options --------------------------------------------------------------------------------------
def _strided(n: Net, shrink: int) -> ir.Tensor:
    x = n.input((1, 4, 4, 8))
    begin, end, strides = ([0, 0, 0, 0], [1, 4, 4, 8], [1, 1, 1, 1])
    shape = (1, 4, 8) if shrink else (1, 4, 4, 8)
    if shrink:
        end = [1, 4, 1, 8]
    return n.op(
        "STRIDED_SLICE",
        x,
        np.array(begin, np.int32),
        np.array(end, np.int32),
        np.array(strides, np.int32),
        shape=shape,
        options=opts("StridedSliceOptionsT", shrinkAxisMask=shrink),
    )


case("strided_slice_plain", "OPTIONS", True)(lambda n: _strided(n, 0))
case("strided_slice_shrink_mask", "OPTIONS", False)(lambda n: _strided(n, 4))


def _resize(n: Net, align: bool, half: bool) -> ir.Tensor:
    return n.op(
        "RESIZE_BILINEAR",
        n.input((1, 4, 4, 8)),
        np.array([8, 8], np.int32),
        shape=(1, 8, 8, 8),
        options=opts("ResizeBilinearOptionsT", alignCorners=align, halfPixelCenters=half),
    )


case("resize_half_pixel", "OPTIONS", True)(lambda n: _resize(n, False, True))
case("resize_align_corners", "OPTIONS", True)(lambda n: _resize(n, True, False))
_unary("SOFTMAX", "softmax_beta2", "OPTIONS", False, options=opts("SoftmaxOptionsT", beta=2.0))


def _mirror(n: Net, mode: int) -> ir.Tensor:
    pads = np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32)
    return n.op(
        "MIRROR_PAD",
        n.input((1, 4, 4, 8)),
        pads,
        shape=(1, 6, 6, 8),
        options=opts("MirrorPadOptionsT", mode=mode),
    )


case("mirror_pad_reflect", "OPTIONS", True)(lambda n: _mirror(n, fb.MirrorPadMode.REFLECT))
case("mirror_pad_symmetric", "OPTIONS", False)(lambda n: _mirror(n, fb.MirrorPadMode.SYMMETRIC))


def _depth_to_space(n: Net, block: int) -> ir.Tensor:
    shape = (1, 4 * block, 4 * block, 8 // (block * block))
    return n.op(
        "DEPTH_TO_SPACE",
        n.input((1, 4, 4, 8)),
        shape=shape,
        options=opts("DepthToSpaceOptionsT", blockSize=block),
    )


case("depth_to_space_2", "OPTIONS", True)(lambda n: _depth_to_space(n, 2))
case("depth_to_space_1", "OPTIONS", False)(lambda n: _depth_to_space(n, 1))


# --- op version -----------------------------------------------------------------------------------
_unary("RELU", "relu_v2", "OP_VERSION", True, version=2)
_unary("RELU", "relu_v3", "OP_VERSION", False, version=3)
_unary("TANH", "tanh_v2", "OP_VERSION", True, version=2)
_unary("TANH", "tanh_v3", "OP_VERSION", False, version=3)


@case("sub_v2", "OP_VERSION", True)
def _(n: Net) -> ir.Tensor:
    return n.op(
        "SUB",
        n.input((1, 4, 4, 8)),
        np.ones((1, 1, 1, 8), F32),
        version=2,
        options=opts("SubOptionsT"),
    )


@case("sub_v3", "OP_VERSION", False)
def _(n: Net) -> ir.Tensor:
    return n.op(
        "SUB",
        n.input((1, 4, 4, 8)),
        np.ones((1, 1, 1, 8), F32),
        version=3,
        options=opts("SubOptionsT"),
    )


# --- custom / flex --------------------------------------------------------------------------------
@case("custom_unknown", "CUSTOM_OP", False)
def _(n: Net) -> ir.Tensor:
    return n.op("TflkitNoSuchOp", n.input((1, 4, 4, 8)))


@case("flex_op", "FLEX_OP", False)
def _(n: Net) -> ir.Tensor:
    return n.op("FlexErf", n.input((1, 4, 4, 8)))


# --- data-dependent shapes (whole compilation fails) ----------------------------------------------
@case("reshape_const_shape", "DYNAMIC_SHAPE", True)
def _(n: Net) -> ir.Tensor:
    return n.op("RESHAPE", n.input((1, 4, 4, 8)), np.array([1, 128], np.int32), shape=(1, 128))


@case("reshape_runtime_shape", "DYNAMIC_SHAPE", False)
def _(n: Net) -> ir.Tensor:
    shape = n.input((2,), np.int32, name="shape")
    return n.op("RESHAPE", n.input((1, 4, 4, 8)), shape, shape=(1, 128))


@case("reshape_shape_of_input", "DYNAMIC_SHAPE", False, target_op=1)
def _(n: Net) -> ir.Tensor:
    # SHAPE is computed while the graph is prepared: the RESHAPE fed by it stays on the CPU
    # (two runtime inputs) but the graph still compiles, unlike a shape computed from data.
    x = n.input((1, 4, 2))
    shape = n.op("SHAPE", x, options=opts("ShapeOptionsT", outType=2), shape=(3,), dtype=np.int32)
    return n.op("RESHAPE", x, shape, shape=(1, 4, 2))


@case("tile_const_multiples", "DYNAMIC_SHAPE", True)
def _(n: Net) -> ir.Tensor:
    return n.op("TILE", n.input((1, 4, 4, 8)), np.array([1, 2, 1, 1], np.int32), shape=(1, 8, 4, 8))


@case("tile_runtime_multiples", "DYNAMIC_SHAPE", False)
def _(n: Net) -> ir.Tensor:
    multiples = n.input((4,), np.int32, name="multiples")
    return n.op("TILE", n.input((1, 4, 4, 8)), multiples, shape=(1, 8, 4, 8))


# --- crashes --------------------------------------------------------------------------------------
@case("pack_two_tensors", "CRASH", True)
def _(n: Net) -> ir.Tensor:
    return n.op(
        "PACK",
        n.input((1, 4, 8)),
        n.input((1, 4, 8), name="y"),
        shape=(2, 1, 4, 8),
        options=opts("PackOptionsT", valuesCount=2, axis=0),
    )


@case("pack_same_tensor_twice", "CRASH", False, crashes=True)
def _(n: Net) -> ir.Tensor:
    x = n.input((1, 4, 8))
    return n.op(
        "PACK", x, x, shape=(2, 1, 4, 8), options=opts("PackOptionsT", valuesCount=2, axis=0)
    )


def _pack_int8_constant(n: Net) -> ir.Tensor:
    return n.op(
        "PACK",
        n.input((3, 4), np.int8),
        np.ones((3, 4), np.int8),
        shape=(2, 3, 4),
        dtype=np.int8,
        options=opts("PackOptionsT", valuesCount=2, axis=0),
    )


@case("pack_int8_constant", "CRASH", False, crashes=True)
def _(n: Net) -> ir.Tensor:
    # measured: SIGSEGV for unquantized INT8 and UINT8 constants, rank 1 to 3
    return _pack_int8_constant(n)


@case("pack_quantized_int8_constant", "CRASH", True)
def _(n: Net) -> ir.Tensor:
    out = _pack_int8_constant(n)
    for tensor in (*n.sg.ops[-1].inputs, out):
        tensor.quantization = opts("QuantizationParametersT", scale=[0.1], zeroPoint=[0])
    return out


@case("pack_same_constant_twice", "CRASH", True)
def _(n: Net) -> ir.Tensor:
    # litert-torch's KV-cache graphs stack int32 scalars, one constant three times, into the
    # start indices of DYNAMIC_UPDATE_SLICE: constants stacked twice compile
    position = n.input((), np.int32, name="position")
    zero = n.sg.new_tensor("zero", (), np.int32)
    zero.buffer = ir.Buffer(np.array(0, np.int32).tobytes())
    options = opts("PackOptionsT", valuesCount=4, axis=0)
    return n.op("PACK", zero, position, zero, zero, shape=(4,), dtype=np.int32, options=options)


# --- quantization / fp16 weights ------------------------------------------------------------------
def _fp16_conv(n: Net, with_log_softmax: bool) -> ir.Tensor:
    weights = n.op("DEQUANTIZE", np.ones((8, 3, 3, 4), np.float16), dtype=F32)
    y = n.op(
        "CONV_2D",
        n.input((1, 8, 8, 4)),
        weights,
        np.zeros(8, F32),
        options=opts("Conv2DOptionsT", strideH=1, strideW=1),
        shape=(1, 6, 6, 8),
    )
    return n.op("LOG_SOFTMAX", y) if with_log_softmax else y


case("fp16_weights_whole_graph", "FP16_DEQUANTIZE", True, target_op=0)(
    lambda n: _fp16_conv(n, False)
)
case("fp16_weights_partial_graph", "FP16_DEQUANTIZE", False, target_op=0)(
    lambda n: _fp16_conv(n, True)
)


def _int8_quant(scale: float = 0.05) -> Any:
    q = fb.QuantizationParametersT()
    q.scale, q.zeroPoint = [scale], [0]
    return q


@case("dequantize_int8_runtime", "QUANTIZATION", True)
def _(n: Net) -> ir.Tensor:
    x = n.sg.new_tensor("x", (1, 4, 4, 8), np.int8, quantization=_int8_quant())
    n.sg.inputs.append(x)
    return n.op("DEQUANTIZE", x, dtype=F32, version=2)


@case("dequantize_int16_runtime", "QUANTIZATION", False)
def _(n: Net) -> ir.Tensor:
    x = n.sg.new_tensor("x", (1, 4, 4, 8), np.int16, quantization=_int8_quant())
    n.sg.inputs.append(x)
    return n.op("DEQUANTIZE", x, dtype=F32, version=4)


# --- partitioning ---------------------------------------------------------------------------------
@case("partition_small_side", "PARTITION", True, target_op=0)
def _(n: Net) -> ir.Tensor:
    y = n.op("RELU", n.op("RELU", n.input((1, 4, 4, 8))))
    z = n.op("LOG_SOFTMAX", y)
    return n.op("RELU", n.op("TANH", n.op("RELU", z)))


@case("partition_unsupported_middle", "PARTITION", False, target_op=2)
def _(n: Net) -> ir.Tensor:
    y = n.op("RELU", n.op("RELU", n.input((1, 4, 4, 8))))
    return n.op("RELU", n.op("LOG_SOFTMAX", y))


# --- more neighbours (data movement, reductions, pooling) -----------------------------------------
@case("pad_4d", "SHAPE", True)
def _(n: Net) -> ir.Tensor:
    pads = np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32)
    return n.op("PAD", n.input((1, 4, 4, 8)), pads, shape=(1, 6, 6, 8))


@case("space_to_batch", "UNSUPPORTED_OP", False)
def _(n: Net) -> ir.Tensor:
    return n.op(
        "SPACE_TO_BATCH_ND",
        n.input((1, 4, 4, 8)),
        np.array([2, 2], np.int32),
        np.zeros((2, 2), np.int32),
        shape=(4, 2, 2, 8),
    )


@case("concat_two_inputs", "SHAPE", True)
def _(n: Net) -> ir.Tensor:
    return n.op(
        "CONCATENATION",
        n.input((1, 4, 4, 8)),
        n.input((1, 4, 4, 8), name="y"),
        shape=(1, 4, 4, 16),
        options=opts("ConcatenationOptionsT", axis=3),
    )


@case("reduce_any_bool", "DTYPE", True)
def _(n: Net) -> ir.Tensor:
    return n.op(
        "REDUCE_ANY",
        n.input((1, 4, 4, 8), np.bool_),
        np.array([3], np.int32),
        shape=(1, 4, 4, 1),
        options=opts("ReducerOptionsT", keepDims=True),
    )


@case("select_v2_bool_cond", "DTYPE", True, target_op=1)
def _(n: Net) -> ir.Tensor:
    x = n.input((1, 4, 4, 8))
    cond = n.op("GREATER", x, np.zeros((1, 1, 1, 8), F32), dtype=np.bool_)
    return n.op("SELECT_V2", cond, x, n.input((1, 4, 4, 8), name="y"))


@case("select_v2_float_constant_cond", "KERNEL_FAILURE", False)
def _(n: Net) -> ir.Tensor:
    # measured: "SELECT_V2 failed to prepare", and the whole graph stays on the CPU
    x = n.input((1, 4, 4, 8))
    return n.op("SELECT_V2", np.ones((1, 4, 4, 8), F32), x, n.input((1, 4, 4, 8), name="y"))


@case("select_v2_bool_constant_cond", "KERNEL_FAILURE", True)
def _(n: Net) -> ir.Tensor:
    x = n.input((1, 4, 4, 8))
    return n.op("SELECT_V2", np.ones((1, 4, 4, 8), np.bool_), x, n.input((1, 4, 4, 8), name="y"))


@case("gather_fp16_weights", "DTYPE", False)
def _(n: Net) -> ir.Tensor:
    # measured: "Input / output dtype mismatch" (the delegate reads the FLOAT16 constant)
    table = n.op("DEQUANTIZE", np.ones((16, 8), np.float16), dtype=F32)
    index = n.input((4,), np.int32, name="index")
    return n.op("GATHER", table, index, shape=(4, 8), options=opts("GatherOptionsT", axis=0))


@case("batch_matmul_runtime", "NON_CONST_INPUT", True)
def _(n: Net) -> ir.Tensor:
    return n.op(
        "BATCH_MATMUL",
        n.input((1, 4, 8)),
        n.input((1, 8, 6), name="y"),
        shape=(1, 4, 6),
        options=opts("BatchMatMulOptionsT"),
    )


@case("batch_matmul_const_left", "NON_CONST_INPUT", False)
def _(n: Net) -> ir.Tensor:
    return n.op(
        "BATCH_MATMUL",
        np.ones((1, 4, 8), F32),
        n.input((1, 8, 6), name="y"),
        shape=(1, 4, 6),
        options=opts("BatchMatMulOptionsT"),
    )


# --- wrong values: taken by the accelerator, computed wrong (LiteRT 2.3, lavapipe) ---------------
def _matmul(
    lhs: Sequence[int], rhs: Sequence[int], adj_y: bool = False
) -> Callable[[Net], ir.Tensor]:
    """Both operands graph inputs (computed at runtime), ``y`` transposed with ``adj_y``."""
    ya = (*rhs[:-2], rhs[-1], rhs[-2]) if adj_y else tuple(rhs)
    shape = (*np.broadcast_shapes(tuple(lhs[:-2]), ya[:-2]), lhs[-2], ya[-1])
    options = opts("BatchMatMulOptionsT", adjY=adj_y)

    def build(n: Net) -> ir.Tensor:
        x, y = n.input(lhs), n.input(rhs, name="y")
        return n.op("BATCH_MATMUL", x, y, shape=shape, options=options)

    return build


#: (name, x, y, adj_y, right on the GPU): gemma's attention probabilities x one KV head's values
#: (wrong: batches 1.. come back as zeros), and the neighbours the GPU computes right.
_MATMUL_VALUE_CASES = (
    ("batch_matmul_broadcast_rhs", (4, 1, 32), (32, 16), False, False),
    ("batch_matmul_broadcast_rhs_batch1", (4, 2, 32), (1, 32, 16), False, False),
    ("batch_matmul_broadcast_lhs", (1, 2, 8), (3, 8, 4), False, False),
    ("batch_matmul_full_batch", (4, 1, 32), (4, 32, 16), False, True),
    ("batch_matmul_same_batch_other_rank", (4, 1, 32), (1, 4, 32, 16), False, True),
    ("batch_matmul_broadcast_rhs_adj_y_k_n_by_4", (4, 1, 32), (16, 32), True, True),
)
for _name, _lhs, _rhs, _adj_y, _ok in _MATMUL_VALUE_CASES:
    case(_name, "WRONG_RESULT", _ok, about_values=True)(_matmul(_lhs, _rhs, _adj_y))


# SELECT / SELECT_V2 reading fp16 weights (a FLOAT16 constant behind a DEQUANTIZE): in fp32 the
# accelerator's shader for it does not compile and the op writes nothing; fp16 is right.
#: An operand: "x" (a runtime input of the output's shape) or (shape, kind), kind "fp16" (fp16
#: weights), "f32" (a float32 constant) or "int8" (int8 weights behind a DEQUANTIZE).
SelectOperand = str | tuple[tuple[int, ...], str]


def _weights(n: Net, shape: Sequence[int], kind: str, base: float) -> ir.Tensor:
    """Distinct non-zero values (a stale output never matches them by chance)."""
    values = base + np.arange(int(np.prod(shape)), dtype=F32).reshape(shape)
    if kind == "f32":
        return n.b.const(values, "weights")
    if kind == "fp16":
        half = n.b.const(values.astype(np.float16), "weights_fp16")
        return n.op("DEQUANTIZE", half, shape=tuple(shape), dtype=F32)
    quantized = n.b.const(values.astype(np.int8), "weights_int8")
    quantized.quantization = fb.QuantizationParametersT()
    quantized.quantization.scale, quantized.quantization.zeroPoint = [1.0], [0]
    return n.op("DEQUANTIZE", quantized, shape=tuple(shape), dtype=F32)


def _select(
    op_type: str, out: Sequence[int], cond: Sequence[int], then: SelectOperand, other: SelectOperand
) -> Callable[[Net], ir.Tensor]:
    """``op_type(c > 0, then, else)``: ``c`` a runtime input of the condition's shape."""

    def build(n: Net) -> ir.Tensor:
        c = n.input(cond, name="c")
        flag = n.op("GREATER", c, np.array(0.0, F32), dtype=np.bool_)
        x = n.input(out) if "x" in (then, other) else None
        a, b = (
            x if spec == "x" else _weights(n, spec[0], spec[1], base)
            for spec, base in ((then, 3.0), (other, -40.0))
        )
        return n.op(op_type, flag, a, b, shape=tuple(out), dtype=F32)

    return build


_OUT = (1, 2, 3, 4)
#: (name, op, output, condition, then, else, right on the GPU in fp32): BirdNET 2.4's metadata
#: model (``SELECT_V2(lat > 0, 1.0, 0.0)``, fp16 scalars) and its neighbours.
_SELECT_VALUE_CASES: tuple[tuple[Any, ...], ...] = (
    ("select_v2_fp16_scalars", "SELECT_V2", (1,), (1,), ((), "fp16"), ((), "fp16"), False),
    ("select_v2_fp16_else", "SELECT_V2", _OUT, _OUT, "x", (_OUT, "fp16"), False),
    ("select_v2_fp16_then_bcast", "SELECT_V2", _OUT, (1, 1, 1, 4), ((1,), "fp16"), "x", False),
    ("select_fp16_then", "SELECT", (2, 4), (2, 4), ((2, 4), "fp16"), "x", False),
    ("select_v2_f32_scalars", "SELECT_V2", (1,), (1,), ((), "f32"), ((), "f32"), True),
    ("select_v2_f32_else", "SELECT_V2", _OUT, _OUT, "x", (_OUT, "f32"), True),
    ("select_v2_int8_weights_else", "SELECT_V2", _OUT, _OUT, "x", (_OUT, "int8"), True),
    ("select_v2_runtime_cond_broadcast", "SELECT_V2", _OUT, (1, 1, 1, 4), "x", ((), "f32"), True),
)
for _name, _op, _out, _cond, _then, _else, _ok in _SELECT_VALUE_CASES:
    case(_name, "WRONG_RESULT", _ok, about_values=True)(_select(_op, _out, _cond, _then, _else))


# CONCATENATION, PACK (any input) and ONE_HOT (on/off values) reading fp16 weights: in fp32 the
# CONCATENATION/PACK shader does not compile (as SELECT's) and the op writes nothing; fp16 is
# right. ONE_HOT reads the fp16 bits as a float32 (fp32) or zeros (fp16): wrong in both.
#: An operand: "x" (a runtime input) or a weights kind of :func:`_weights`.
_JOIN_SHAPES = {"x": (1, 2, 3, 4), "w": (1, 2, 3, 5)}


def _concat(shapes: Sequence[Sequence[int]], kinds: Sequence[str], axis: int) -> Callable:
    """``CONCATENATION(...)`` of runtime inputs ("x") and weights of a kind, along ``axis``."""

    def build(n: Net) -> ir.Tensor:
        inputs = [
            n.input(shape, name=f"x{i}") if kind == "x" else _weights(n, shape, kind, 3.0 - 9 * i)
            for i, (shape, kind) in enumerate(zip(shapes, kinds, strict=True))
        ]
        out = list(shapes[0])
        out[axis] = sum(s[axis] for s in shapes)
        options = opts("ConcatenationOptionsT", axis=axis)
        return n.op("CONCATENATION", *inputs, shape=tuple(out), dtype=F32, options=options)

    return build


def _pack(shape: Sequence[int], kinds: Sequence[str], axis: int) -> Callable:
    """``PACK(...)`` of runtime inputs ("x") and weights of a kind, along ``axis``."""

    def build(n: Net) -> ir.Tensor:
        inputs = [
            n.input(shape, name=f"x{i}") if kind == "x" else _weights(n, shape, kind, 3.0 - 9 * i)
            for i, kind in enumerate(kinds)
        ]
        out = list(shape)
        out.insert(axis, len(kinds))
        options = opts("PackOptionsT", valuesCount=len(kinds), axis=axis)
        return n.op("PACK", *inputs, shape=tuple(out), dtype=F32, options=options)

    return build


def _one_hot(on: str, off: str) -> Callable:
    """``ONE_HOT(ids, 8, on=5, off=-2)``, on/off weights of a kind."""

    def build(n: Net) -> ir.Tensor:
        ids = n.input((1, 3), np.int32, name="ids")
        depth = n.b.const(np.array(8, np.int32), "depth")
        values = (_weights(n, (), kind, base) for kind, base in ((on, 5.0), (off, -2.0)))
        options = opts("OneHotOptionsT", axis=-1)
        return n.op("ONE_HOT", ids, depth, *values, shape=(1, 3, 8), dtype=F32, options=options)

    return build


#: (name, model, right on the GPU in fp32).
_FP16_OPERAND_VALUE_CASES: tuple[tuple[str, Callable, bool], ...] = (
    ("concat_fp16_channels", _concat([(1, 2, 3, 4), (1, 2, 3, 5)], ["x", "fp16"], 3), False),
    ("concat_fp16_first_rank2", _concat([(3, 4), (2, 4)], ["fp16", "x"], 0), False),
    (
        "concat_fp16_between",
        _concat([(1, 3, 4), (1, 2, 4), (1, 3, 4)], ["x", "fp16", "x"], 1),
        False,
    ),
    ("concat_f32_channels", _concat([(1, 2, 3, 4), (1, 2, 3, 5)], ["x", "f32"], 3), True),
    ("concat_int8_weights_channels", _concat([(1, 2, 3, 4), (1, 2, 3, 5)], ["x", "int8"], 3), True),
    ("pack_fp16_axis0", _pack((2, 3, 4), ["x", "fp16"], 0), False),
    ("pack_fp16_first_last_axis", _pack((3, 4), ["fp16", "x"], 2), False),
    ("pack_f32_axis0", _pack((2, 3, 4), ["x", "f32"], 0), True),
    ("pack_f32_first_last_axis", _pack((3, 4), ["f32", "x"], 2), True),
    ("one_hot_fp16_on_off", _one_hot("fp16", "fp16"), False),
    ("one_hot_fp16_off", _one_hot("f32", "fp16"), False),
    ("one_hot_f32_on_off", _one_hot("f32", "f32"), True),
)
for _name, _build, _ok in _FP16_OPERAND_VALUE_CASES:
    case(_name, "WRONG_RESULT", _ok, about_values=True)(_build)

CASE_BY_NAME: dict[str, CompatCase] = {c.name: c for c in CASES}
