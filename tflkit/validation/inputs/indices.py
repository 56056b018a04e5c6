"""Index-like inputs: token ids and lengths, whatever their dtype, get index-like values.

Random floats in [0, 1) fed to ids that a model CASTs to int all become 0, and the output is
constant: nothing is compared. So an input is index-like when

- it is used as GATHER / GATHER_ND / EMBEDDING_LOOKUP / ONE_HOT indices, directly or through
  CAST/RESHAPE... (:func:`tflkit.ir.feeds.index_limit`): whole numbers in [0, rows - 1], also
  for a float input (ids that arrive as float32);
- it is a float input CAST to an integer type and nothing says how large: whole numbers in
  :data:`~tflkit.ir.feeds.INTEGER_RANGE`;
- it is a length (its name says ``len``/``length``/``count``..., rank <= 1, not a table index):
  whole numbers in [1, T], T the longest sequence axis of the other inputs (axis 1 of a rank >= 2
  input), so a mask or a mean over the first ``length`` steps never divides by 0.

Noise calibration leaves such inputs as they are (a relative perturbation would move an id
to the next row).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from tflkit.ir.entry import IoSpec
from tflkit.ir.feeds import INTEGER_RANGE, index_limit

__all__ = ["INDEX_KINDS", "index_span", "index_values"]

#: the ``InputSets.kinds`` of index-like inputs
INDEX_KINDS = ("index", "length")
_LENGTH = re.compile(r"(^|[^a-z])(len|lens|length|lengths|seq_?len|count|num_\w+)($|[^a-z])", re.I)
_INT_TYPES = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32)


def index_span(spec: IoSpec, specs: Sequence[IoSpec]) -> tuple[str, tuple[int, int]] | None:
    """("index" or "length", the inclusive range of whole numbers) for an index-like input that
    is not quantized, else None."""
    if spec.quant is not None or spec.dtype.kind not in "iuf":
        return None
    rows = index_limit(spec.tensor)
    if rows:
        return "index", (0, rows - 1)
    if _LENGTH.search(spec.name) and len(spec.shape) <= 1:
        longest = max((int(s.shape[1]) for s in specs if len(s.shape) >= 2), default=0)
        return "length", (1, max(longest, 1) if longest else INTEGER_RANGE[1])
    if spec.dtype.kind == "f" and _cast_to_int(spec):
        return "index", INTEGER_RANGE
    return None


def _cast_to_int(spec: IoSpec) -> bool:
    """A CAST of the input to an integer type."""
    wanted = {np.dtype(t) for t in _INT_TYPES}
    return any(
        op.type == "CAST" and op.outputs and np.dtype(op.outputs[0].dtype or np.float32) in wanted
        for op in spec.tensor.consumers
    )


def index_values(spec: IoSpec, span: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """Whole numbers uniform over ``span`` (inclusive) at ``spec``'s shape and dtype."""
    low, high = span
    return rng.integers(low, high, spec.shape, endpoint=True).astype(spec.dtype)
