"""Quantized tensors and fp16 weights (a DEQUANTIZE of a FLOAT16 constant): what the delegate
reads, and what it reads wrong."""

from __future__ import annotations

from collections.abc import Mapping

from tflkit.compat.reasons import Reason, Rejection, reject
from tflkit.compat.signature import OpSignature

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
