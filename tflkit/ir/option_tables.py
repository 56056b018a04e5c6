"""Option tables read straight from a loaded file, without the generated object API.

:func:`decode_options` gives an op's builtin options by the object API's attribute names
(``fusedActivationFunction``...), laid out by ``schema_layout``: scalars, strings (bytes, as the
object API gives them) and vectors of scalars (lists; the object API gives numpy arrays). A
table holding a sub-table, a union or a struct is left to the object API (None). The structural
verifier has bounds-checked every field of these tables before anything reads them;
``tests/test_ir_differential.py`` checks the fields against the object API on the corpus.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from tflkit.ir import schema, schema_layout
from tflkit.ir._tables import Fields

_U32 = struct.Struct("<I").unpack_from

#: Option fields naming a subgraph (control flow, composites' decompositions).
SUBGRAPH_FIELDS = (
    "thenSubgraphIndex",
    "elseSubgraphIndex",
    "condSubgraphIndex",
    "bodySubgraphIndex",
    "initSubgraphIndex",
    "subgraph",
    "decompositionSubgraphIndex",
)

_SCALAR, _STRING, _VECTOR = 0, 1, 2
#: (slot, attribute, kind, scalar reader or vector element code, default)
_Plan = tuple[tuple[int, str, int, Any, Any], ...]


@functools.cache
def _plan(table: str) -> _Plan | None:
    """How to read ``table``'s fields; None when one of them needs the object API."""
    plan = []
    for _field, slot, kind, code, attribute, default in schema_layout.TABLES.get(table, ()):
        if kind == "scalar":
            reader: Callable[..., tuple[Any, ...]] = struct.Struct("<" + code).unpack_from
            plan.append((slot, attribute, _SCALAR, reader, default))
        elif kind == "string":
            plan.append((slot, attribute, _STRING, None, None))
        elif kind == "vector" and code not in ("", "s"):
            plan.append((slot, attribute, _VECTOR, code, None))
        else:
            return None
    return tuple(plan)


def decode_table(buf: Any, position: int, table: str) -> dict[str, Any] | None:
    """The fields of the ``table`` at ``position`` by attribute name (absent ones at their
    defaults, as the object API has them); None when the table needs the object API."""
    plan = _plan(table)
    if plan is None:
        return None
    slots = Fields(buf, position).slots
    count = len(slots)
    found: dict[str, Any] = {}
    for slot, attribute, kind, reader, default in plan:
        offset = slots[slot] if slot < count else 0
        if kind == _SCALAR:
            found[attribute] = reader(buf, position + offset)[0] if offset else default
            continue
        if not offset:
            found[attribute] = None
            continue
        at = position + offset
        at += _U32(buf, at)[0]
        length = _U32(buf, at)[0]
        if kind == _STRING:
            found[attribute] = bytes(buf[at + 4 : at + 4 + length])
        else:
            found[attribute] = list(struct.unpack_from(f"<{length}{reader}", buf, at + 4))
    return found


@functools.cache
def scalar_fields(table: str) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """``table``'s scalar fields as (field, attribute), and the attributes of the others."""
    fields = schema_layout.TABLES.get(table, ())
    scalars = tuple((f[0], f[4]) for f in fields if f[2] == "scalar")
    return scalars, tuple(f[4] for f in fields if f[2] != "scalar")


def union_table(union: str, tag: int | None) -> str | None:
    """The table a ``union`` (``BuiltinOptions``, ``BuiltinOptions2``) tag names."""
    return schema.enum_names(union).get(tag or 0)


def decode_options(
    buf: Any, position: int | None, position2: int | None, kind: int | None, kind2: int
) -> Mapping[str, Any] | None:
    """The fields of an op's ``BuiltinOptions`` (type ``kind`` at ``position``) and
    ``BuiltinOptions2`` (``kind2`` at ``position2``), the first winning a clash; None when
    either table needs the object API."""
    found: dict[str, Any] = {}
    for at, tag, union in (
        (position2, kind2, "BuiltinOptions2"),
        (position, kind, "BuiltinOptions"),
    ):
        if at is None:
            continue
        table = union_table(union, tag)
        fields = None if table is None else decode_table(buf, at, table)
        if fields is None:
            return None
        found.update(fields)
    return MappingProxyType(found)


@functools.cache
def _tags_naming_subgraphs(union: str) -> frozenset[int]:
    return frozenset(
        tag
        for tag, table in schema.enum_names(union).items()
        if any(f[4] in SUBGRAPH_FIELDS for f in schema_layout.TABLES.get(table, ()))
    )


def may_name_subgraphs(kind: int, kind2: int) -> bool:
    """Whether options of union types ``kind`` / ``kind2`` have a field in SUBGRAPH_FIELDS."""
    return (kind in _tags_naming_subgraphs("BuiltinOptions")) or (
        kind2 in _tags_naming_subgraphs("BuiltinOptions2")
    )


@functools.cache
def _slot(table: str, field: str) -> int:
    return next(f[1] for f in schema_layout.TABLES[table] if f[0] == field)


def vector_length(buf: Any, position: int, table: str, field: str) -> int:
    """The length of vector ``field`` of the ``table`` at ``position`` (0 when absent)."""
    found = Fields(buf, position).vector(_slot(table, field))
    return 0 if found is None else found[1]
