"""Seeded random values for a model's inputs: the one generator tflkit uses.

``validate``'s random input sets, rewrite verification, shape propagation, the int8 calibration
of rule examples and the GPU probe's own inputs all draw from :func:`random_array`, with one rule
per dtype:

- **bool**: False or True, evenly;
- **integers**: uniform over an inclusive range, the model's when it says
  (:func:`integer_range`): a per-tensor quantized input takes its dtype's full range, an input
  used as GATHER / GATHER_ND / EMBEDDING_LOOKUP / ONE_HOT indices (directly or through
  CAST/RESHAPE, or the SELECT_V2/ADD that wraps negative ids...) takes [0, rows - 1];
  anything else [0, 9] clipped to the dtype (:data:`INTEGER_RANGE`);
- **floats**: uniform over the range the caller states (``validate``: [0, 1], [-1, 1], the
  metadata's or a QUANTIZE grid's), else standard normal (negative values and magnitudes beyond
  1 exercise a rewrite).

It lives in the IR layer because every user (rewriter, validation, delegates, the GPU worker) may
import it and the integer rule reads the graph.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from tflkit.errors import UsageError
from tflkit.ir.graph import Op, Tensor

__all__ = ["INTEGER_RANGE", "index_limit", "integer_range", "random_array", "random_feed"]

#: integers of an input the model says nothing about: [0, 9], inclusive, clipped to the dtype
INTEGER_RANGE = (0, 9)
_INDEX_OPS = {"GATHER": 1, "GATHER_ND": 1, "EMBEDDING_LOOKUP": 0, "ONE_HOT": 0}
_PASS_THROUGH = {"CAST", "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "IDENTITY"}
#: ops whose output carries an index operand's values on (Keras' Embedding wraps negative ids:
#: ``SELECT_V2(LESS(ids, 0), ADD(ids, rows), ids)``), by the operand slots that do
_CARRIES = {"SELECT": (1, 2), "SELECT_V2": (1, 2), "ADD": (0, 1), "MAXIMUM": (0, 1)}
_CARRIES |= {"MINIMUM": (0, 1)}


def index_limit(tensor: Tensor) -> int | None:
    """How many rows the table this integer tensor indexes has (through CAST/RESHAPE...)."""
    seen: set[int] = set()
    todo = [tensor]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for op, slot in current.uses:
            if (op.type in _PASS_THROUGH and slot == 0) or slot in _CARRIES.get(op.type, ()):
                todo.extend(op.outputs[:1])
                continue
            want = _INDEX_OPS.get(op.type)
            if want is not None and want == slot:
                limit = _table_rows(op)
                if limit:
                    return limit
    return None


def _table_rows(op: Op) -> int | None:
    """How many valid indices the table an index input points into has."""
    if op.type == "ONE_HOT":
        depth = op.inputs[1]
        if depth is None or not depth.is_constant or depth.data is None:
            return None
        return int(depth.data.reshape(-1)[0])
    params = op.inputs[0] if op.type != "EMBEDDING_LOOKUP" else op.inputs[1]
    if params is None or not params.shape:
        return None
    axis = 0
    if op.type == "GATHER" and op.options is not None:
        axis = int(getattr(op.options, "axis", 0) or 0)
    return int(params.shape[axis]) if params.shape[axis] > 0 else None


def integer_range(dtype: np.dtype, tensor: Tensor | None = None) -> tuple[int, int]:
    """The inclusive range random integers of ``dtype`` are drawn from for ``tensor``: its
    dtype's full range when it is quantized per tensor, [0, rows - 1] when it indexes a table,
    else :data:`INTEGER_RANGE` clipped to the dtype (bool: [0, 1])."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return 0, 1
    info = np.iinfo(dtype)
    if tensor is not None:
        if tensor.scale_zero_point is not None:
            return int(info.min), int(info.max)
        limit = index_limit(tensor)
        if limit:
            return 0, limit - 1
    return max(int(info.min), INTEGER_RANGE[0]), min(int(info.max), INTEGER_RANGE[1])


def random_array(
    shape: Sequence[int],
    dtype: np.dtype,
    rng: np.random.Generator,
    value_range: tuple[float, float] | None = None,
) -> np.ndarray:
    """Random values of ``shape`` and ``dtype`` by the module's rule: ``value_range`` (inclusive
    for integers) when given, else [0, 9] integers and standard normal floats."""
    dtype = np.dtype(dtype)
    shape = tuple(int(d) for d in shape)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    if dtype.kind in "iu":
        low, high = value_range if value_range is not None else integer_range(dtype)
        return rng.integers(int(low), int(high), shape, endpoint=True).astype(dtype)
    if dtype.kind == "f":
        if value_range is None:
            return rng.standard_normal(shape).astype(dtype)
        return rng.uniform(value_range[0], value_range[1], shape).astype(dtype)
    raise UsageError(f"cannot make random values of type {dtype}")


def random_feed(
    inputs: Iterable[Tensor],
    seed: int | np.random.Generator,
    shapes: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, np.ndarray]:
    """Seeded random values for ``inputs`` (graph input tensors), by tensor name, at their
    stored shape or the one ``shapes`` gives by name; integers in :func:`integer_range`."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    feed = {}
    for tensor in inputs:
        dtype = tensor.dtype
        if dtype is None or np.dtype(dtype).kind not in "biuf":
            raise UsageError(
                f"cannot make a random input of type {tensor.type_name} for {tensor.name!r}"
            )
        shape = (shapes or {}).get(tensor.name, tensor.shape)
        span = integer_range(dtype, tensor) if np.dtype(dtype).kind in "biu" else None
        feed[tensor.name] = random_array(shape, dtype, rng, span)
    return feed
