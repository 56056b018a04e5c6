"""Fix dynamic dimensions to concrete shapes (the GPU delegate needs static shapes).

The user gives each dynamic input's shape (``--input-shape``, parsed and matched to inputs by
:mod:`tflkit.ir.shapes`); the CPU interpreter propagates them through the
graph (its shape inference is the runtime's own), and every tensor of the main subgraph gets
the static shape it computed. A dynamic batch stored as 1 (most Keras exports: shape signature
``[-1, ...]``, shape ``[1, ...]``) needs no telling: ``rewrite`` fixes it to 1 by default
(:func:`default_input_shapes`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tflkit import ir
from tflkit.compat.check import DynamicInput, dynamic_input_advice
from tflkit.compat.check import dynamic_inputs as entry_dynamic_inputs
from tflkit.errors import UsageError
from tflkit.ir.graph import Model, Tensor
from tflkit.ir.shapes import resolve_input_shapes

__all__ = [
    "DynamicInput",
    "default_input_shapes",
    "dynamic_input_advice",
    "dynamic_inputs",
    "entry_dynamic_inputs",
    "fix_input_shapes",
]


def dynamic_inputs(model: Model) -> list[Tensor]:
    """Inputs of the main subgraph whose shape signature has a -1 (the same inputs by
    signature name, with their stored shapes: :func:`entry_dynamic_inputs`)."""
    return [t for t in model.main.inputs if t.is_dynamic]


def default_input_shapes(
    model: Model, given: Mapping[str, Sequence[int]] | None = None
) -> dict[str, list[int]]:
    """The shapes ``rewrite`` fixes without being told: when every dynamic input that ``given``
    (``--input-shape``) leaves open is a batch stored as 1 with its other dims static, each at
    its stored shape; otherwise none (fixing only some would freeze the others' placeholder
    sizes into the tensors downstream of them)."""
    covered = {id(r.tensor) for r in resolve_input_shapes(model, given)} if given else set()
    rest = [d for d in entry_dynamic_inputs(model) if id(d.tensor) not in covered]
    if not rest or not all(d.batch_only for d in rest):
        return {}
    return {d.name: list(d.stored) for d in rest}


def fix_input_shapes(model: Model, shapes: Mapping[str, Sequence[int]]) -> list[str]:
    """Give the named inputs static shapes and propagate them; returns the tensors changed.

    Shapes the runtime computes only while it runs (TFLite's dynamic tensors: a RESHAPE fed by
    SHAPE arithmetic, a RANGE) are read after two invocations on different inputs; a tensor
    whose shape differs between them depends on the data and stays dynamic.
    """
    targets = {id(r.tensor): list(r.shape) for r in resolve_input_shapes(model, shapes)}
    graph = model.main
    spec = ", ".join(f"{name}={','.join(map(str, dims))}" for name, dims in shapes.items())
    try:
        first, second = (_computed_shapes(model, targets, seed) for seed in (None, 0))
    except (RuntimeError, ValueError) as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        raise UsageError(
            f"the model does not run with --input-shape {spec}: {lines[0] if lines else exc}"
        ) from None
    computed = {i: dims for i, dims in first.items() if second.get(i) == dims}
    changed = []
    for index, tensor in enumerate(graph.tensors):
        dims = computed.get(index)
        if dims is None or tensor.is_constant:
            continue
        if tensor.is_dynamic or list(tensor.shape) != dims:
            tensor.shape = tuple(dims)
            tensor.shape_signature = None
            changed.append(tensor.name)
    return changed


def _computed_shapes(
    model: Model, targets: dict[int, list[int]], seed: int | None
) -> dict[int, list[int]]:
    """Tensor index -> shape after one CPU invocation (zeros, or seeded values) at ``targets``."""
    from tflkit.delegates.litert_cpu import computed_shapes

    shapes = {t.index: targets[id(t)] for t in model.main.inputs if id(t) in targets}
    fill = "zeros" if seed is None else "random"
    return computed_shapes(ir.dumps(model), shapes, fill=fill, seed=seed or 0)
