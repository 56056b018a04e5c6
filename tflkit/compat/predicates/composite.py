"""Ops that stand for a subgraph: LSTM kernels and StableHLO composites."""

from __future__ import annotations

from tflkit.compat.reasons import Reason, Rejection, reject
from tflkit.compat.signature import OpSignature


def lstm_kernel(sig: OpSignature) -> Rejection | None:
    basic = sig.option("kernelType", 0) == 1
    act = sig.option("fusedActivationFunction", 0)
    n_in, n_out = len(sig.inputs), len(sig.outputs)
    if basic:
        if n_in != 5 or n_out != 4:
            return reject(
                Reason.INPUT_COUNT, sig.op_type, "A basic LSTM needs 5 inputs, 4 outputs."
            )
        if act != 4:
            return reject(Reason.FUSED_ACTIVATION, sig.op_type, "A basic LSTM must use TANH.")
        if sig.option("cellClip", 0.0) or sig.option("projClip", 0.0):
            return reject(Reason.OPTIONS, sig.op_type, "cell_clip and proj_clip are unsupported.")
        return None
    if n_in not in (20, 24) or n_out != 1:
        return reject(
            Reason.INPUT_COUNT, sig.op_type, "A full LSTM needs 20 or 24 inputs, 1 output."
        )
    if act != 4:
        return reject(Reason.FUSED_ACTIVATION, sig.op_type, "The LSTM activation must be TANH.")
    return None


#: Composites LiteRT's GPU source has kernels for, on which LiteRT 2.3's accelerator dies with
#: SIGSEGV while compiling (measured on every graph of the LLM corpus, and on one
#: ``odml.rms_norm`` over a 6-op decomposition: ``tests/test_rule_composite.py``).
CRASHING_COMPOSITES = frozenset(
    {"odml.group_norm", "odml.rms_norm", "odml.scaled_dot_product_attention"}
)


def composite_name(sig: OpSignature) -> Rejection | None:
    name = sig.option("name", b"")
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    from tflkit.ir.composites import describe

    if name in CRASHING_COMPOSITES:
        return reject(
            Reason.CRASH,
            sig.op_type,
            f"The composite {describe(name)} kills it while compiling (measured on LiteRT 2.3: "
            "SIGSEGV, though LiteRT's source has a kernel for it); inlined, its decomposition "
            "runs on the GPU.",
            fatal=True,
        )
    what = describe(name) if name else "without a name (no StableHLOCompositeOptions)"
    return reject(
        Reason.UNSUPPORTED_OP,
        sig.op_type,
        f"The composite {what} has no GPU implementation; its decomposition subgraph runs on "
        "the CPU.",
    )
