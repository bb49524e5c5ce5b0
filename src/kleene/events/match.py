"""The output of every backend: one :class:`Match` per occurrence of a pattern."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from ..frozen import dataclass
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

    With ``EMIT ROWS`` (SQL's ALL ROWS PER MATCH, docs/semantics.md 19) each ``Match`` is one
    row of a match: the match's ``bindings``, ``start`` and ``end`` (the rows of one match
    share them), and ``values`` starting with ``row``, the row's event id.

    A *timed-out partial match* (``EMIT ... TIMEOUTS``, docs/semantics.md 20) is a ``Match``
    with ``expired`` set: the time (microseconds) its window expired, ts(first) + W. Its
    ``bindings`` are the variables the partial match bound (later components are absent) and
    its ``values`` are empty.
    """

    query: str
    bindings: Mapping[str, Binding]
    start: int
    end: int
    values: Mapping[str, Any] = field(default_factory=dict)
    expired: int | None = None
    """Set on a timed-out partial match only: when its window expired (microseconds)."""

    def key(self) -> tuple[Any, ...]:
        """A hashable, comparable identity of the match (for tests and diffs)."""
        base = (self.query, tuple(self.bindings.items()), self.start, self.end,
                tuple(self.values.items()))
        return base if self.expired is None else (*base, self.expired)

    def to_record(self, time: TimeInfo) -> dict[str, Any]:
        """The JSON Lines record, the contract other tools rely on::

            {"query": ..., "match": {"a": 3, "b": [4, 5]}, "start": ..., "end": ..., "values": {...}}

        A timed-out partial match has ``"expired"`` (the time its window expired) instead of
        ``"values"``.
        """
        rec: dict[str, Any] = {
            "query": self.query,
            "match": {k: (list(v) if isinstance(v, tuple) else v)
                      for k, v in self.bindings.items()},
            "start": time.to_output(self.start),
            "end": time.to_output(self.end),
        }
        if self.expired is not None:
            rec["expired"] = time.to_output(self.expired)
        else:
            rec["values"] = dict(self.values)
        return rec


def _fast_init() -> Any:
    """``Match.__init__`` through the slots' own descriptors. The frozen dataclass's generated
    ``__init__`` goes through ``object.__setattr__`` for each field, which costs about 1 µs per
    match; engines build hundreds of thousands of matches per second. Same signature, same
    defaults, and the instance stays frozen (``__setattr__`` still refuses)."""
    d = Match.__dict__
    sq, sb, ss, se, sv, sx = (d[n].__set__ for n in ("query", "bindings", "start", "end",
                                                       "values", "expired"))

    def __init__(self: Match, query: str, bindings: Mapping[str, Binding], start: int,
                 end: int, values: Mapping[str, Any] | None = None,
                 expired: int | None = None) -> None:
        sq(self, query)
        sb(self, bindings)
        ss(self, start)
        se(self, end)
        sv(self, {} if values is None else values)
        sx(self, expired)

    return __init__


Match.__init__ = _fast_init()  # type: ignore[method-assign]

__all__ = ["Binding", "EventId", "Match"]
