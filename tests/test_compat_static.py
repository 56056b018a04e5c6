"""Static GPU compatibility rules: neighbours that the GPU takes and does not take, per family.

Models are built with the tflkit IR (no TensorFlow). Each family pairs an accepted op with a
rejected neighbour, because a rule that rejects everything would pass half of these tests.
The expected verdicts are what the real LiteRT accelerator did with the same one-op models
(docs/compat-rules.md); the ``gpu`` test at the end re-checks a set of them on the accelerator.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from tests.conftest_corpus import Corpus
from tflkit import ir
from tflkit.compat.reasons import Reason
from tflkit.compat.signature import OpSignature, TensorSig
from tflkit.compat.static import analyze, check_op, model_issues, op_verdicts
from tflkit.compat.targets import TARGETS, get_target
from tflkit.errors import UsageError
from tflkit.ir.builder import OpBuilder

fb = ir.schema.fb
F32 = np.float32


class Net:
    """A one-subgraph model under construction."""

    def __init__(self) -> None:
        self.model = ir.Model(description="compat test")
        self.sg = self.model.add_subgraph("main")
        self.b = OpBuilder(self.sg, prefix="t")

    def input(
        self,
        name: str,
        shape: Sequence[int],
        dtype: Any = F32,
        signature: Sequence[int] | None = None,
    ) -> ir.Tensor:
        tensor = self.sg.new_tensor(name, shape, dtype, shape_signature=signature)
        self.sg.inputs.append(tensor)
        return tensor

    def op(self, op_type: str, *inputs: Any, **kwargs: Any) -> Any:
        return self.b.op(op_type, inputs, **kwargs)

    def done(self, *outputs: ir.Tensor) -> ir.Model:
        self.sg.outputs = list(outputs)
        return self.model

    @property
    def last(self) -> ir.Op:
        return self.sg.ops[-1]


def options(cls: type, **fields: Any) -> Any:
    instance = cls()
    for name, value in fields.items():
        setattr(instance, name, value)
    return instance


def codes(op: ir.Op, target: str = "litert-gpu") -> set[Reason]:
    return {r.code for r in check_op(op, target)}


def conv(net: Net, x: ir.Tensor, *, act: int = 0, version: int = 1) -> ir.Tensor:
    weights = np.ones((8, 3, 3, 4), F32)
    opts = options(fb.Conv2DOptionsT, strideH=1, strideW=1, fusedActivationFunction=act)
    return net.op(
        "CONV_2D", x, weights, np.zeros(8, F32), options=opts, shape=(1, 8, 8, 8), version=version
    )


# --- OpSignature --------------------------------------------------------------------------------


def test_signature_describes_op_and_survives_a_round_trip() -> None:
    net = Net()
    x = net.input("x", (1, 8, 8, 4))
    y = conv(net, x, act=fb.ActivationFunctionType.RELU6)
    z = net.op("RELU", y, options=None)
    model = net.done(z)

    sig = OpSignature.from_op(model.main.ops[0])
    assert (sig.op_type, sig.version, sig.custom_code) == ("CONV_2D", 1, None)
    src, weights, bias = sig.inputs
    assert src is not None and weights is not None and bias is not None
    assert (src.dtype, src.shape, src.is_const, src.is_graph_input) == (
        "FLOAT32",
        (1, 8, 8, 4),
        False,
        True,
    )
    assert weights.is_const and weights.rank == 4 and weights.values is None  # 288 values
    assert bias.values == (0.0,) * 8
    assert sig.outputs[0].consumers == ("RELU",)
    assert sig.option("fusedActivationFunction") == fb.ActivationFunctionType.RELU6
    assert [i for i, _ in sig.runtime_inputs] == [0]

    reloaded = ir.load(ir.dumps(model))
    assert OpSignature.from_op(reloaded.main.ops[0]) == sig


def test_signatures_equal_what_their_constructors_make(corpus: Corpus) -> None:
    """``from_op`` builds signatures without the frozen ``__init__`` (speed): on real graphs
    they equal, and hash like, the dataclasses built field by field."""
    for name in ("conv_dense", "full_int8", "fp16_weights"):
        for op in ir.load(corpus.path(name)).iter_ops():
            sig = OpSignature.from_op(op)
            rebuilt = OpSignature(
                **{f.name: getattr(sig, f.name) for f in dataclasses.fields(OpSignature)}
            )
            assert rebuilt == sig and hash(rebuilt) == hash(sig) and repr(rebuilt) == repr(sig)
            for tensor in (*sig.inputs, *sig.outputs):
                if tensor is not None:
                    fields = {f.name: getattr(tensor, f.name) for f in dataclasses.fields(tensor)}
                    assert TensorSig(**fields) == tensor and vars(tensor) == fields


def test_signature_treats_fp16_weights_behind_dequantize_as_constant() -> None:
    net = Net()
    x = net.input("x", (1, 8, 8, 4))
    w = net.op("DEQUANTIZE", np.ones((8, 3, 3, 4), np.float16), dtype=F32)
    opts = options(fb.Conv2DOptionsT, strideH=1, strideW=1)
    net.done(net.op("CONV_2D", x, w, np.zeros(8, F32), options=opts, shape=(1, 8, 8, 8)))
    weights = OpSignature.from_op(net.last).inputs[1]
    assert weights is not None and weights.is_const and weights.fp16_weights


# --- dtypes -------------------------------------------------------------------------------------


def test_int64_output_is_rejected_int32_accepted() -> None:
    net = Net()
    x = net.input("x", (1, 8, 8, 4))
    for dtype in (np.int64, np.int32):
        out_type = fb.TensorType.INT64 if dtype == np.int64 else fb.TensorType.INT32
        opts = options(fb.ArgMaxOptionsT, outputType=out_type)
        net.op("ARG_MAX", x, np.array([3], np.int32), options=opts, shape=(1, 8, 8), dtype=dtype)
    int64_argmax, int32_argmax = net.sg.ops
    assert codes(int64_argmax) == {Reason.DTYPE}
    assert codes(int32_argmax) == set()


def test_cast_to_int64_rejected_to_int32_accepted() -> None:
    net = Net()
    x = net.input("x", (1, 8))
    net.op("CAST", x, dtype=np.int64)
    net.op("CAST", x, dtype=np.int32)
    to64, to32 = net.sg.ops
    assert codes(to64) == {Reason.DTYPE}
    assert codes(to32) == set()


def test_integer_arithmetic_is_litert_only() -> None:
    net = Net()
    a, b = net.input("a", (1, 8), np.int32), net.input("b", (1, 8), np.int32)
    add = net.op("ADD", a, b, options=fb.AddOptionsT())
    net.op("RELU", add)
    add_op, relu_op = net.sg.ops
    assert codes(add_op, "litert-gpu") == set()
    assert codes(relu_op, "litert-gpu") == {Reason.DTYPE}  # RELU has no integer kernel
    assert codes(add_op, "tflite-gpu") == {Reason.DTYPE}


# --- rank ---------------------------------------------------------------------------------------


def test_rank5_rejected_rank4_accepted() -> None:
    net = Net()
    x = net.input("x", (1, 8, 8, 4))
    net.op("RESHAPE", x, np.array([1, 8, 8, 2, 2], np.int32), shape=(1, 8, 8, 2, 2))
    net.op("RESHAPE", x, np.array([1, 64, 2, 2], np.int32), shape=(1, 64, 2, 2))
    to5, to4 = net.sg.ops
    assert codes(to5) == {Reason.RANK}
    assert codes(to4) == set()


def test_transpose_permutation_of_five_axes_rejected() -> None:
    net = Net()
    x = net.input("x", (1, 2, 3, 4))
    net.op("TRANSPOSE", x, np.array([0, 3, 1, 2], np.int32), shape=(1, 4, 2, 3))
    y = net.input("y", (1, 2, 3, 4, 5))
    net.op("TRANSPOSE", y, np.array([0, 2, 1, 4, 3], np.int32), shape=(1, 3, 2, 5, 4))
    four, five = net.sg.ops
    assert codes(four) == set()
    assert Reason.RANK in codes(five)


# --- constant and runtime inputs ----------------------------------------------------------------


def test_reduction_axes_must_be_constant_and_runtime_axes_break_compilation() -> None:
    net = Net()
    x = net.input("x", (1, 8, 8, 4))
    axes = net.input("axes", (2,), np.int32)
    keep = options(fb.ReducerOptionsT, keepDims=True)
    net.op("MEAN", x, np.array([1, 2], np.int32), options=keep, shape=(1, 1, 1, 4))
    net.op("MEAN", x, axes, options=keep, shape=(1, 1, 1, 4))
    const_axes, runtime_axes = net.sg.ops
    assert codes(const_axes) == set()
    found = check_op(runtime_axes)
    assert {r.code for r in found} >= {Reason.NON_CONST_INPUT, Reason.DYNAMIC_SHAPE}
    assert any(r.fatal and r.code is Reason.DYNAMIC_SHAPE for r in found)
    assert all(r.op_index == 1 for r in found)


def test_conv_input_must_be_runtime() -> None:
    net = Net()
    x = net.input("x", (1, 8, 8, 4))
    conv(net, x)
    conv(net, net.b.const(np.ones((1, 8, 8, 4), F32), "frozen"))
    runtime_input, const_input = net.sg.ops
    assert codes(runtime_input) == set()
    assert Reason.CONST_INPUT in codes(const_input)


def test_prelu_alpha_must_be_constant() -> None:
    net = Net()
    x = net.input("x", (1, 8, 8, 4))
    alpha = net.input("alpha", (4,))
    net.op("PRELU", x, np.full(4, 0.2, F32))
    net.op("PRELU", x, alpha)
    const_alpha, runtime_alpha = net.sg.ops
    assert codes(const_alpha) == set()
    assert codes(runtime_alpha) == {Reason.NON_CONST_INPUT}


def test_ops_on_constants_only_are_folded_or_rejected() -> None:
    net = Net()
    x = net.input("x", (1, 8))
    c = np.ones((1, 8), F32)
    folded = net.op("ADD", c, c, options=fb.AddOptionsT())
    relu = net.op("RELU", net.b.const(c, "c2"))
    net.done(net.op("ADD", folded, relu, options=fb.AddOptionsT()), x)
    add_consts, relu_const, _ = net.sg.ops
    assert codes(add_consts) == set()
    assert codes(relu_const) == {Reason.CONST_INPUT}


# --- fused activations, versions, options ------------------------------------------------------


@pytest.mark.parametrize(
    ("act", "expected"),
    [
        (fb.ActivationFunctionType.RELU_N1_TO_1, set()),
        # the CPU kernels ignore a fused TANH, the GPU applies it (bench/fused_activations.py)
        (fb.ActivationFunctionType.TANH, {Reason.WRONG_RESULT}),
        (fb.ActivationFunctionType.SIGN_BIT, {Reason.FUSED_ACTIVATION}),
    ],
)
def test_fused_activation(act: int, expected: set[Reason]) -> None:
    net = Net()
    x = net.input("x", (1, 8, 8, 4))
    conv(net, x, act=act)
    net.op("ADD", x, x, options=options(fb.AddOptionsT, fusedActivationFunction=act))
    for op in net.sg.ops:
        assert codes(op) == expected


def test_op_version_limit() -> None:
    net = Net()
    x = net.input("x", (1, 8, 8, 4))
    conv(net, x, version=6)
    conv(net, x, version=7)
    v6, v7 = net.sg.ops
    assert codes(v6) == set()
    assert codes(v7) == {Reason.OP_VERSION}


def test_softmax_beta_and_mirror_pad_mode() -> None:
    net = Net()
    x = net.input("x", (1, 10))
    net.op("SOFTMAX", x, options=options(fb.SoftmaxOptionsT, beta=1.0))
    net.op("SOFTMAX", x, options=options(fb.SoftmaxOptionsT, beta=2.0))
    y = net.input("y", (1, 8, 8, 4))
    pads = np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32)
    for mode in (fb.MirrorPadMode.REFLECT, fb.MirrorPadMode.SYMMETRIC):
        opts = options(fb.MirrorPadOptionsT, mode=mode)
        net.op("MIRROR_PAD", y, pads, options=opts, shape=(1, 10, 10, 4))
    beta1, beta2, reflect, symmetric = net.sg.ops
    assert codes(beta1) == set() and codes(reflect) == set()
    assert codes(beta2) == {Reason.OPTIONS} and codes(symmetric) == {Reason.OPTIONS}


# --- strided slice ------------------------------------------------------------------------------


def strided_slice(
    net: Net,
    x: ir.Tensor,
    begin: list[int],
    end: list[int],
    strides: list[int],
    out: Sequence[int],
    **masks: int,
) -> ir.Op:
    opts = options(fb.StridedSliceOptionsT, **masks)
    net.op(
        "STRIDED_SLICE",
        x,
        np.array(begin, np.int32),
        np.array(end, np.int32),
        np.array(strides, np.int32),
        options=opts,
        shape=out,
    )
    return net.last


def test_strided_slice_masks_strides_and_ends() -> None:
    net = Net()
    x = net.input("x", (1, 8, 8, 4))
    plain = strided_slice(net, x, [0, 1, 0, 1], [1, 7, 8, 3], [1, 2, 1, 1], (1, 3, 8, 2))
    masked = strided_slice(
        net, x, [0, 1, 0, 1], [0, 7, 0, 3], [1, 1, 1, 1], (1, 6, 8, 2), beginMask=5, endMask=5
    )
    shrink = strided_slice(
        net, x, [0, 0, 0, 0], [1, 1, 8, 4], [1, 1, 1, 1], (1, 8, 4), shrinkAxisMask=2
    )
    reverse = strided_slice(net, x, [0, 7, 0, 0], [1, -9, 8, 4], [1, -1, 1, 1], (1, 8, 8, 4))
    overflow = strided_slice(net, x, [0, 1, 0, 0], [1, 100, 8, 4], [1, 1, 1, 1], (1, 7, 8, 4))
    empty = strided_slice(net, x, [0, 5, 0, 0], [1, 5, 8, 4], [1, 1, 1, 1], (1, 0, 8, 4))
    assert codes(plain) == set() and codes(masked) == set()
    assert codes(shrink) == {Reason.OPTIONS}
    assert codes(reverse) == {Reason.OPTIONS}
    assert codes(overflow) == {Reason.SHAPE}  # the delegate does not clamp an end past the dim
    crash = check_op(empty)
    assert [r.code for r in crash] == [Reason.CRASH] and crash[0].fatal


# --- broadcasting and repeated inputs ------------------------------------------------------------


def test_broadcasting_of_runtime_operands() -> None:
    net = Net()
    a, b = net.input("a", (1, 8, 1, 4)), net.input("b", (1, 1, 8, 4))
    row, scalar = net.input("row", (1, 8)), net.input("s", ())
    net.op("MUL", a, b, options=fb.MulOptionsT(), shape=(1, 8, 8, 4))
    net.op("ADD", row, scalar, options=fb.AddOptionsT())
    outer, with_scalar = net.sg.ops
    assert codes(outer, "litert-gpu") == set()
    assert codes(outer, "tflite-gpu") == {Reason.BROADCAST}  # classic: no outer products
    assert codes(with_scalar) == {Reason.BROADCAST}  # a 0-D runtime tensor


def test_same_tensor_twice() -> None:
    net = Net()
    x = net.input("x", (1, 8, 8, 4))
    net.op("ADD", x, x, options=fb.AddOptionsT())
    net.op("SUB", x, x, options=fb.SubOptionsT())
    net.op(
        "PACK", x, x, options=options(fb.PackOptionsT, axis=0, valuesCount=2), shape=(2, 1, 8, 8, 4)
    )
    add, sub, pack = net.sg.ops
    assert codes(add) == set()
    assert codes(sub) == {Reason.SHAPE}
    crash = [r for r in check_op(pack) if r.code is Reason.CRASH]
    assert crash and crash[0].fatal


def test_comparison_must_feed_cast_on_classic_delegate() -> None:
    net = Net()
    x, y = net.input("x", (1, 8)), net.input("y", (1, 8))
    flag = net.op("GREATER", x, y, dtype=np.bool_)
    as_float = net.op("CAST", flag, dtype=F32)
    raw = net.op("LESS", x, y, dtype=np.bool_)
    net.done(net.op("RELU", as_float), raw)
    greater, cast, less, _ = net.sg.ops
    assert codes(greater, "tflite-gpu") == set() and codes(cast, "tflite-gpu") == set()
    assert codes(less, "tflite-gpu") == {Reason.SHAPE}
    assert codes(less, "litert-gpu") == set()  # LiteRT takes boolean tensors


# --- custom and flex ops --------------------------------------------------------------------------


def test_custom_and_flex_ops() -> None:
    net = Net()
    x = net.input("x", (1, 8, 8, 4))
    known = net.op(
        "Convolution2DTransposeBias",
        x,
        np.ones((6, 3, 3, 4), F32),
        np.zeros(6, F32),
        shape=(1, 16, 16, 6),
        custom_options=np.array([1, 2, 2], np.int32).tobytes(),
    )
    net.op("MyMadeUpOp", known, custom_options=b"")
    net.op("FlexErf", x, custom_options=b"")
    tbias, unknown, flex = net.sg.ops
    assert codes(tbias) == set()
    assert [(r.code, r.fatal) for r in check_op(unknown)] == [(Reason.CUSTOM_OP, True)]
    assert [(r.code, r.fatal) for r in check_op(flex)] == [(Reason.FLEX_OP, True)]


def test_unsupported_control_flow_and_variables_get_their_own_codes() -> None:
    net = Net()
    x = net.input("x", (1, 10))
    net.op("LOG_SOFTMAX", x, options=fb.LogSoftmaxOptionsT())
    net.op("VAR_HANDLE", outputs=[((), fb.TensorType.RESOURCE)])
    log_softmax, handle = net.sg.ops
    assert codes(log_softmax) == {Reason.UNSUPPORTED_OP}
    assert codes(handle) == {Reason.RESOURCE_VARIABLE}


# --- whole models ---------------------------------------------------------------------------------


def test_fp16_weights_stay_on_cpu_only_in_partial_delegation() -> None:
    def model(with_log_softmax: bool) -> ir.Model:
        net = Net()
        x = net.input("x", (1, 10))
        w = net.op("DEQUANTIZE", np.ones((1, 10), np.float16), dtype=F32)
        y = net.op("ADD", x, w, options=fb.AddOptionsT())
        if with_log_softmax:
            y = net.op("LOG_SOFTMAX", y, options=fb.LogSoftmaxOptionsT())
        return net.done(y)

    full = op_verdicts(model(False))
    assert all(v.ok for v in full)
    partial = op_verdicts(model(True))
    assert [(v.op_type, v.codes) for v in partial] == [
        ("DEQUANTIZE", (Reason.FP16_DEQUANTIZE,)),
        ("ADD", ()),
        ("LOG_SOFTMAX", (Reason.UNSUPPORTED_OP,)),
    ]


def test_dynamic_input_is_a_warning_runtime_shape_is_fatal() -> None:
    net = Net()
    x = net.input("x", (1, 16), signature=(-1, 16))
    shape = net.input("shape", (2,), np.int32)
    y = net.op("RELU", x)
    z = net.op("RESHAPE", y, shape, shape=(4, 4))
    model = net.done(z)

    report = analyze(model)
    assert not report.compiles
    issues = {(i.code, i.fatal, i.op_index) for i in report.issues}
    assert (Reason.DYNAMIC_INPUT, False, None) in issues
    assert (Reason.DYNAMIC_SHAPE, True, 1) in issues
    assert report.to_dict()["rejected"] == 1

    static = Net()
    s = static.input("x", (1, 16), signature=(-1, 16))
    static.done(static.op("RELU", s))
    static_report = analyze(static.model)
    assert static_report.compiles and not static_report.rejected
    assert [i.code for i in static_report.issues] == [Reason.DYNAMIC_INPUT]


def while_model(body_op: str) -> ir.Model:
    """main: WHILE(i, x); cond: i < 2; body: (i + 1, body_op(x))."""
    model = ir.Model(description="compat test while")
    main, cond, body = (model.add_subgraph(n) for n in ("main", "cond", "body"))
    i0 = main.add_constant(np.array(0, np.int32), "i0")
    x = main.new_tensor("x", (1, 10), F32)
    main.inputs = [x]
    outs = [main.new_tensor("i_out", (), np.int32), main.new_tensor("x_out", (1, 10), F32)]
    loop = ir.Op(
        ir.OpCode.builtin("WHILE"),
        [i0, x],
        outs,
        options=options(fb.WhileOptionsT, condSubgraphIndex=1, bodySubgraphIndex=2),
    )
    main.add_op(loop)
    main.outputs = [outs[1]]
    ci, cx = cond.new_tensor("ci", (), np.int32), cond.new_tensor("cx", (1, 10), F32)
    cond.inputs = [ci, cx]
    cond.outputs = [OpBuilder(cond).LESS(ci, np.array(2, np.int32), dtype=np.bool_)]
    bi, bx = body.new_tensor("bi", (), np.int32), body.new_tensor("bx", (1, 10), F32)
    body.inputs = [bi, bx]
    b = OpBuilder(body)
    body.outputs = [b.ADD(bi, np.array(1, np.int32), options=fb.AddOptionsT()), b.op(body_op, [bx])]
    return model


def test_while_bodies_are_checked_and_labelled() -> None:
    model = ir.load(ir.dumps(while_model("LOG_SOFTMAX")))
    verdicts = op_verdicts(model)
    summary = [(v.subgraph_index, v.subgraph_role, v.op_type, v.ok) for v in verdicts]
    assert summary == [
        (0, "main", "WHILE", False),
        (1, "body", "LESS", True),
        (2, "body", "ADD", True),
        (2, "body", "LOG_SOFTMAX", False),
    ]
    assert verdicts[0].codes == (Reason.CONTROL_FLOW,)
    assert not any(i.fatal for i in model_issues(model, verdicts=verdicts))


def test_targets_are_explicit_and_unknown_names_fail_clearly() -> None:
    assert set(TARGETS) == {"litert-gpu", "tflite-gpu"}
    assert get_target("tflite-gpu") is TARGETS["tflite-gpu"]
    with pytest.raises(UsageError, match="unknown GPU target 'metal'"):
        get_target("metal")


def test_litert_only_ops_are_rejected_by_the_classic_delegate() -> None:
    net = Net()
    x = net.input("x", (1, 8, 8, 4))
    net.op("REVERSE_V2", x, np.array([2], np.int32))
    net.op("ROUND", x)
    for op in net.sg.ops:
        assert codes(op, "litert-gpu") == set()
        assert codes(op, "tflite-gpu") == {Reason.UNSUPPORTED_OP}


# --- against the real accelerator ---------------------------------------------------------------


def neighbour_models() -> dict[str, ir.Model]:
    """Small models from the families above, each a few ops, for the accelerator check."""
    models: dict[str, ir.Model] = {}

    net = Net()
    x = net.input("x", (1, 8, 8, 4))
    y = conv(net, x, act=fb.ActivationFunctionType.RELU)
    y = net.op("CAST", y, dtype=np.int64)
    models["conv_then_int64_cast"] = net.done(y)

    net = Net()
    x = net.input("x", (1, 8, 8, 4))
    y = net.op("RESHAPE", x, np.array([1, 8, 8, 2, 2], np.int32), shape=(1, 8, 8, 2, 2))
    y = net.op("RESHAPE", y, np.array([1, 8, 8, 4], np.int32), shape=(1, 8, 8, 4))
    models["rank5_round_trip"] = net.done(net.op("TANH", y))

    net = Net()
    x = net.input("x", (1, 8, 8, 4))
    y = strided_slice(net, x, [0, 0, 0, 0], [1, 1, 8, 4], [1, 1, 1, 1], (1, 8, 4), shrinkAxisMask=2)
    z = strided_slice(net, x, [0, 1, 0, 0], [1, 100, 8, 4], [1, 1, 1, 1], (1, 7, 8, 4))
    w = strided_slice(
        net, x, [0, 1, 0, 0], [0, 7, 0, 0], [1, 1, 1, 1], (1, 6, 8, 4), beginMask=13, endMask=13
    )
    outs = [net.op("RELU", op.outputs[0]) for op in (y, z, w)]
    models["strided_slices"] = net.done(*outs)

    net = Net()
    x = net.input("x", (1, 8, 8, 4))
    y = conv(net, x, act=fb.ActivationFunctionType.SIGN_BIT)
    models["sign_bit_conv"] = net.done(net.op("ADD", y, y, options=fb.AddOptionsT()))

    net = Net()
    x, row = net.input("x", (1, 10)), net.input("s", ())
    y = net.op("ADD", x, row, options=fb.AddOptionsT())
    y = net.op("SOFTMAX", y, options=options(fb.SoftmaxOptionsT, beta=2.0))
    models["scalar_broadcast_softmax_beta"] = net.done(
        net.op("LOG_SOFTMAX", y, options=fb.LogSoftmaxOptionsT())
    )

    models["while_log_softmax"] = while_model("LOG_SOFTMAX")

    net = Net()
    x = net.input("x", (1, 8))
    y = net.op("RESHAPE", x, net.input("shape", (2,), np.int32), shape=(2, 4))
    models["runtime_reshape"] = net.done(y)
    return models


@pytest.mark.gpu
def test_verdicts_match_the_accelerator(gpu: str, tmp_path: Any) -> None:
    from tflkit.gpu.probe import probe

    for name, model in neighbour_models().items():
        data = ir.dumps(model)
        report = analyze(ir.load(data))
        result = probe(data, cache_dir=tmp_path)
        predicted = sorted({v.op_type for v in report.verdicts if not v.ok})
        assert result.compiled == report.compiles, (name, result.status, result.log.fatal)
        if result.compiled:
            assert sorted(result.log.rejected_op_types) == predicted, name
