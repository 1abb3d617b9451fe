"""An event's identity: its category and its features, whatever their order, hashed once.

Three things find an earlier prediction of the same object by its features: the
protection (the base p it gave, ``streamcal.learner.protection``), the label horizon (the
prediction waiting for this label) and the delay watch (when the prediction was made,
``streamcal.learner.horizon``). They all key on an ``EventKey``.

A tuple of the feature values is hashed anew at every dict operation (a float's hash is
not cached), and a protected prediction took three of them, its label two more, for 20
features about 0.4 µs each. An ``EventKey`` computes its hash once, at construction.
Its hash covers the category and the values; equality also compares the names, which a
stream mostly repeats (the same tuple object: compared by identity).

Unpickled keys hash again: a str's hash differs between processes.

>>> order = FeatureOrder()
>>> a = event_key(order, None, {"b": 2.0, "a": 1.0})
>>> a == event_key(order, None, {"a": 1.0, "b": 2.0}), a.names, a.values
(True, ('a', 'b'), (1.0, 2.0))
>>> a == event_key(order, "x", {"a": 1.0, "b": 2.0}), event_key(order, None, {"a": [1]})
(False, None)
"""

from __future__ import annotations

from streamcal.learner.scoring import FeatureOrder

__all__ = ["EventKey", "FeatureOrder", "event_key"]


class EventKey:
    """The look-up key of an object: its ``category`` (None without one) and its feature
    ``names`` and ``values`` in canonical order. Raises ``TypeError`` if a value (or the
    category) is unhashable."""

    __slots__ = ("category", "names", "values", "_hash")

    def __init__(self, category, names: tuple, values: tuple):
        self.category = category
        self.names = names
        self.values = values
        self._hash = hash((category, values))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        if type(other) is not EventKey:
            return NotImplemented
        return (self._hash == other._hash and self.values == other.values
                and self.names == other.names and self.category == other.category)  # fmt: skip

    def __reduce__(self):
        return (EventKey, (self.category, self.names, self.values))

    def __repr__(self) -> str:
        return f"EventKey({self.category!r}, {self.names!r}, {self.values!r})"


def event_key(order: FeatureOrder, category, x: dict) -> EventKey | None:
    """The ``EventKey`` of ``x`` (of ``category``), its features put in canonical order by
    ``order``; None if a value is unhashable."""
    names, values = order.names_values(x)
    try:
        return EventKey(category, names, values)
    except TypeError:
        return None
