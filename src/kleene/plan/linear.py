"""The linear plan as plain data: an immutable NFA^b over the components of a SEQ (SASE+), and
the union plan of a top-level OR (one linear plan per branch).

Compiled by :mod:`kleene.plan.automaton`; evaluated by :mod:`kleene.runtime.linear` (and its
generated kernel) and :mod:`kleene.runtime.union`. Nothing here needs the AST: predicates carry
their compiled functions and inline sources, windows and positions are integers.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..frozen import dataclass
from ..vocab import Strategy
from .layout import Layout, ReturnFn, route_attrs
from .nodes import Node
from .predicate import Predicate

if TYPE_CHECKING:
    from .blocks import NestedNeg
    from .vector import VectorPred


class CompKind(enum.Enum):
    """Kind of an automaton component (NFA^b state)."""

    SINGLE = "single"
    """Binds exactly one event."""
    KLEENE = "kleene"
    """Binds ``min``..``max`` events of one type (a take loop)."""
    CHOICE = "choice"
    """Binds one event to exactly one of several variables (``OR`` of single events)."""


@dataclass(frozen=True, slots=True)
class Component:
    """One NFA^b state of the linear plan."""

    kind: CompKind
    vars: tuple[str, ...]
    types: tuple[str | None, ...]
    min: int = 1
    max: int | None = 1

    @property
    def nullable(self) -> bool:
        """May bind nothing (``*`` / ``{0,m}``)."""
        return self.min == 0


@dataclass(frozen=True, slots=True)
class WindowGuard:
    """A window over components ``first..last`` (inclusive); ``count`` for ``n EVENTS``."""

    first: int
    last: int
    amount: int
    count: bool


@dataclass(frozen=True, slots=True)
class NegGuard:
    """A negated variable on gap ``gap`` (0 = leading, ``len(components)`` = trailing)."""

    var: str
    type: str | None
    gap: int
    preds: tuple[Predicate, ...]
    mask: VectorPred | None
    seq_lo: int = 0
    """First component of the SEQ that holds the NOT (its "before" side starts here)."""
    seq_hi: int = 0
    """One past the last component of that SEQ (its "after" side ends here)."""
    win_amount: int | None = None
    """The innermost enclosing window (for a leading / trailing NOT), if any."""
    win_count: bool = False
    scope_lo: int = 0
    """Components ``scope_lo..scope_hi`` are that window's scope."""
    scope_hi: int = 0
    node: Node | None = None
    """For a NOT of a sub-pattern: its logical-block node tree (:mod:`kleene.plan.nodes`)."""
    body: tuple[tuple[str, str | None, VectorPred | None], ...] = ()
    """For a NOT of a sub-pattern: (variable, type, mask) of every event inside it."""
    inner: NestedNeg | None = None
    """For a NOT of a sub-pattern with NOTs of its own (docs/semantics.md 4, "Nested
    negation"): those NOTs; ``body`` then lists the body's events and theirs. Evaluated by
    :class:`kleene.runtime.nested.NestedLinearMatcher` only."""


@dataclass(frozen=True, slots=True)
class VarPlan:
    """Per positive variable: its slot, component, vectorized mask and placed predicates."""

    name: str
    slot: int
    comp: int
    type: str | None
    is_list: bool
    mask: VectorPred | None
    take: tuple[Predicate, ...]
    close: tuple[Predicate, ...]


@dataclass(frozen=True, slots=True)
class Plan:
    """The immutable linear automaton plan of one query."""

    name: str
    components: tuple[Component, ...]
    vars: Mapping[str, VarPlan]
    order: tuple[str, ...]
    """Positive variables in pattern order (the bindings order of a match)."""
    layout: Layout
    negations: tuple[NegGuard, ...]
    windows: tuple[WindowGuard, ...]
    match_preds: tuple[Predicate, ...]
    strategy: Strategy
    partition_by: tuple[str, ...]
    equivalence: tuple[str, ...]
    return_fns: tuple[ReturnFn, ...]
    """RETURN items: name, compiled expression over ``B + (whole, classifier, match number,
    start, end)`` (:data:`kleene.plan.layout.ReturnFn`), the slot of the
    list variable it ranges over elementwise (None if none) and whether it uses ``[i-1]``."""

    @property
    def window_us(self) -> int | None:
        """The largest time window (for expiry and history pruning), if every run has one."""
        full = [w for w in self.windows if w.first == 0 and w.last == len(self.components) - 1]
        tw = [w.amount for w in full if not w.count]
        return min(tw) if tw else None

    @property
    def window_events(self) -> int | None:
        """The whole-pattern count window, if any."""
        full = [w for w in self.windows if w.first == 0 and w.last == len(self.components) - 1]
        cw = [w.amount for w in full if w.count]
        return min(cw) if cw else None

    @property
    def key_attrs(self) -> tuple[str, ...]:
        """Attributes that route events to per-key state (PARTITION BY + equivalence)."""
        return route_attrs(self.partition_by, self.equivalence)


@dataclass(frozen=True, slots=True)
class UnionPlan:
    """A top-level OR evaluated as one linear plan per branch (docs/semantics.md 8: under
    skip-till-next-match each branch is its own query), merged in output order."""

    name: str
    branches: tuple[Plan, ...]
    order: tuple[str, ...]
    layout: Layout
    strategy: Strategy
    partition_by: tuple[str, ...]
    equivalence: tuple[str, ...]
    return_fns: tuple[ReturnFn, ...]

    @property
    def negations(self) -> tuple[NegGuard, ...]:
        """Every branch's negation guards."""
        return tuple(g for b in self.branches for g in b.negations)

    @property
    def key_attrs(self) -> tuple[str, ...]:
        """Attributes that route events to per-key state."""
        return route_attrs(self.partition_by, self.equivalence)


__all__ = ["CompKind", "Component", "NegGuard", "Plan", "UnionPlan", "VarPlan", "WindowGuard"]
