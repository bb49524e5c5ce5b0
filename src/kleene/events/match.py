"""The output of every backend: one :class:`Match` per occurrence of a pattern."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .model import TimeInfo

EventId = int | str
Binding = EventId | tuple[EventId, ...]


@dataclass(frozen=True, slots=True)
class Match:
    """One match.

    ``bindings`` maps each bound positive variable, in pattern order, to an event id, or for a
    Kleene variable (or a variable inside a repeated group) to a tuple of ids in stream order
    (empty for a ``*`` that matched nothing). Negated variables and variables of an OR branch
    not taken are absent. ``start`` / ``end`` are the internal (microsecond) timestamps of the
    first and last positive events; ``values`` holds the RETURN fields in order.
    """

    query: str
    bindings: Mapping[str, Binding]
    start: int
    end: int
    values: Mapping[str, Any] = field(default_factory=dict)

    def key(self) -> tuple[Any, ...]:
        """A hashable, comparable identity of the match (for tests and diffs)."""
        return (self.query, tuple(self.bindings.items()), self.start, self.end,
                tuple(self.values.items()))

    def to_record(self, time: TimeInfo) -> dict[str, Any]:
        """The JSON Lines record, the contract other tools rely on::

            {"query": ..., "match": {"a": 3, "b": [4, 5]}, "start": ..., "end": ..., "values": {...}}
        """
        return {
            "query": self.query,
            "match": {k: (list(v) if isinstance(v, tuple) else v)
                      for k, v in self.bindings.items()},
            "start": time.to_output(self.start),
            "end": time.to_output(self.end),
            "values": dict(self.values),
        }


__all__ = ["Binding", "EventId", "Match"]
