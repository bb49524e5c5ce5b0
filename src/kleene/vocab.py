"""The query vocabulary shared by every layer: strategies, output modes, PICK modes, time
units and windows.

These are plain values with no dependency on the parser or the semantic analysis, so compiled
plans (``kleene.plan``) and the engines (``kleene.runtime``) use them without importing the AST.
``kleene.ast`` re-exports every name here.
"""

from __future__ import annotations

import enum
from dataclasses import field

from .diagnostics import Span
from .frozen import dataclass


def _span() -> Span | None:
    return field(default=None, compare=False, repr=False, kw_only=True)


# --------------------------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------------------------


class Strategy(enum.Enum):
    """Event selection strategy (SASE+ vocabulary)."""

    STRICT_CONTIGUITY = "strict-contiguity"
    """The positive events of a match occupy consecutive positions."""
    PARTITION_CONTIGUITY = "partition-contiguity"
    """Consecutive among the events that share the partition / equivalence value."""
    SKIP_TILL_NEXT_MATCH = "skip-till-next-match"
    """NFA^b rule: an event may be skipped only if it could not be taken at that point."""
    SKIP_TILL_ANY_MATCH = "skip-till-any-match"
    """Every combination of qualifying events is a match (the default)."""
    MAXIMAL_GROUPING = "maximal-grouping"
    """FAEM's Kleene: each Kleene variable binds the maximal group of qualifying events for
    the other bindings (docs/semantics.md 18)."""


class Emit(enum.Enum):
    """Which matches are output (SCEMon's output modes)."""

    ALL = "all"
    """Every match."""
    RECENT = "recent"
    """Per completing event, only the match with the most recent bindings."""
    COVERAGE = "coverage"
    """Only the matches no other match covers (LinkedCEP's complex event instance coverage,
    docs/semantics.md 16)."""


class PickMode(enum.Enum):
    """Extended SNOOP / TESLA selection of one event among candidates for a variable."""

    FIRST = "first"
    """Keep the match with the earliest event for the variable."""
    LAST = "last"
    """Keep the match with the latest event for the variable."""
    EACH = "each"
    """Keep all matches."""


class TimeUnit(enum.Enum):
    """Units of a window or interval. ``EVENTS`` makes a count window."""

    MILLISECONDS = "milliseconds"
    SECONDS = "seconds"
    MINUTES = "minutes"
    HOURS = "hours"
    DAYS = "days"
    EVENTS = "events"

    @property
    def microseconds(self) -> int:
        """Length of one unit in microseconds (not defined for ``EVENTS``)."""
        return _UNIT_US[self]


_UNIT_US = {
    TimeUnit.MILLISECONDS: 1_000,
    TimeUnit.SECONDS: 1_000_000,
    TimeUnit.MINUTES: 60_000_000,
    TimeUnit.HOURS: 3_600_000_000,
    TimeUnit.DAYS: 86_400_000_000,
}


class IndexKind(enum.Enum):
    """How an element of a Kleene variable is addressed."""

    CURRENT = "i"
    """``v[i]`` (offset 0) and ``v[i-1]`` (offset -1): relative to the element being checked."""
    ABSOLUTE = "n"
    """``v[1]``, ``v[2]``: 1-based position in the list."""
    FIRST = "first"
    """``first(v)``: the first element (same as ``v[1]``, printed as ``first(v)``)."""
    LAST = "last"
    """``v[last]`` / ``last(v)`` (offset 0) and ``v[last-1]`` (offset -1)."""
    UPTO = "..i"
    """``v[..i]`` (offset 0), only inside an aggregate in a WHERE conjunct: the elements
    ``v[1]`` .. ``v[i]`` (a running aggregate, docs/semantics.md 21)."""


# --------------------------------------------------------------------------------------------
# Windows
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Window:
    """``WITHIN <amount> <unit>``; ``unit=EVENTS`` is a count window."""

    amount: float
    unit: TimeUnit
    span: Span | None = _span()

    @property
    def is_count(self) -> bool:
        """True for ``WITHIN n EVENTS``."""
        return self.unit is TimeUnit.EVENTS

    @property
    def microseconds(self) -> int:
        """Window length in microseconds (time windows only)."""
        return round(self.amount * self.unit.microseconds)


__all__ = ["Emit", "IndexKind", "PickMode", "Strategy", "TimeUnit", "Window"]
