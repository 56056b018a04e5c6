"""Why the GPU delegate will not take an op: stable reason codes and the sentence for each.

Codes are part of tflkit's output (JSON reports, CI baselines): never rename one, only add.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Reason(StrEnum):
    """A stable code for one kind of GPU incompatibility."""

    UNSUPPORTED_OP = "UNSUPPORTED_OP"
    OP_VERSION = "OP_VERSION"
    DTYPE = "DTYPE"
    RANK = "RANK"
    DYNAMIC_SHAPE = "DYNAMIC_SHAPE"
    DYNAMIC_INPUT = "DYNAMIC_INPUT"
    NON_CONST_INPUT = "NON_CONST_INPUT"
    CONST_INPUT = "CONST_INPUT"
    INPUT_COUNT = "INPUT_COUNT"
    FUSED_ACTIVATION = "FUSED_ACTIVATION"
    BROADCAST = "BROADCAST"
    OPTIONS = "OPTIONS"
    SHAPE = "SHAPE"
    QUANTIZATION = "QUANTIZATION"
    CUSTOM_OP = "CUSTOM_OP"
    FLEX_OP = "FLEX_OP"
    CONTROL_FLOW = "CONTROL_FLOW"
    RESOURCE_VARIABLE = "RESOURCE_VARIABLE"
    FP16_DEQUANTIZE = "FP16_DEQUANTIZE"
    KERNEL_FAILURE = "KERNEL_FAILURE"
    CRASH = "CRASH"
    VARIABLE_TENSOR = "VARIABLE_TENSOR"
    WRONG_RESULT = "WRONG_RESULT"
    CPU_WRONG_RESULT = "CPU_WRONG_RESULT"


#: One sentence per code; ``{op}`` is the op type. Specifics follow as a detail sentence.
TEMPLATES: dict[Reason, str] = {
    Reason.UNSUPPORTED_OP: "{op} has no GPU kernel, so it runs on the CPU.",
    Reason.OP_VERSION: "This version of {op} is newer than the GPU delegate accepts.",
    Reason.DTYPE: "{op} reads or writes a tensor type the GPU delegate does not take here.",
    Reason.RANK: "{op} uses a tensor with more than 4 dimensions; the GPU works on 4-D tensors.",
    Reason.DYNAMIC_SHAPE: (
        "{op} computes its output shape from runtime data; the GPU delegate needs static "
        "shapes, so GPU compilation of this graph fails as a whole."
    ),
    Reason.DYNAMIC_INPUT: (
        "A graph input of {op}'s graph has a dynamic dimension; the GPU runs it at the shape "
        "stored in the file and cannot be resized later."
    ),
    Reason.NON_CONST_INPUT: "{op} needs this input (weights, axes, shape...) to be a constant.",
    Reason.CONST_INPUT: "{op} needs this input to be computed at runtime, not a constant.",
    Reason.INPUT_COUNT: "{op} has a number of inputs or outputs the GPU delegate does not take.",
    Reason.FUSED_ACTIVATION: "{op} has a fused activation the GPU delegate does not implement.",
    Reason.BROADCAST: "{op} broadcasts its inputs in a way the GPU delegate does not support.",
    Reason.OPTIONS: "{op} uses an option value the GPU delegate does not support.",
    Reason.SHAPE: "{op} has tensor shapes or parameters the GPU delegate does not support.",
    Reason.QUANTIZATION: "{op} uses a quantization the GPU delegate does not take.",
    Reason.CUSTOM_OP: "{op} is a custom op with no GPU implementation.",
    Reason.FLEX_OP: (
        "{op} is a TensorFlow (Flex) op: no GPU kernel, and it needs the Flex delegate on CPU."
    ),
    Reason.CONTROL_FLOW: "{op} is control flow, which the GPU delegate does not execute.",
    Reason.RESOURCE_VARIABLE: "{op} works on resource variables, which stay on the CPU.",
    Reason.FP16_DEQUANTIZE: (
        "{op} expands fp16 weights; the GPU absorbs it only when the whole graph is delegated, "
        "so here it stays on the CPU."
    ),
    Reason.KERNEL_FAILURE: (
        "{op} passes the delegate's checks but its GPU kernel fails to build, which aborts GPU "
        "compilation of the whole graph."
    ),
    Reason.CRASH: "{op} in this form aborts the GPU accelerator (the process dies).",
    Reason.VARIABLE_TENSOR: (
        "{op} keeps state in a variable tensor; this runtime refuses to load such models."
    ),
    Reason.WRONG_RESULT: "{op} in this form runs on the GPU but computes wrong values there.",
    Reason.CPU_WRONG_RESULT: (
        "{op} in this form is computed wrong by LiteRT's CPU kernels (not the GPU), the "
        "baseline validate compares against."
    ),
}


@dataclass(frozen=True)
class Rejection:
    """One reason an op stays off the GPU.

    ``op_index`` is the op's position in its subgraph (None until attached to an op),
    ``input_index`` the offending input when there is one. ``fatal`` marks rejections that
    make GPU compilation fail for the whole graph instead of leaving one op on the CPU.
    """

    code: Reason
    message: str
    op_index: int | None = None
    input_index: int | None = None
    fatal: bool = False

    def to_dict(self) -> dict[str, object]:
        return {
            "code": str(self.code),
            "message": self.message,
            "op_index": self.op_index,
            "input_index": self.input_index,
            "fatal": self.fatal,
        }


def reject(
    code: Reason,
    op: str,
    detail: str = "",
    *,
    input_index: int | None = None,
    fatal: bool = False,
) -> Rejection:
    """A ``Rejection`` whose message is the code's sentence followed by ``detail``."""
    message = TEMPLATES[code].format(op=op)
    if detail:
        message = f"{message} {detail}"
    return Rejection(code, message, None, input_index, fatal)
