"""Keyed state: descriptors, the handles a function uses, and the store behind them.

The names follow PyFlink (``ValueStateDescriptor``, ``runtime_context.get_state(...)``,
``ValueState.value() / update() / clear()``). A handle reads and writes the entry of the
operator's *current key*; the store is a small :class:`KeyedStateBackend` protocol, so a
runtime can keep it in memory (:class:`InMemoryKeyedStateBackend`, here) or elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "InMemoryKeyedStateBackend",
    "KeyedStateBackend",
    "ListState",
    "ListStateDescriptor",
    "MapState",
    "MapStateDescriptor",
    "StateDescriptor",
    "ValueState",
    "ValueStateDescriptor",
]


@dataclass(frozen=True)
class StateDescriptor:
    """Names one piece of keyed state. ``type_info`` is accepted for PyFlink compatibility."""

    name: str
    type_info: Any = None


@dataclass(frozen=True)
class ValueStateDescriptor(StateDescriptor):
    """One value per key (``None`` until updated)."""


@dataclass(frozen=True)
class ListStateDescriptor(StateDescriptor):
    """A list per key."""


@dataclass(frozen=True)
class MapStateDescriptor(StateDescriptor):
    """A mapping per key. PyFlink's ``(name, key_type_info, value_type_info)`` also works."""

    value_type_info: Any = None


class KeyedStateBackend(Protocol):
    """Where keyed state lives: ``(state name, key) -> value``."""

    def get(self, name: str, key: Hashable) -> Any:
        """The stored value, or ``None``."""

    def put(self, name: str, key: Hashable, value: Any) -> None: ...

    def delete(self, name: str, key: Hashable) -> None: ...


class InMemoryKeyedStateBackend:
    """Keyed state in a dict; it pickles with the operator that owns it."""

    def __init__(self) -> None:
        self.entries: dict[tuple[str, Hashable], Any] = {}

    def get(self, name: str, key: Hashable) -> Any:
        return self.entries.get((name, key))

    def put(self, name: str, key: Hashable, value: Any) -> None:
        self.entries[(name, key)] = value

    def delete(self, name: str, key: Hashable) -> None:
        self.entries.pop((name, key), None)

    def __len__(self) -> int:
        return len(self.entries)


class _Handle:
    def __init__(self, name: str, backend: KeyedStateBackend, current_key: Callable[[], Hashable]) -> None:
        self._name = name
        self._backend = backend
        self._key = current_key

    def _current(self) -> Hashable:
        """The current key; outside a keyed context (``open``) there is none, and Flink fails with "No
        key set". Here a write there went under the key ``None``, which no element has (a null key is
        a dead letter), so every key started without it, and the job failed later, far from the cause,
        or gave wrong results (a user probe, session 57)."""
        key = self._key()
        if key is None:
            raise RuntimeError(
                f"No key set: the keyed state {self._name!r} is read or written outside a keyed context (open() "
                "has no current key). Use it in process_element or on_timer, where it is the current key's; "
                "give a key its first value there when value() is None")
        return key

    def _get(self) -> Any:
        return self._backend.get(self._name, self._current())

    def _put(self, value: Any) -> None:
        self._backend.put(self._name, self._current(), value)

    def clear(self) -> None:
        """Remove the current key's entry."""
        self._backend.delete(self._name, self._current())


class ValueState(_Handle):
    """``value()`` is the current key's value (``None`` if unset); ``update(v)`` sets it."""

    def value(self) -> Any:
        return self._get()

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
        else:
            self._put(value)


class ListState(_Handle):
    """The current key's list: ``get()``, ``add(v)``, ``add_all(vs)``, ``update(vs)``, ``clear()``."""

    def get(self) -> list[Any]:
        return list(self._get() or [])

    def add(self, value: Any) -> None:
        self._put([*(self._get() or []), value])

    def add_all(self, values: Iterable[Any]) -> None:
        self._put([*(self._get() or []), *values])

    def update(self, values: Iterable[Any]) -> None:
        self._put(list(values))

    def __iter__(self) -> Iterator[Any]:
        return iter(self.get())


class MapState(_Handle):
    """The current key's mapping: ``get``, ``put``, ``put_all``, ``remove``, ``contains``,
    ``keys``, ``values``, ``items``, ``is_empty``, ``clear``, and PyFlink's item syntax
    (``m[k]``, ``m[k] = v``, ``del m[k]``, ``k in m``, ``for k in m``)."""

    def __getitem__(self, key: Any) -> Any:
        return self.get(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Any) -> None:
        self.remove(key)

    def __contains__(self, key: Any) -> bool:
        return self.contains(key)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.keys())

    def _map(self) -> dict[Any, Any]:
        return dict(self._get() or {})

    def get(self, key: Any) -> Any:
        return self._map().get(key)

    def put(self, key: Any, value: Any) -> None:
        m = self._map()
        m[key] = value
        self._put(m)

    def put_all(self, mapping: dict[Any, Any]) -> None:
        m = self._map()
        m.update(mapping)
        self._put(m)

    def remove(self, key: Any) -> None:
        m = self._map()
        m.pop(key, None)
        if m:
            self._put(m)
        else:
            self.clear()

    def contains(self, key: Any) -> bool:
        return key in self._map()

    def keys(self) -> list[Any]:
        return list(self._map())

    def values(self) -> list[Any]:
        return list(self._map().values())

    def items(self) -> list[tuple[Any, Any]]:
        return list(self._map().items())

    def is_empty(self) -> bool:
        return not self._map()
