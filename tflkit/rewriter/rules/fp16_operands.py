"""SELECT / SELECT_V2, CONCATENATION, PACK and ONE_HOT reading fp16 weights through a
DEQUANTIZE, in a form the GPU computes right.

An fp16 model (``converter.target_spec.supported_types = [tf.float16]``) stores every float
constant as FLOAT16 behind a DEQUANTIZE, the constant operands of these ops included (BirdNET
2.4's metadata model: ``SELECT_V2(lat > 0, 1.0, 0.0)``; a positional table concatenated to
features). The GPU accelerator reads such weights directly: TFLite's
``FP16GraphPartitionHelper`` points every delegated op's input at the fp16 constant, in partly
delegated graphs too. In fp32 (``enforce_f32``), LiteRT 2.3 then generates a SELECT,
CONCATENATION or PACK shader that loads the fp16 operand into an f32 variable (``var true_val :
vec4<f32> = vec4<f16>(...)``); WebGPU rejects it ("Error while parsing WGSL"), the op never runs
and its output holds whatever the buffer held (another tensor's values, or zeros). ONE_HOT reads
an fp16 on/off scalar's bits as a float32 (fp32) or zeros (fp16). No error reaches the app.
float32 constants are right in both precisions (measured: the table's ``WRONG_RESULT``,
``fp16_weights_operand`` in ``compat/predicates/quantization.py``, whose operand table this rule
reads).

The rewrite reads the same values as a float32 constant: widening fp16 to fp32 is exact (as
the CPU's DEQUANTIZE kernel does it), ``inf`` and NaN included, so the result is bit-identical.
The DEQUANTIZE stays for its other readers, or goes when the op was its only one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tflkit.compat.predicates.quantization import FP16_WEIGHTS_WRONG, fp16_weights_positions
from tflkit.compat.reasons import Reason
from tflkit.ir import schema
from tflkit.ir.graph import Model, Op, Tensor
from tflkit.rewriter.example import graph_model, options, scale
from tflkit.rewriter.rule import Example, Match, OpRewrite, replace, well_formed
from tflkit.rewriter.rules.constant import FOLD_MAX_BYTES

if TYPE_CHECKING:
    import numpy as np

    from tflkit.ir.builder import OpBuilder

#: Inputs each op must have for the rule to look at it.
_REQUIRED = {"SELECT": (0, 1, 2), "SELECT_V2": (0, 1, 2), "ONE_HOT": (0, 1, 2, 3)}


def fp16_weights(tensor: Tensor | None) -> bool:
    """``tensor`` is the output of a DEQUANTIZE of a FLOAT16 constant (fp16 weights)."""
    producer = tensor.producer if tensor is not None else None
    if producer is None or producer.type != "DEQUANTIZE" or not producer.inputs:
        return False
    src = producer.inputs[0]
    return src is not None and src.type == schema.TensorType.FLOAT16 and src.is_constant


class Fp16ConstantOperands(OpRewrite):
    name = "fp16_constant_operands"
    summary = (
        "SELECT/SELECT_V2 then/else, CONCATENATION/PACK inputs and ONE_HOT on/off values "
        "reading fp16 weights through a DEQUANTIZE -> the same op reading them as a float32 "
        "constant (LiteRT 2.3's fp32 GPU shader for them does not compile and the op writes "
        "nothing; ONE_HOT reads the fp16 bits as float32)"
    )
    fixes = tuple(sorted(FP16_WEIGHTS_WRONG))
    codes = (Reason.WRONG_RESULT,)
    reasons = ("computes wrong values",)

    def pattern(self, op: Op) -> bool:
        if op.type not in self.fixes or not well_formed(op, _REQUIRED.get(op.type, (0,)), 1):
            return False
        return bool(_operands(op))

    def match(self, op: Op) -> Match:
        if op.outputs[0].type != schema.TensorType.FLOAT32:
            return Match.fail("its output is not float32")
        sources = {id(s): s for s in (_source(op.inputs[i]) for i in _operands(op))}.values()
        if any(s.sparsity is not None or s.data is None for s in sources):
            return Match.fail("its fp16 weights are sparse (fold_densify first)")
        added = sum(s.data.size * 4 for s in sources)
        if added > FOLD_MAX_BYTES:
            return Match.fail(
                f"a float32 copy of its fp16 operands would add {added} bytes "
                f"(bound {FOLD_MAX_BYTES}, as for fold_constants)"
            )
        return Match(op)

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        import numpy as np

        op = match.op
        inputs: list[Tensor | None] = list(op.inputs)
        copies: dict[int, Tensor] = {}  # one copy when two operands are one tensor
        for i in _operands(op):
            source = _source(op.inputs[i])
            if id(source) not in copies:
                copies[id(source)] = b.const(
                    source.data.astype(np.float32), f"{source.name}/float32"
                )
            inputs[i] = copies[id(source)]
        out = op.outputs[0]
        new = b.op(
            op.type,
            inputs,
            options=op.options,
            shape=list(out.shape),
            dtype=out.type,
            version=op.version,
            name=op.type.lower(),
        )
        replace(op, [new])

    def examples(self) -> tuple[Example, ...]:
        fp16 = "the fp16 weights stay fp16 (no int8 DEQUANTIZE of them)"
        return (
            Example("birdnet_scalar_flags", _birdnet_flags, no_int8=fp16),
            Example("full_shape_else", _full_shape_else, no_int8=fp16),
            Example("select_v1_both", _select_v1_both, no_int8=fp16),
            Example("concat_positional_table", _concat_table, no_int8=fp16),
            Example("pack_with_bias_plane", _pack_plane, no_int8=fp16),
            Example("one_hot_fp16_on_off", _one_hot, no_int8=fp16),
        )


def _operands(op: Op) -> list[int]:
    """The operands of ``op`` the accelerator reads wrong that are fp16 weights."""
    return [i for i in fp16_weights_positions(op.type, len(op.inputs)) if _is_fp16(op, i)]


def _is_fp16(op: Op, index: int) -> bool:
    return index < len(op.inputs) and fp16_weights(op.inputs[index])


def _source(tensor: Tensor) -> Tensor:
    """The FLOAT16 constant behind the DEQUANTIZE that produces ``tensor``."""
    producer = tensor.producer
    assert producer is not None and producer.inputs[0] is not None
    return producer.inputs[0]


# --- examples -------------------------------------------------------------------------------


def _fp16(b: OpBuilder, value: np.ndarray | float, name: str) -> Tensor:
    """``value`` stored as fp16 weights: a FLOAT16 constant behind a DEQUANTIZE."""
    import numpy as np

    half = b.const(np.asarray(value, np.float16), f"{name}_fp16")
    return b.DEQUANTIZE(half, shape=list(half.shape), dtype=np.float32, name=name)


def _birdnet_flags() -> Model:
    """BirdNET 2.4's metadata model: ``SELECT_V2(lat > 0, 1.0, 0.0)`` with both scalars fp16
    weights, the 0.0 shared with the comparison."""
    import numpy as np

    def body(b: OpBuilder, lat: Tensor) -> Tensor:
        zero, one = _fp16(b, 0.0, "zero"), _fp16(b, 1.0, "one")
        north = b.GREATER(scale(b, lat), zero, dtype=np.bool_, name="north")
        return scale(b, b.SELECT_V2(north, one, zero, shape=[1, 8], dtype=np.float32))

    return graph_model([((1, 8), np.float32)], body)


def _full_shape_else() -> Model:
    """``where(x > 0, x, fill)`` with an output-shaped fp16 fill (a mask's large negatives)."""
    import numpy as np

    fill = -np.linspace(1.0, 1e4, 64, dtype=np.float32).reshape(1, 2, 4, 8)

    def body(b: OpBuilder, x: Tensor) -> Tensor:
        x = scale(b, x)
        keep = b.GREATER(x, np.array(0.0, np.float32), dtype=np.bool_, name="keep")
        return scale(b, b.SELECT_V2(keep, x, _fp16(b, fill, "fill"), dtype=np.float32))

    return graph_model([((1, 2, 4, 8), np.float32)], body)


def _select_v1_both() -> Model:
    """SELECT (v1) choosing between two output-shaped fp16 tables."""
    import numpy as np

    low = np.arange(8, dtype=np.float32).reshape(2, 4) - 20.5
    high = np.arange(8, dtype=np.float32).reshape(2, 4) + 3.25

    def body(b: OpBuilder, x: Tensor) -> Tensor:
        below = b.LESS(scale(b, x), np.array(0.0, np.float32), dtype=np.bool_, name="below")
        table = b.SELECT(below, _fp16(b, low, "low"), _fp16(b, high, "high"), dtype=np.float32)
        return scale(b, table)

    return graph_model([((2, 4), np.float32)], body)


def _concat_table() -> Model:
    """Features concatenated with an fp16 positional table on the channels."""
    import numpy as np

    table = np.linspace(-3.0, 5.0, 48, dtype=np.float32).reshape(1, 2, 4, 6)

    def body(b: OpBuilder, x: Tensor) -> Tensor:
        joined = b.CONCATENATION(
            scale(b, x),
            _fp16(b, table, "positions"),
            options=options("ConcatenationOptions", axis=3),
            shape=[1, 2, 4, 14],
            dtype=np.float32,
        )
        return scale(b, joined)

    return graph_model([((1, 2, 4, 8), np.float32)], body)


def _pack_plane() -> Model:
    """A runtime plane stacked with an fp16 bias plane (the weights first)."""
    import numpy as np

    plane = np.arange(12, dtype=np.float32).reshape(3, 4) * 0.75 - 4.0

    def body(b: OpBuilder, x: Tensor) -> Tensor:
        stacked = b.PACK(
            _fp16(b, plane, "bias_plane"),
            scale(b, x),
            options=options("PackOptions", valuesCount=2, axis=0),
            shape=[2, 3, 4],
            dtype=np.float32,
        )
        return scale(b, stacked)

    return graph_model([((3, 4), np.float32)], body)


def _one_hot() -> Model:
    """``one_hot(ids, 8, on=5, off=-2)`` with fp16 on/off values."""
    import numpy as np

    def body(b: OpBuilder, ids: Tensor) -> Tensor:
        hot = b.ONE_HOT(
            ids,
            np.array(8, np.int32),
            _fp16(b, 5.0, "on"),
            _fp16(b, -2.0, "off"),
            options=options("OneHotOptions", axis=-1),
            shape=[1, 3, 8],
            dtype=np.float32,
        )
        return scale(b, hot)

    return graph_model([((1, 3), np.int32)], body)
