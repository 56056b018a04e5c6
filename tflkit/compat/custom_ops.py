"""Custom ops tflkit knows by name: the ones the standard op resolvers register, and the Edge
TPU's compiled network.

Measured on ai-edge-litert 2.3: the ``Interpreter`` prepares ``TFLite_Detection_PostProcess``,
``Mfcc``, ``AudioSpectrogram`` and ``NumericVerify`` (a model holding one loads and runs; TFLite's
``BuiltinOpResolver`` adds them with ``AddCustom``), while ``edgetpu-custom-op`` and any other
custom op are "unresolved". The GPU accelerator has no kernel for them: it leaves such an op to
the CPU (its log: ``CUSTOM TFLite_Detection_PostProcess: TFLite_Detection_PostProcess``) and
compiles the rest of the model; a model holding only one compiles with 0 ops on the GPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tflkit.compat.reasons import Reason, Rejection, reject
from tflkit.errors import UsageError

if TYPE_CHECKING:
    from tflkit.ir import Model

__all__ = [
    "CPU_KERNEL_CUSTOM_OPS",
    "EDGETPU_OP",
    "EDGETPU_SENTENCE",
    "known_custom",
    "refuse_edgetpu",
]

#: Custom op name -> what it does; the standard op resolvers register a CPU kernel for each.
CPU_KERNEL_CUSTOM_OPS: dict[str, str] = {
    "TFLite_Detection_PostProcess": "an SSD detector's box decoding and non-max suppression",
    "Mfcc": "MFCC features of a spectrogram",
    "AudioSpectrogram": "a spectrogram of audio samples",
    "NumericVerify": "a debugging comparison of a quantized tensor with its float twin",
}
EDGETPU_OP = "edgetpu-custom-op"
#: What a model with ``edgetpu-custom-op`` is, said once.
EDGETPU_SENTENCE = (
    "This model is compiled for the Edge TPU (edgetpu_compiler): its edgetpu-custom-op holds the "
    "network as Edge TPU machine code, which only the Edge TPU delegate (libedgetpu) runs. For "
    "the GPU, use the model from before Edge TPU compilation (the quantized .tflite given to "
    "edgetpu_compiler)."
)


def known_custom(code: str, op: str) -> Rejection | None:
    """The rejection of a custom op tflkit knows by name, else None."""
    if code in CPU_KERNEL_CUSTOM_OPS:
        detail = (
            f"It computes {CPU_KERNEL_CUSTOM_OPS[code]}; the standard op resolver registers its "
            "CPU kernel, so the model loads and this op runs on the CPU beside the GPU part."
        )
        return reject(Reason.CUSTOM_OP, op, detail)
    if code == EDGETPU_OP:
        return reject(Reason.CUSTOM_OP, op, EDGETPU_SENTENCE, fatal=True)
    return None


def refuse_edgetpu(model: Model, label: str) -> None:
    """Raise :class:`UsageError` (one line, exit 2) for a model compiled for the Edge TPU: no
    runner here can run it (no CPU kernel, no GPU kernel), so there is nothing to compare."""
    if any(op.opcode.is_custom and op.opcode.custom_code == EDGETPU_OP for op in model.iter_ops()):
        raise UsageError(f"{label}: cannot validate: {EDGETPU_SENTENCE}")
