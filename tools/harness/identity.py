"""Arrays remembered by identity, never by address alone (runs in the harness subprocess).

`id(arr)` is an address: once an array is freed, the next array allocated there has the same id. A set
of ids kept across iterations then answers for arrays it never saw (a rebuilt parameter taken for a
freed temporary output, or a loss), and which array lands where changes from run to run (hash seeds,
allocation order), so capture's verdict would too. Each entry here holds a weak reference and answers
only for the very object it was given.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

_V = TypeVar("_V")


class ArrayMap(Generic[_V]):
    """A mapping from arrays (by identity) to values; an entry dies with its array."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref, _V]] = {}

    def _entry(self, arr: Any) -> tuple[weakref.ref, _V] | None:
        e = self._entries.get(id(arr))
        if e is None:
            return None
        if e[0]() is not arr:  # another array, freed, had this address
            del self._entries[id(arr)]
            return None
        return e

    def __contains__(self, arr: Any) -> bool:
        return self._entry(arr) is not None

    def get(self, arr: Any, default: _V | None = None) -> _V | None:
        e = self._entry(arr)
        return default if e is None else e[1]

    def __setitem__(self, arr: Any, value: _V) -> None:
        self._entries[id(arr)] = (weakref.ref(arr), value)

    def setdefault(self, arr: Any, value: _V) -> _V:
        e = self._entry(arr)
        if e is not None:
            return e[1]
        self[arr] = value
        return value

    def pop(self, arr: Any, default: _V | None = None) -> _V | None:
        e = self._entry(arr)
        if e is None:
            return default
        del self._entries[id(arr)]
        return e[1]

    def items(self) -> Iterator[tuple[Any, _V]]:
        """(array, value) for every live entry, in insertion order."""
        for ref, value in list(self._entries.values()):
            arr = ref()
            if arr is not None:
                yield arr, value

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return sum(1 for _ in self.items())


class ArraySet:
    """A set of arrays by identity; a member leaves when it is freed."""

    def __init__(self) -> None:
        self._map: ArrayMap[bool] = ArrayMap()

    def add(self, arr: Any) -> None:
        self._map[arr] = True

    def discard(self, arr: Any) -> None:
        self._map.pop(arr)

    def __contains__(self, arr: Any) -> bool:
        return arr in self._map

    def clear(self) -> None:
        self._map.clear()
