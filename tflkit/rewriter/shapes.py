"""The input shapes ``rewrite`` fixes without being told.

Fixing shapes is an IR operation (:func:`tflkit.ir.shapes.fix_input_shapes`, with the user's
``--input-shape``). A dynamic batch stored as 1 (most Keras exports: shape signature
``[-1, ...]``, shape ``[1, ...]``) needs no telling: ``rewrite`` fixes it to 1 by default
(:func:`default_input_shapes`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tflkit.compat.check import dynamic_inputs
from tflkit.ir.graph import Model
from tflkit.ir.shapes import resolve_input_shapes

__all__ = ["default_input_shapes"]


def default_input_shapes(
    model: Model, given: Mapping[str, Sequence[int]] | None = None
) -> dict[str, list[int]]:
    """The shapes ``rewrite`` fixes without being told: when every dynamic input that ``given``
    (``--input-shape``) leaves open is a batch stored as 1 with its other dims static, each at
    its stored shape; otherwise none (fixing only some would freeze the others' placeholder
    sizes into the tensors downstream of them)."""
    covered = {id(r.tensor) for r in resolve_input_shapes(model, given)} if given else set()
    rest = [d for d in dynamic_inputs(model) if id(d.tensor) not in covered]
    if not rest or not all(d.batch_only for d in rest):
        return {}
    return {d.name: list(d.stored) for d in rest}
