"""The containers a graph keeps its interface and its order in (like onnx-ir's graph inputs
and outputs): graph inputs and outputs (:class:`TensorList`), a signature's named inputs and
outputs (:class:`TensorMap`), and the read-only view of a subgraph's ops and tensors
(:class:`ReadOnlyList`).

The interface containers track which tensors they hold, so ``tensor.is_graph_output`` and
``tensor.is_observable`` are answered at once and by one rule; a tensor may be held twice
(the same tensor as two outputs).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, MutableMapping, MutableSequence, Sequence
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class _Held:
    """How many times each tensor (by identity) is held."""

    __slots__ = ("_count",)

    def __init__(self) -> None:
        self._count: dict[int, int] = {}

    def holds(self, item: object) -> bool:
        """Whether ``item`` (by identity) is in the container."""
        return id(item) in self._count

    def _add(self, item: object) -> None:
        self._count[id(item)] = self._count.get(id(item), 0) + 1

    def _drop(self, item: object) -> None:
        left = self._count[id(item)] - 1
        if left:
            self._count[id(item)] = left
        else:
            del self._count[id(item)]


class TensorList(_Held, MutableSequence[Any]):
    """A subgraph's inputs or outputs, in order; ``holds(tensor)`` answers membership."""

    __slots__ = ("_items",)

    def __init__(self, items: Iterable[Any] = ()) -> None:
        super().__init__()
        self._items: list[Any] = list(items)
        for item in self._items:
            self._add(item)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        return self._items[index]

    def __setitem__(self, index: Any, value: Any) -> None:
        if isinstance(index, slice):
            items = list(self._items)
            items[index] = value
            self._reset(items)
            return
        self._drop(self._items[index])
        self._items[index] = value
        self._add(value)

    def __delitem__(self, index: Any) -> None:
        items = list(self._items)
        del items[index]
        self._reset(items)

    def insert(self, index: int, value: Any) -> None:
        self._items.insert(index, value)
        self._add(value)

    def replace(self, old: Any, new: Any) -> None:
        """Every occurrence of ``old`` (by identity) becomes ``new``."""
        if self.holds(old):
            self._reset([new if t is old else t for t in self._items])

    def _reset(self, items: list[Any]) -> None:
        self._items = items
        self._count.clear()
        for item in items:
            self._add(item)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items)

    def __contains__(self, item: object) -> bool:
        return self.holds(item)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TensorList | ReadOnlyList):
            other = list(other)
        return isinstance(other, list | tuple) and self._items == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TensorList({self._items!r})"


class TensorMap(_Held, MutableMapping[str, Any]):
    """A signature's inputs or outputs by name; ``holds(tensor)`` answers membership."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self._items: dict[str, Any] = {}
        for key, value in (items or {}).items():
            self[key] = value

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if key in self._items:
            self._drop(self._items[key])
        self._items[key] = value
        self._add(value)

    def __delitem__(self, key: str) -> None:
        self._drop(self._items.pop(key))

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TensorMap):
            other = other._items
        return isinstance(other, dict) and self._items == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TensorMap({self._items!r})"


class ReadOnlyList(Sequence[T], Generic[T]):
    """A read-only view of a subgraph's ops or tensors, in order (no copy); the subgraph
    changes them through its methods, which keep their links and positions right."""

    __slots__ = ("_items",)

    def __init__(self, items: list[T]) -> None:
        self._items = items

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[T]:
        return iter(self._items)

    def __reversed__(self) -> Iterator[T]:
        return reversed(self._items)

    def __contains__(self, item: object) -> bool:
        return any(x is item for x in self._items)

    def index(self, item: Any, start: int = 0, stop: int | None = None) -> int:
        return self._items.index(item, start, len(self._items) if stop is None else stop)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ReadOnlyList | TensorList):
            other = list(other)
        return isinstance(other, list | tuple) and self._items == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ReadOnlyList({self._items!r})"
