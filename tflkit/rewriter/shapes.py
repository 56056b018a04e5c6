"""Fix dynamic dimensions to concrete shapes (the GPU delegate needs static shapes).

The user gives each dynamic input's shape (``--input-shape``, parsed and matched to inputs by
:mod:`tflkit.ir.shapes`); the CPU interpreter propagates them through the
graph (its shape inference is the runtime's own), and every tensor of the main subgraph gets
the static shape it computed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tflkit import ir
from tflkit.errors import UsageError
from tflkit.ir.graph import Model, Tensor
from tflkit.ir.shapes import resolve_input_shapes


def dynamic_inputs(model: Model) -> list[Tensor]:
    """Inputs of the main subgraph whose shape signature has a -1."""
    return [t for t in model.main.inputs if t.is_dynamic]


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
