"""What the verifying walk (``structure``) read of a model's tensors and ops, as named records:
the reader (``serde``) builds the IR from them instead of reading those tables again."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

#: A table as the walk holds it: (position, inline size, vtable slots).
Table = tuple[int, int, tuple[int, ...]]


class TensorFacts(NamedTuple):
    """What the walk read of one tensor (indices bounds-checked)."""

    table: Table
    shape: tuple[int, ...]
    shape_signature: tuple[int, ...] | None
    type: int
    buffer: int
    name: str
    #: Position of the sparsity table, or None.
    sparsity: int | None
    #: Position of the quantization table, or None.
    quantization: int | None


class OpFacts(NamedTuple):
    """What the walk read of one op (indices bounds-checked; -1 only among inputs)."""

    table: Table
    opcode: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    intermediates: tuple[int, ...]
    #: (start, length) of the custom options bytes, or None.
    custom_options: tuple[int, int] | None
    #: (union type, table position or None) of ``builtin_options``.
    options: tuple[int, int | None]
    #: (union type, table position or None) of ``builtin_options_2``.
    options2: tuple[int, int | None]


@dataclasses.dataclass
class Walk:
    """What the walk read of each subgraph's tensors and ops, by subgraph index."""

    tensors: list[list[TensorFacts]] = dataclasses.field(default_factory=list)
    ops: list[list[OpFacts]] = dataclasses.field(default_factory=list)
