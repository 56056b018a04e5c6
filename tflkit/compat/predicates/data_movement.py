"""Ops that move data: GATHER, EMBEDDING_LOOKUP, PACK, CONCATENATION, PAD, SELECT, ONE_HOT,
SPACE_TO_DEPTH/DEPTH_TO_SPACE."""

from __future__ import annotations

from dataclasses import replace

from tflkit.compat.predicates.activations import ACTIVATION_NAMES
from tflkit.compat.predicates.dtypes import FLOATS
from tflkit.compat.predicates.operands import no_output
from tflkit.compat.predicates.quantization import fp16_weights_operand
from tflkit.compat.predicates.shapes import axis_ok, fmt_shape
from tflkit.compat.reasons import Reason, Rejection, reject
from tflkit.compat.signature import OpSignature


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


def gather_classic(sig: OpSignature) -> Rejection | None:
    found = gather_operands(sig)
    if found is not None:
        return found
    data = sig.input(0)
    if data is not None and data.dtype == "INT32":
        return reject(Reason.DTYPE, sig.op_type, "The data input is INT32.", input_index=0)
    return None


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


def concat_fused_activation(sig: OpSignature) -> Rejection | None:
    """Measured (LiteRT 2.3, lavapipe): a CONCATENATION with any fused activation (RELU,
    RELU_N1_TO_1, RELU6, TANH), of 2-D or 4-D runtime inputs, fails the whole graph ("Failed to
    modify graph with delegate"), where the same op without it compiles. TFLite's CPU kernel
    refuses it too ("params->activation != kTfLiteActNone"): no runtime here runs it."""
    value = sig.option("fusedActivationFunction", 0)
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


def paddings_4x2_or_3x2(sig: OpSignature) -> Rejection | None:
    pads = sig.input(1)
    if pads is None:
        return reject(Reason.INPUT_COUNT, sig.op_type, "The paddings input is missing.")
    if pads.rank == 2 and pads.shape[1] == 2 and pads.shape[0] in (3, 4):
        return None
    return reject(
        Reason.SHAPE,
        sig.op_type,
        f"Paddings are {fmt_shape(pads.shape)}; the delegate pads 3-D or 4-D tensors only "
        "(paddings 3x2 or 4x2).",
        input_index=1,
    )


def mirror_pad_reflect(sig: OpSignature) -> Rejection | None:
    if sig.op_type != "MIRROR_PAD" or sig.option("mode", 0) == 0:
        return None
    return reject(Reason.OPTIONS, sig.op_type, "Only REFLECT padding is supported, not SYMMETRIC.")


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


def select_classic(sig: OpSignature) -> Rejection | None:
    found = select_operands(sig)
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


def one_hot_classic(sig: OpSignature) -> Rejection | None:
    indices = sig.input(0)
    if indices is None or indices.rank == 0:
        return None
    axis = sig.option("axis", -1)
    if axis not in (-1, indices.shape[-1]):
        return reject(Reason.OPTIONS, sig.op_type, f"axis is {axis}.")
    return one_hot_layout(replace(sig, option_fields={"axis": -1}))


def block_size_above_one(sig: OpSignature) -> Rejection | None:
    size = sig.option("blockSize", 0)
    if size > 1:
        return None
    return reject(Reason.OPTIONS, sig.op_type, f"block_size is {size}; it must be more than 1.")
