"""What a hybrid (dynamic-range) model means, and the proof of rewrites that leave its CPU
hybrid kernels: a rewrite that turns hybrid ops into float ops is right when the CPU's output
moves toward that meaning, not away.

A hybrid op (float activations, int8 constant weights read directly) means the float op with
its weights dequantized; LiteRT's CPU hybrid kernel also rounds the activations to int8 on the
fly, and the GPU does not. On one op that rounding moves the output by at most 0.011 of its
peak (``bench/int8_weights.py``), but in a trained network it adds up through the layers:
``tests/int8_trained_models.py`` (a small CNN trained with TensorFlow, batch-norm scales
spanning a decade across channels, a softmax head, converted with dynamic-range quantization)
moves the softmax by up to 0.022 of its peak between the hybrid CPU model and its meaning
(every hybrid op's weights as float32), and rewriting its three strided 1x1 CONV_2D ops moves
it by up to 0.026 of the peak: beyond the bound of one op's rounding, while the rewritten model
sits at most 0.003 of the peak from the meaning (seeds 0 and 1; five variants of spread and
logit scale measured 0.005-0.039, 0.006-0.036 and 0.002-0.010 of the peak;
``tests/test_int8_trained.py`` prints them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from tflkit import ir
from tflkit.ir import schema
from tflkit.ir.graph import Op
from tflkit.rewriter.contract import Contract
from tflkit.rewriter.verify import OutputCheck, Verification, compare, first_line, run_cpu

if TYPE_CHECKING:
    import numpy as np

__all__ = ["closer_to_meaning", "float_meaning", "is_hybrid"]

#: Measures the differences; whether an output holds is the meaning's call.
_MEASURED = Contract(float("inf"), 0.0, "measured")


def is_hybrid(op: Op) -> bool:
    """Float activations and int8 constant weights with scales, read directly by the op."""
    if len(op.inputs) < 2 or op.inputs[0] is None or op.inputs[1] is None:
        return False
    data, weights = op.inputs[0], op.inputs[1]
    return (
        data.type == schema.TensorType.FLOAT32
        and not data.is_quantized
        and weights.type == schema.TensorType.INT8
        and weights.is_constant
        and weights.sparsity is None
        and weights.quant_params is not None
    )


def float_meaning(data: bytes, select: Callable[[Op], bool] = is_hybrid) -> bytes:
    """``data`` with the int8 weights of every op ``select`` picks dequantized to a float32
    constant (the float op, version 1): what those ops compute when computed without the
    hybrid kernel's rounding."""
    import numpy as np

    model = ir.load(data)
    for subgraph in model.subgraphs:
        for op in subgraph.ops:
            if not select(op):
                continue
            weights = op.inputs[1]
            params = weights.quant_params
            assert params is not None
            values = params.dequantize(weights.data).astype(np.float32)
            op.set_input(1, subgraph.add_constant(values, f"{weights.name}/float32"))
            op.opcode = dataclasses.replace(op.opcode, version=1)
    return ir.dumps(model)


def closer_to_meaning(
    original: bytes, rewritten: bytes, seeds: Sequence[int], direct: Verification
) -> Verification:
    """The proof when ``direct`` (the rewritten model against the original, within one op's
    rounding) failed: on each seed, every output of the rewritten model is no farther from the
    original's meaning (:func:`float_meaning`) than the original's own output is. The output
    checks keep the rewritten-vs-original differences."""
    meaning = float_meaning(original)
    verdict = Verification(
        True,
        f"{direct.contract}, or no farther from the original's meaning (its int8 weights as "
        "float32) than the original's CPU hybrid kernels are",
        list(seeds),
        False,
    )
    worst: dict[str, OutputCheck] = {}
    for seed in seeds:
        try:
            fed, old = run_cpu(original, seed=seed)
            _, new = run_cpu(rewritten, fed)
            _, meant = run_cpu(meaning, fed)
        except (RuntimeError, ValueError) as exc:
            return dataclasses.replace(direct, problem=f"{direct.problem}; {first_line(exc)}")
        for name, value in old.items():
            check = compare(name, value, new[name], _MEASURED)
            farther = _distance(new[name], meant[name]) - _distance(value, meant[name])
            check.ok = bool(farther <= 0.0)
            previous = worst.get(name)
            if previous is None or (previous.ok, -previous.max_abs) > (check.ok, -check.max_abs):
                worst[name] = check
            if not check.ok:
                verdict.problem = (
                    f"output {name} (seed {seed}): the rewritten model is {farther:.3g} farther "
                    "from the original's meaning than the original; "
                    f"{direct.problem}"
                )
    verdict.outputs = list(worst.values())
    verdict.ok = all(c.ok for c in verdict.outputs)
    return verdict


def _distance(a: np.ndarray, b: np.ndarray) -> float:
    import numpy as np

    diff = np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))
    return float(np.nanmax(diff)) if diff.size else 0.0
