"""Report dataclasses to plain JSON-ready values, fast.

``dataclasses.asdict`` deep-copies every leaf and recurses through generic code: on a
2,400-op ``check`` report it took longer than the static check itself. :func:`plain` walks the
same structure with per-class field lists and copies only containers.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

_LEAVES = (str, int, float, bool, type(None))


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def plain(value: Any) -> Any:
    """``value`` with dataclasses turned into dicts and tuples into lists, recursively.

    Equal to ``dataclasses.asdict`` for reports (dataclasses, lists, tuples, dicts, leaves),
    except that tuples become lists (as JSON has them) and leaves are not copied.
    """
    if isinstance(value, _LEAVES):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {name: plain(getattr(value, name)) for name in _field_names(type(value))}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    return value
