"""The record layout every plan and matcher shares (plain data, no AST).

A record is a tuple ``(gpos, ts, id, cpos, wpos, attr_0, attr_1, ...)``: the fixed columns
below, then the attributes the query reads in the plan's :class:`Layout` order. Bindings ``B``
are a tuple indexed by variable slot (a record, a tuple of records for a list variable, or
``None`` when unbound).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..frozen import dataclass

#: Fixed record slots before the attributes: global position, timestamp, event id,
#: contiguity position and window (per-key) position.
GPOS, TS, ID, CPOS, WPOS = 0, 1, 2, 3, 4
ATTR0 = 5

PredFn = Callable[[tuple[Any, ...], int], Any]
"""A compiled expression ``f(B, i)`` (:mod:`kleene.plan.expr`)."""

#: Attribute names that read an event's reserved fields rather than a column.
RESERVED_ATTRS = {"__ts": TS, "__id": ID, "__type": -1}


def route_attrs(partition_by: tuple[str, ...], equivalence: tuple[str, ...]) -> tuple[str, ...]:
    """The attributes that route events to per-key state: PARTITION BY, then the
    equivalence attributes not already in it."""
    return partition_by + tuple(a for a in dict.fromkeys(equivalence) if a not in partition_by)


@dataclass(frozen=True, slots=True)
class Layout:
    """Where each variable and attribute lives in ``B`` and in a record."""

    var_slots: Mapping[str, int]
    list_vars: frozenset[str]
    attrs: tuple[str, ...]

    def attr_slot(self, name: str) -> int:
        """Record slot of an attribute (reserved fields first)."""
        if name in ("__ts",):
            return TS
        if name == "__id":
            return ID
        return ATTR0 + self.attrs.index(name)


@dataclass(frozen=True, slots=True)
class CompiledExpr:
    """A compiled expression: the function and its generated source (for explain/debugging)."""

    fn: PredFn
    source: str


ReturnFn = tuple[str, CompiledExpr, int | None, bool]
"""A RETURN item: its name, the compiled expression over ``B + (whole, classifier, match number,
start, end)`` (``whole``: the whole match's B so extended, for EMIT ROWS), the slot of the
list variable it ranges over elementwise (None if none) and whether it uses ``v[i-1]``."""


__all__ = ["ATTR0", "CPOS", "GPOS", "ID", "RESERVED_ATTRS", "TS", "WPOS", "CompiledExpr",
           "Layout", "PredFn", "ReturnFn"]
