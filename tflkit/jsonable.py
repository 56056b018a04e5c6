"""The one JSON serialiser: report objects to plain JSON-ready values, fast.

:func:`plain` turns a value into what :func:`json.dumps` writes as standard JSON, one rule per
kind of value:

- ``None``, ``bool``, ``int``, ``str``: as they are (a ``str`` or ``int`` subclass that is not an
  enum becomes a plain ``str``/``int``);
- ``float``: finite values as they are; NaN, +inf and -inf become the strings ``"nan"``,
  ``"inf"`` and ``"-inf"`` (standard JSON has no such numbers; ``docs/json.md``);
- numpy scalars: the Python ``bool``/``int``/``float``/``str`` they hold (then the float rule);
  numpy arrays: nested lists;
- enums: their value; paths (``os.PathLike``): ``str``;
- lists, tuples and other sequences: lists; dicts and other mappings: dicts, values converted;
- an object with a ``to_json()`` method: what that returns (its own layout, already JSON-ready:
  a ``to_json`` returns :func:`plain` or :func:`plain_fields` of it, so it is not walked again);
- any other dataclass: a dict of its fields in declaration order (:func:`plain_fields`);
- anything else: ``str(value)``.

A report class whose JSON has its own layout (renamed, computed or left-out fields) writes
``to_json`` as ``plain({...})`` of that layout, nested objects left as they are; one that maps
field for field writes ``plain_fields(self)``. :func:`dumps` is the one way a document is
written (stdout, report files).

``dataclasses.asdict`` deep-copies every leaf and recurses through generic code: on a
2,400-op ``check`` report it took longer than the static check itself. :func:`plain` walks the
same structure with per-class field lists and copies only containers.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["dumps", "plain", "plain_fields"]

_EXACT_LEAVES = frozenset({str, int, bool, type(None)})


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    """The fields that go to JSON: all but those declared with ``metadata={"json": False}``."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get("json", True))


@functools.cache
def _has_to_json(cls: type) -> bool:
    return callable(getattr(cls, "to_json", None))


def _float(value: float) -> float | str:
    if math.isfinite(value):
        return value
    if value != value:
        return "nan"
    return "inf" if value > 0 else "-inf"


def plain(value: Any) -> Any:
    """``value`` as JSON-ready values (the rules are in the module docstring), recursively."""
    kind = type(value)
    if kind in _EXACT_LEAVES:
        return value
    if kind is float:
        return _float(value)
    if kind is list or kind is tuple:
        return [plain(item) for item in value]
    if kind is dict:
        return {key: plain(item) for key, item in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if _has_to_json(kind):
            return value.to_json()
        return plain_fields(value)
    np = sys.modules.get("numpy")  # no numpy value without numpy imported: never import it here
    if np is not None and isinstance(value, np.ndarray | np.generic):
        return plain(value.tolist())  # an array's nested lists, a scalar's Python value
    if isinstance(value, enum.Enum):
        return plain(value.value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _float(float(value))
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return [plain(item) for item in value]
    if _has_to_json(kind):
        return value.to_json()
    return str(value)


def plain_fields(obj: Any) -> dict[str, Any]:
    """A dataclass instance's fields, in declaration order, each through :func:`plain` (the
    ``to_json`` of a dataclass whose JSON maps it field for field)."""
    return {name: plain(getattr(obj, name)) for name in _field_names(type(obj))}


def dumps(value: Any, *, indent: int | None = 2, sort_keys: bool = False) -> str:
    """``value`` through :func:`plain`, as standard JSON text (no NaN/Infinity tokens)."""
    return json.dumps(plain(value), indent=indent, sort_keys=sort_keys, allow_nan=False)
