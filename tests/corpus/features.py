"""Feature checks for the generated corpus, parsed with the raw LiteRT flatbuffer schema.

Deliberately independent of ``tflkit.ir``: the corpus must not trust the code it tests. Every
check raises ``FeatureMissing`` saying what it looked for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ai_edge_litert import schema_py_generated as fb

OP_NAMES = {v: k for k, v in vars(fb.BuiltinOperator).items() if not k.startswith("_")}
TYPE_NAMES = {v: k for k, v in vars(fb.TensorType).items() if not k.startswith("_")}

METADATA_NAME = "tflkit_corpus"

# Models the plain CPU Interpreter cannot run, with a regex of the error it raises.
CPU_FAILURES: dict[str, str] = {
    "custom_op": r"unresolved custom op: Erf",
    "flex_op": r"Select TensorFlow op\(s\).*not supported by this interpreter",
}


class FeatureMissing(AssertionError):
    """A generated model lacks the feature it exists to exercise."""


def _require(condition: object, message: str) -> None:
    if not condition:
        raise FeatureMissing(message)


@dataclass(frozen=True)
class Op:
    """One operator with its subgraph, resolved opcode name and the raw object-API op."""

    subgraph: int
    name: str  # builtin name, or the custom code for CUSTOM ops
    raw: Any  # fb.OperatorT
    custom_code: str | None


class View:
    """Read-only helpers over an ``fb.ModelT``."""

    def __init__(self, data: bytes) -> None:
        _require(len(data) > 8 and data[4:8] == b"TFL3", "not a TFLite flatbuffer (no TFL3 id)")
        self.model = fb.ModelT.InitFromPackedBuf(bytearray(data), 0)

    def ops(self, name: str | None = None) -> Iterator[Op]:
        codes = self.model.operatorCodes
        for index, sg in enumerate(self.model.subgraphs):
            for raw in sg.operators or []:
                code = codes[raw.opcodeIndex]
                builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
                custom = code.customCode.decode() if code.customCode is not None else None
                op_name = (
                    custom
                    if builtin == fb.BuiltinOperator.CUSTOM and custom
                    else (OP_NAMES.get(builtin, str(builtin)))
                )
                if name is None or op_name == name:
                    yield Op(index, op_name, raw, custom)

    def one(self, name: str) -> Op:
        found = list(self.ops(name))
        _require(found, f"no {name} op (ops: {sorted({o.name for o in self.ops()})})")
        return found[0]

    def tensor(self, subgraph: int, index: int) -> Any:
        return self.model.subgraphs[subgraph].tensors[index]

    def io(self, subgraph: int = 0, kind: str = "inputs") -> list[Any]:
        sg = self.model.subgraphs[subgraph]
        return [sg.tensors[i] for i in getattr(sg, kind)]

    def buffer_bytes(self, index: int) -> bytes:
        data = self.model.buffers[index].data
        return b"" if data is None else bytes(data)

    def type_name(self, tensor: Any) -> str:
        return TYPE_NAMES.get(tensor.type, str(tensor.type))


def _types(view: View, tensors: list[Any]) -> list[str]:
    return [view.type_name(t) for t in tensors]


def check_conv_dense(v: View) -> None:
    conv = v.one("CONV_2D")
    _require(
        conv.raw.builtinOptions.fusedActivationFunction == fb.ActivationFunctionType.RELU,
        "CONV_2D has no fused RELU",
    )
    v.one("FULLY_CONNECTED")
    types = {v.type_name(t) for t in v.model.subgraphs[0].tensors}
    _require(types <= {"FLOAT32", "INT32"}, f"expected a float32 model, tensor types {types}")


def check_fp16_weights(v: View) -> None:
    for op in v.ops("DEQUANTIZE"):
        src = v.tensor(op.subgraph, op.raw.inputs[0])
        if v.type_name(src) == "FLOAT16" and v.buffer_bytes(src.buffer):
            return
    raise FeatureMissing("no DEQUANTIZE fed by a constant FLOAT16 weight")


def check_sparse_weights(v: View) -> None:
    densify = v.one("DENSIFY")
    src = v.tensor(densify.subgraph, densify.raw.inputs[0])
    _require(src.sparsity is not None, "DENSIFY input has no sparsity parameters")
    _require(src.sparsity.dimMetadata, "sparsity has no dim metadata")


def check_dynamic_range_int8(v: View) -> None:
    for op in v.ops("FULLY_CONNECTED"):
        x, w = (v.tensor(op.subgraph, i) for i in op.raw.inputs[:2])
        out = v.tensor(op.subgraph, op.raw.outputs[0])
        if (v.type_name(w), v.type_name(x), v.type_name(out)) == ("INT8", "FLOAT32", "FLOAT32"):
            _require(
                w.quantization is not None and len(w.quantization.scale) > 0,
                "int8 weight without scale",
            )
            return
    raise FeatureMissing("no hybrid FULLY_CONNECTED (float32 activations, int8 weights)")


def _check_full_integer(v: View, io_type: str) -> None:
    io = v.io(0, "inputs") + v.io(0, "outputs")
    _require(_types(v, io) == [io_type] * len(io), f"io types {_types(v, io)}, want {io_type}")
    for t in io:
        _require(
            t.quantization is not None and len(t.quantization.scale) == 1,
            f"{io_type} io tensor {t.name!r} has no per-tensor scale",
        )
    types = {v.type_name(t) for t in v.model.subgraphs[0].tensors}
    _require("FLOAT32" not in types, f"float32 tensors left in a full-integer model: {types}")
    _require("INT8" in types, "no int8 tensors inside the model")


def check_full_int8(v: View) -> None:
    _check_full_integer(v, "INT8")


def check_full_uint8_io(v: View) -> None:
    _check_full_integer(v, "UINT8")
    v.one("QUANTIZE")


def check_metadata(v: View) -> None:
    entries = {m.name.decode(): m.buffer for m in v.model.metadata or []}
    _require(METADATA_NAME in entries, f"no {METADATA_NAME!r} metadata (have {sorted(entries)})")
    _require(
        v.buffer_bytes(entries[METADATA_NAME]).startswith(b'{"producer"'),
        "metadata buffer does not hold the JSON payload",
    )
    _require("min_runtime_version" in entries, "converter metadata min_runtime_version missing")


def check_custom_op(v: View) -> None:
    op = v.one("Erf")
    _require(op.custom_code == "Erf", "Erf is not a CUSTOM op")
    _require(
        op.raw.customOptions is not None and len(op.raw.customOptions) > 0,
        "custom op without custom_options bytes",
    )


def check_flex_op(v: View) -> None:
    op = v.one("FlexErf")
    _require(
        op.raw.customOptions is not None and len(op.raw.customOptions) > 0,
        "flex op without its serialized NodeDef",
    )


def _plain(name: str) -> Callable[[View], None]:
    def check(v: View) -> None:
        v.one(name)
        _require(not [o for o in v.ops() if o.custom_code], "unexpected custom/flex op")

    return check


def check_pack_same_tensor(v: View) -> None:
    op = v.one("PACK")
    _require(
        len(op.raw.inputs) == 2 and op.raw.inputs[0] == op.raw.inputs[1],
        f"PACK inputs {list(op.raw.inputs)} are not one tensor twice",
    )


def check_int64_argmax(v: View) -> None:
    op = v.one("ARG_MAX")
    out = v.tensor(op.subgraph, op.raw.outputs[0])
    _require(v.type_name(out) == "INT64", f"ARG_MAX output is {v.type_name(out)}")
    _require(_types(v, v.io(0, "outputs")) == ["INT64"], "model output is not int64")


def check_rank1_output(v: View) -> None:
    shapes = [list(t.shape) for t in v.io(0, "outputs")]
    _require(shapes == [[4]], f"output shapes {shapes}, want [[4]]")


def check_rank5(v: View) -> None:
    transpose = v.one("TRANSPOSE")
    _require(len(v.tensor(0, transpose.raw.inputs[0]).shape) == 5, "TRANSPOSE input not 5-D")
    reshape = v.one("RESHAPE")
    _require(len(v.tensor(0, reshape.raw.outputs[0]).shape) == 5, "RESHAPE output not 5-D")


def check_string_or_bool(v: View) -> None:
    greater = v.one("GREATER")
    mask = greater.raw.outputs[0]
    _require(v.type_name(v.tensor(0, mask)) == "BOOL", "GREATER output is not bool")
    selects = [o for o in v.ops() if o.name in ("SELECT", "SELECT_V2")]
    _require(any(mask == o.raw.inputs[0] for o in selects), "no SELECT taking the bool mask")
    _require("BOOL" in _types(v, v.io(0, "outputs")), "no bool model output")


def _check_branches(v: View, name: str, fields: tuple[str, str]) -> None:
    op = v.one(name)
    targets = [getattr(op.raw.builtinOptions, f) for f in fields]
    count = len(v.model.subgraphs)
    _require(
        len(set(targets)) == 2 and all(0 < t < count for t in targets),
        f"{name} subgraph indices {targets} invalid for {count} subgraphs",
    )


def check_if_cond(v: View) -> None:
    _check_branches(v, "IF", ("thenSubgraphIndex", "elseSubgraphIndex"))


def check_while_loop(v: View) -> None:
    _check_branches(v, "WHILE", ("condSubgraphIndex", "bodySubgraphIndex"))


def check_resource_variables(v: View) -> None:
    main = {o.name for o in v.ops() if o.subgraph == 0}
    missing = {"CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"} - main
    _require(not missing, f"main subgraph lacks {sorted(missing)}")
    init = v.one("CALL_ONCE").raw.builtinOptions.initSubgraphIndex
    init_ops = {o.name for o in v.ops() if o.subgraph == init}
    _require("ASSIGN_VARIABLE" in init_ops, f"init subgraph {init} assigns nothing: {init_ops}")
    types = {v.type_name(t) for t in v.model.subgraphs[0].tensors}
    _require("RESOURCE" in types, "no RESOURCE tensor")


def check_multi_signature(v: View) -> None:
    sigs = {s.signatureKey.decode(): s.subgraphIndex for s in v.model.signatureDefs or []}
    _require(set(sigs) == {"encode", "decode"}, f"signatures {sorted(sigs)}")
    _require(len(set(sigs.values())) == 2, "both signatures share one subgraph")


def check_dynamic_batch(v: View) -> None:
    (x,) = v.io(0, "inputs")
    sig = None if x.shapeSignature is None else list(x.shapeSignature)
    _require(sig == [-1, 8] and list(x.shape) == [1, 8], f"input shape {list(x.shape)} sig {sig}")


def check_dynamic_audio(v: View) -> None:
    (x,) = v.io(0, "inputs")
    sig = None if x.shapeSignature is None else list(x.shapeSignature)
    _require(sig == [-1], f"input shape signature {sig}, want [-1]")


def check_lstm(v: View) -> None:
    op = v.one("UNIDIRECTIONAL_SEQUENCE_LSTM")
    states = [op.raw.inputs[i] for i in (18, 19)]  # activation state, cell state
    _require(
        all(i >= 0 and v.tensor(0, i).isVariable for i in states),
        "LSTM state inputs are not variable tensors",
    )


def check_keras3_lstm(v: View) -> None:
    v.one("WHILE")
    _require(not list(v.ops("UNIDIRECTIONAL_SEQUENCE_LSTM")), "Keras 3 LSTM got fused")


def _all(*names: str) -> Callable[[View], None]:
    def check(v: View) -> None:
        for name in names:
            v.one(name)

    return check


def _both(*checks: Callable[[View], None]) -> Callable[[View], None]:
    def check(v: View) -> None:
        for each in checks:
            each(v)

    return check


def check_deep_600_ops(v: View) -> None:
    count = len(list(v.ops()))
    _require(count > 600, f"only {count} ops")
    _require(len(list(v.ops("LOG_SOFTMAX"))) == 5, "expected 5 LOG_SOFTMAX ops")


def check_keras_gru(v: View) -> None:
    v.one("WHILE")
    _require(not list(v.ops("UNIDIRECTIONAL_SEQUENCE_RNN")), "GRU got fused")


def check_keras_conv1d_audio(v: View) -> None:
    (x,) = v.io(0, "inputs")
    sig = None if x.shapeSignature is None else list(x.shapeSignature)
    _require(sig == [1, -1, 1], f"input shape signature {sig}, want [1, -1, 1]")
    v.one("CONV_2D")


def check_keras_unet_int8(v: View) -> None:
    _check_full_integer(v, "INT8")
    op = v.one("TRANSPOSE_CONV")
    out = v.tensor(op.subgraph, op.raw.outputs[0])
    _require(v.type_name(out) == "INT8", "TRANSPOSE_CONV is not int8")
    v.one("CONCATENATION")


CHECKS: dict[str, Callable[[View], None]] = {
    "conv_dense": check_conv_dense,
    "fp16_weights": check_fp16_weights,
    "sparse_weights": check_sparse_weights,
    "dynamic_range_int8": check_dynamic_range_int8,
    "full_int8": check_full_int8,
    "full_uint8_io": check_full_uint8_io,
    "metadata": check_metadata,
    "custom_op": check_custom_op,
    "flex_op": check_flex_op,
    "gelu": _plain("GELU"),
    "log_softmax": _plain("LOG_SOFTMAX"),
    "pack_same_tensor": check_pack_same_tensor,
    "int64_argmax": check_int64_argmax,
    "rank1_output": check_rank1_output,
    "rank5": check_rank5,
    "string_or_bool": check_string_or_bool,
    "if_cond": check_if_cond,
    "while_loop": check_while_loop,
    "resource_variables": check_resource_variables,
    "multi_signature": check_multi_signature,
    "dynamic_batch": check_dynamic_batch,
    "dynamic_audio": check_dynamic_audio,
    "lstm": check_lstm,
    "keras3_lstm": check_keras3_lstm,
    "deep_600_ops": check_deep_600_ops,
    "keras_gru": check_keras_gru,
    "keras_bilinear_resize": _plain("RESIZE_BILINEAR"),
    "keras_conv2d_transpose": _plain("TRANSPOSE_CONV"),
    "keras_depth_to_space": _plain("DEPTH_TO_SPACE"),
    "keras_attention": _all("BATCH_MATMUL", "SOFTMAX", "RSQRT"),
    "keras_attention_fp16": _both(_all("BATCH_MATMUL", "SOFTMAX"), check_fp16_weights),
    "keras_attention_dynamic_range": _both(_all("BATCH_MATMUL"), check_dynamic_range_int8),
    "keras_transformer_mlp": _all("GELU", "FULLY_CONNECTED", "RSQRT"),
    "keras_mobilenet_block": _all("DEPTHWISE_CONV_2D", "CONV_2D", "ADD"),
    "keras_conv1d_audio": check_keras_conv1d_audio,
    "keras_unet_int8": check_keras_unet_int8,
}


def check(name: str, data: bytes) -> None:
    """Raise ``FeatureMissing`` unless model ``name`` (its bytes) has its feature."""
    CHECKS[name](View(data))


def check_streaming_kws(v: View) -> None:
    check_resource_variables(v)
    handles = [o for o in v.ops("VAR_HANDLE") if o.subgraph == 0]
    _require(len(handles) >= 2, f"expected 2 state variables, found {len(handles)} VAR_HANDLE")


CHECKS["streaming_kws"] = check_streaming_kws
