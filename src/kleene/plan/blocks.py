"""The group plan as plain data: logical blocks (LogCEP's pushdown automaton) for patterns
beyond a linear SEQ -- AND, ANY, OR of sub-patterns, Kleene closure on groups and windows on
any sub-pattern -- with its negation tree.

Compiled by :mod:`kleene.plan.groups`; evaluated by :mod:`kleene.runtime.groups`. Nothing here
needs the AST: where each NOT sits (:class:`NotSite`) is compiled into variable names, flags and
integer windows, so the matcher never walks the pattern.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..frozen import dataclass
from ..vocab import Strategy
from .layout import Layout, ReturnFn, route_attrs
from .nodes import Node
from .predicate import Predicate

if TYPE_CHECKING:
    from .vector import VectorPred


@dataclass(frozen=True, slots=True)
class NegBlock:
    """A NOT: its body variables (an event or an OR of events) and where it sits."""

    vars: tuple[str, ...]
    types: tuple[str | None, ...]
    preds: tuple[Predicate, ...]
    masks: tuple[VectorPred | None, ...]
    node: Node | None = None
    """For a negated sub-pattern (not one event or an OR of events): its automaton; an
    occurrence of it inside the interval forbids the match."""
    inner: NestedNeg | None = None
    """The NOTs inside this NOT's body (docs/semantics.md 4, "Nested negation"): an occurrence
    of the body forbids the match only if they accept it. None: the body has no NOT (every
    plan but the pda's nested-negation matcher)."""


@dataclass(frozen=True, slots=True)
class NotSite:
    """Where one NOT sits in the pattern: the negation tree flattened in the order the checks
    of a complete match visit it (a block's own NOTs, then its items' NOTs, depth first).

    Its interval (docs/semantics.md 4): in a SEQ, between the last event bound by the
    variables on its ``left`` and the first bound by those on its ``right``; an open end is
    bounded by the innermost ``window`` over ``scope``. Directly in an AND, strictly between
    the block's first and last bound event (``right`` holds the block's variables)."""

    index: int
    """Its block in :attr:`GroupPlan.negations`."""
    in_and: bool
    """Directly in an AND (else an item of a SEQ)."""
    left: tuple[str, ...]
    """SEQ: the positive variables before it; AND: none."""
    right: tuple[str, ...]
    """SEQ: the positive variables after it; AND: every positive variable of the block."""
    bounded: bool
    """SEQ: a positive part that cannot match empty on both sides, so both ends of the
    interval are bound events (the NOT can be decided inside the automaton); AND: True."""
    window: tuple[int, bool] | None
    """The innermost window around it (the query's at the top level): (length in
    microseconds or events, is a count window); None: no window."""
    scope: tuple[str, ...]
    """The positive variables that window spans."""
    branches: tuple[tuple[str, ...], ...]
    """The positive variables of each OR / ANY branch it lies in: it applies only when each of
    those branches binds one of them."""


@dataclass(frozen=True, slots=True)
class NestedNeg:
    """The NOTs directly inside one NOT's body, decided on each occurrence of the body with the
    outer NOT's interval as their stream (docs/semantics.md 4, "Nested negation"). The owning
    block's ``vars`` hold the body's positive variables (``own``) and then every variable of
    these NOTs (at any depth), so the history keeps their events."""

    own: tuple[str, ...]
    """The positive variables of the body (the ones its automaton binds)."""
    blocks: tuple[NegBlock, ...]
    """One block per NOT of the body (with its own ``inner`` for deeper nesting)."""
    sites: tuple[NotSite, ...]
    """Where each of them sits in the body (``index`` into ``blocks``; windows are the body's
    own, None outside them)."""


@dataclass(frozen=True, slots=True)
class GroupPlan:
    """The immutable plan of a pattern with logical blocks."""

    name: str
    root: Node
    order: tuple[str, ...]
    layout: Layout
    var_types: Mapping[str, str | None]
    masks: Mapping[str, VectorPred | None]
    preds: tuple[Predicate, ...]
    negations: tuple[NegBlock, ...]
    neg_vars: tuple[str, ...]
    """Negated variables in candidate-bit order (after the positive ones)."""
    strategy: Strategy
    partition_by: tuple[str, ...]
    equivalence: tuple[str, ...]
    return_fns: tuple[ReturnFn, ...]
    optional_lists: frozenset[str]
    """List variables that are unbound (None) until they take an event (OR/ANY branches)."""
    max_window_us: int | None
    """The largest time window anywhere in the pattern (history pruning)."""
    max_window_events: int | None
    window_us: int | None
    """The query-level time window."""
    window_events: int | None
    """The query-level count window."""
    not_sites: tuple[NotSite, ...]
    """Every NOT of the pattern that sits in a SEQ or an AND (see :class:`NotSite`)."""
    always_bound: bool = False
    """Does every completion bind each positive variable to exactly one event (no OR / ANY /
    repetition)?"""

    @property
    def key_attrs(self) -> tuple[str, ...]:
        """Attributes that route events to per-key state."""
        return route_attrs(self.partition_by, self.equivalence)


__all__ = ["GroupPlan", "NegBlock", "NestedNeg", "NotSite"]
