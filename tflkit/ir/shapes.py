"""``--input-shape NAME=D1,D2,...``: the one parser, and the one place its names meet a model.

Every command that takes ``--input-shape`` (``check``, ``rewrite``, ``validate``, ``convert``)
parses it with :func:`parse_input_shapes`. For a ``.tflite`` model, :func:`resolve_input_shapes`
accepts both names a user sees for an input: the signature's input name (``input``) and the
tensor name (``serving_default_input:0``), and checks that the shape fits the input's rank and
fixed dimensions. ``convert`` resolves names against the source framework's inputs instead
(``converters/_input_shapes.py``, the same rules in the converters' workers).

``--input-shape '*=N'`` (:data:`WILDCARD`) fixes every dynamic dimension of every input that no
other ``--input-shape`` names to ``N`` at once (a model with 85 dynamic inputs takes one flag).

:func:`fix_input_shapes` gives the named inputs those shapes and propagates them through the graph
(the GPU delegate needs static shapes). The propagation is the runtime's own shape inference,
handed in by the caller (``tflkit.delegates.litert_cpu.computed_shapes``): the IR starts no
interpreter and imports no runner.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from tflkit import ir
from tflkit.errors import UsageError

__all__ = [
    "WILDCARD",
    "ResolvedShape",
    "ShapeInference",
    "by_feed_name",
    "by_tensor_name",
    "dynamic_input_tensors",
    "fix_input_shapes",
    "parse_input_shapes",
    "resolve_input_shapes",
]

Shapes = Mapping[str, Sequence[int]]
#: ``--input-shape '*=N'``: every dynamic dimension the other entries leave open becomes N.
WILDCARD = "*"


def parse_input_shapes(items: Sequence[str] | None) -> dict[str, tuple[int, ...]]:
    """``["input=1,1280"]`` -> ``{"input": (1, 1280)}``; every dimension a positive integer.

    The name is everything before the last ``=`` (tensor names may hold ``:`` or ``/``);
    ``*=N`` (one number) stands for every dynamic dimension the other entries leave open.
    """
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items or ():
        name, sep, dims = item.rpartition("=")
        try:
            if not sep or not name.strip() or not dims.strip():
                raise ValueError
            shape = tuple(int(d) for d in dims.split(","))
        except ValueError:
            raise UsageError(
                f"--input-shape takes NAME=D1,D2,... (e.g. input=1,224,224,3), got {item!r}"
            ) from None
        if any(d < 1 for d in shape):
            raise UsageError(f"--input-shape {item!r}: every dimension must be at least 1")
        name = name.strip()
        if name == WILDCARD and len(shape) != 1:
            raise UsageError(
                f"--input-shape {item!r}: '*=N' takes one number, the size of every dynamic "
                "dimension (e.g. '*=1')"
            )
        if name in shapes:
            raise UsageError(f"--input-shape gives {name!r} twice")
        shapes[name] = shape
    return shapes


@dataclass(frozen=True)
class ResolvedShape:
    """One ``--input-shape`` matched to a model input."""

    given: str  # the name as the user wrote it
    feed: str  # the entry point's name for the input (signature name, else tensor name)
    tensor: ir.Tensor
    shape: tuple[int, ...]


def _entry_inputs(model: ir.Model, signature: str | None) -> dict[str, ir.Tensor]:
    """Feed name -> tensor of the entry point (a signature, else the main subgraph)."""
    if model.signatures:
        if signature is None:
            chosen = next((s for s in model.signatures if s.subgraph is model.main), None)
            chosen = chosen or model.signatures[0]
        else:
            try:
                chosen = model.signature(signature)
            except KeyError as exc:
                raise UsageError(str(exc.args[0])) from None
        return dict(chosen.inputs)
    return {t.name: t for t in model.main.inputs}


def resolve_input_shapes(
    model: ir.Model, shapes: Shapes | None, signature: str | None = None
) -> list[ResolvedShape]:
    """Match each name of ``shapes`` to an input by signature name or tensor name, and check
    that the shape fits the input (same rank, same value wherever the model fixes a dim)."""
    inputs = _entry_inputs(model, signature)
    by_tensor = {tensor.name: feed for feed, tensor in inputs.items()}
    resolved: list[ResolvedShape] = []
    seen: dict[int, str] = {}
    named = {k: v for k, v in (shapes or {}).items() if k != WILDCARD}
    for name, dims in named.items():
        feed = name if name in inputs else by_tensor.get(name)
        if feed is None:
            names = ", ".join(
                f"{f} (tensor {t.name})" if f != t.name else f for f, t in inputs.items()
            )
            raise UsageError(
                f"--input-shape names {name!r}, which is not a model input; inputs: {names}"
            )
        tensor = inputs[feed]
        if id(tensor) in seen:
            first = seen[id(tensor)]
            raise UsageError(f"--input-shape gives input {feed!r} twice ({first}, {name})")
        seen[id(tensor)] = name
        shape = tuple(int(d) for d in dims)
        stored = tuple(tensor.shape_signature or tensor.shape)
        if len(shape) != len(stored) or any(
            s >= 0 and s != d for s, d in zip(stored, shape, strict=True)
        ):
            shown = "x".join(str(d) for d in tensor.display_shape)
            raise UsageError(
                f"--input-shape {name}={','.join(map(str, shape))} does not fit the input's "
                f"shape {shown}"
            )
        resolved.append(ResolvedShape(name, feed, tensor, shape))
    fill = (shapes or {}).get(WILDCARD)
    if fill:
        resolved += [
            ResolvedShape(WILDCARD, feed, tensor, _filled(tensor, int(fill[0])))
            for feed, tensor in inputs.items()
            if id(tensor) not in seen and tensor.is_dynamic
        ]
    return resolved


def _filled(tensor: ir.Tensor, size: int) -> tuple[int, ...]:
    """``tensor``'s shape signature with every dynamic dimension set to ``size``."""
    return tuple(d if d >= 0 else size for d in (tensor.shape_signature or tensor.shape))


def by_tensor_name(
    model: ir.Model, shapes: Shapes | None, signature: str | None = None
) -> dict[str, tuple[int, ...]]:
    """The shapes keyed by tensor name (what the CPU interpreter's input details call them)."""
    return {r.tensor.name: r.shape for r in resolve_input_shapes(model, shapes, signature)}


def by_feed_name(
    model: ir.Model, shapes: Shapes | None, signature: str | None = None
) -> dict[str, tuple[int, ...]]:
    """The shapes keyed by the entry point's input names (signature names when there are)."""
    return {r.feed: r.shape for r in resolve_input_shapes(model, shapes, signature)}


class ShapeInference(Protocol):
    """The runtime's shape inference: tensor index -> shape of every tensor of subgraph 0 after
    one run of ``model`` with the inputs (by tensor index) resized to ``shapes``, fed zeros or
    seeded random values (``fill``). ``tflkit.delegates.litert_cpu.computed_shapes`` is one."""

    def __call__(
        self, model: bytes, shapes: Mapping[int, Sequence[int]], *, fill: str, seed: int
    ) -> dict[int, list[int]]: ...


def dynamic_input_tensors(model: ir.Model) -> list[ir.Tensor]:
    """Inputs of the main subgraph whose shape signature has a -1."""
    return [t for t in model.main.inputs if t.is_dynamic]


def fix_input_shapes(model: ir.Model, shapes: Shapes, *, infer: ShapeInference) -> list[str]:
    """Give the named inputs static shapes and propagate them; returns the tensors changed.

    ``infer`` runs the model (see :class:`ShapeInference`). Shapes the runtime computes only
    while it runs (TFLite's dynamic tensors: a RESHAPE fed by SHAPE arithmetic, a RANGE) are
    read after two invocations on different inputs; a tensor whose shape differs between them
    depends on the data and stays dynamic.
    """
    targets = {id(r.tensor): list(r.shape) for r in resolve_input_shapes(model, shapes)}
    graph = model.main
    spec = ", ".join(f"{name}={','.join(map(str, dims))}" for name, dims in shapes.items())
    by_index = {t.index: targets[id(t)] for t in graph.inputs if id(t) in targets}
    data = ir.dumps(model)
    try:
        first, second = (
            infer(data, by_index, fill="zeros" if seed is None else "random", seed=seed or 0)
            for seed in (None, 0)
        )
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
