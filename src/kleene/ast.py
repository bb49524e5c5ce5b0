"""The query AST: one tree for query text (every dialect) and for the builder API.

All nodes are frozen, slotted dataclasses. Every node has a ``span`` pointing into the source
text; spans are excluded from equality, so ``parse(print(q)) == q`` compares structure only.
Collections inside nodes are tuples.

Patterns
    ``EventPattern``  one event of a type bound to a variable (``Stock a``)
    ``Kleene``        repetition of a sub-pattern: ``+`` (1, None), ``*`` (0, None), ``{n}``, ``{n,m}``
    ``Seq`` / ``And`` / ``Or`` / ``AnyOf``  composition; ``AnyOf`` is ``ANY(k, ...)``
    ``Not``           negation (only inside ``Seq`` and ``And``)
    ``Within``        a window on a sub-pattern

Expressions
    ``Literal``, ``AttrRef`` (``v.x``, ``v[i].x``, ``v[i-1].x``, ``v[1].x``, ``v[last].x``),
    ``VarRef`` (a bare variable, e.g. inside ``count(v)``), ``Unary``, ``Binary`` (arithmetic,
    comparison, AND/OR), ``Between``, ``InList``, ``Like``, ``IsNull``, ``Call`` (built-ins,
    aggregates and registered UDFs), ``Equivalence`` (SASE ``[attr]``).

Chained comparisons (``20 < x.p < 50``) are desugared by the parser into ``AND`` of comparisons.
``first(v).x`` and ``last(v).x`` are ``AttrRef`` with ``Index(kind=FIRST)`` / ``Index(kind=LAST)``.
"""

from __future__ import annotations

import enum
from dataclasses import field

from .diagnostics import Span
from .frozen import dataclass
from .vocab import Emit, IndexKind, PickMode, Strategy, TimeUnit, Window


def _span() -> Span | None:
    return field(default=None, compare=False, repr=False, kw_only=True)


# --------------------------------------------------------------------------------------------
# Vocabulary (defined in kleene.vocab, shared with plans and engines; re-exported here)
# --------------------------------------------------------------------------------------------

# --------------------------------------------------------------------------------------------
# Expressions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Literal:
    """A constant. ``value`` is int, float, str, bool, None; timestamps are ``datetime``-free:
    ``kind='timestamp'`` stores microseconds since the epoch (UTC) as int, ``kind='interval'``
    stores microseconds as int."""

    value: int | float | str | bool | None
    kind: str = "auto"  # "auto" | "timestamp" | "interval"
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Index:
    """An index into a Kleene variable: ``[i]``, ``[i-1]``, ``[3]``, ``[last]``, ``[last-1]``."""

    kind: IndexKind
    offset: int = 0  # for CURRENT/LAST: 0 or negative; for ABSOLUTE: the 1-based position
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class AttrRef:
    """``var.attr`` or ``var[index].attr``. Without index on a Kleene variable: every element."""

    var: str
    attr: str
    index: Index | None = None
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class VarRef:
    """A bare variable, e.g. the argument of ``count(v)``."""

    var: str
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Unary:
    """``NOT x`` or ``-x``; ``op`` is ``"not"`` or ``"-"``."""

    op: str
    operand: Expr
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Binary:
    """A binary operation. ``op`` is one of ``+ - * / %``, ``= != < <= > >=`` (``<>`` is
    normalised to ``!=``), ``and``, ``or``."""

    op: str
    left: Expr
    right: Expr
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Between:
    """``x [NOT] BETWEEN lo AND hi`` (inclusive)."""

    operand: Expr
    low: Expr
    high: Expr
    negated: bool = False
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class InList:
    """``x [NOT] IN (a, b, ...)``."""

    operand: Expr
    items: tuple[Expr, ...]
    negated: bool = False
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Like:
    """``x [NOT] LIKE 'pat%'`` (SQL: ``%`` any run, ``_`` one character)."""

    operand: Expr
    pattern: Expr
    negated: bool = False
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class IsNull:
    """``x IS [NOT] NULL``."""

    operand: Expr
    negated: bool = False
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Call:
    """A function call: built-in (``abs``, ``sqrt``...), aggregate (``count``, ``sum``, ``avg``,
    ``min``, ``max`` over a Kleene variable) or a registered UDF. ``name`` is lower-cased for
    built-ins and aggregates and kept as written for UDFs."""

    name: str
    args: tuple[Expr, ...]
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Equivalence:
    """SASE equivalence test ``[attr, ...]``: all bound events share each attribute."""

    attrs: tuple[str, ...]
    span: Span | None = _span()


Expr = (Literal | AttrRef | VarRef | Unary | Binary | Between | InList | Like | IsNull | Call
        | Equivalence)

# --------------------------------------------------------------------------------------------
# Patterns
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EventPattern:
    """One event of ``type`` bound to ``var``. ``type=None`` matches events of any type.

    Inside a ``Kleene`` the variable names a list (``Stock+ b[]``)."""

    type: str | None
    var: str
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Kleene:
    """Repetition: ``+`` is (1, None), ``*`` (0, None), ``{n}`` (n, n), ``{n,m}`` (n, m)."""

    body: Pattern
    min: int
    max: int | None
    span: Span | None = _span()
    reluctant: bool = field(default=False, kw_only=True)
    """``+?`` / ``*?`` / ``{n,m}?``: fewer repetitions are preferred (only meaningful with
    ``AFTER MATCH SKIP``, docs/semantics.md 19)."""


@dataclass(frozen=True, slots=True)
class Seq:
    """``SEQ(p1, ..., pn)``: every event of p_i precedes every event of p_{i+1}."""

    items: tuple[Pattern, ...]
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class And:
    """``AND(p1, ..., pn)``: all sub-patterns, in any order, on disjoint events."""

    items: tuple[Pattern, ...]
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Or:
    """``OR(p1, ..., pn)``: exactly one branch."""

    items: tuple[Pattern, ...]
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class AnyOf:
    """``ANY(k, p1, ..., pn)``: exactly ``k`` of the branches, in any order, disjoint."""

    k: int
    items: tuple[Pattern, ...]
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Not:
    """``NOT(p)`` / ``!p``: no event matching ``p`` where the enclosing operator says."""

    body: Pattern
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Within:
    """A window on a sub-pattern: ``AND(B b, C c) WITHIN 5 seconds``."""

    body: Pattern
    window: Window
    span: Span | None = _span()


Pattern = EventPattern | Kleene | Seq | And | Or | AnyOf | Not | Within

# --------------------------------------------------------------------------------------------
# Clauses and the query
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pick:
    """``PICK FIRST|LAST|EACH var [WITHIN d FROM other]``."""

    mode: PickMode
    var: str
    within: Window | None = None
    from_var: str | None = None
    span: Span | None = _span()


class SkipMode(enum.Enum):
    """Where the next match attempt starts after a match (SQL ``AFTER MATCH SKIP``)."""

    TO_NEXT_ROW = "TO NEXT ROW"
    PAST_LAST_ROW = "PAST LAST ROW"
    TO_FIRST = "TO FIRST"
    TO_LAST = "TO LAST"


@dataclass(frozen=True, slots=True)
class AfterMatch:
    """``AFTER MATCH SKIP TO NEXT ROW | PAST LAST ROW | TO FIRST v | TO LAST v``: SQL's row
    pattern matching policy (docs/semantics.md 19)."""

    mode: SkipMode
    var: str | None = None
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Consume:
    """``CONSUME a, b`` or ``CONSUME ALL`` (``all_vars=True``, ``vars=()``)."""

    vars: tuple[str, ...] = ()
    all_vars: bool = False
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class ReturnItem:
    """``expr [AS alias]`` in ``RETURN``."""

    expr: Expr
    alias: str | None = None
    span: Span | None = _span()


@dataclass(frozen=True, slots=True)
class Query:
    """A whole query. Optional clauses are ``None`` / empty when absent in the text; the
    semantic layer fills defaults (strategy skip-till-any-match, emit all)."""

    pattern: Pattern
    name: str | None = None
    where: Expr | None = None
    partition_by: tuple[str, ...] = ()
    within: Window | None = None
    strategy: Strategy | None = None
    picks: tuple[Pick, ...] = ()
    consume: Consume | None = None
    emit: Emit | None = None
    returns: tuple[ReturnItem, ...] = ()
    return_type: str | None = None
    span: Span | None = _span()
    after_match: AfterMatch | None = field(default=None, kw_only=True)
    """``AFTER MATCH SKIP ...`` (docs/semantics.md 19); None: kleene's own matching."""
    source: str = field(default="", compare=False, repr=False, kw_only=True)
    """The text the query was parsed from (for error rendering); empty for builder queries."""
    timeouts: bool = field(default=False, kw_only=True)
    """``EMIT ... TIMEOUTS``: also output the timed-out partial matches (docs/semantics.md 20)."""
    rows: tuple[str, ...] | None = field(default=None, kw_only=True)
    """``EMIT ROWS [EXCLUDE v, ...]``: one output record per row of each match, RETURN
    evaluated as of that row (SQL's ALL ROWS PER MATCH, docs/semantics.md 19); the tuple holds
    the excluded variables. None: one record per match."""


Node = Expr | Pattern | Window | Index | Pick | Consume | AfterMatch | ReturnItem | Query

__all__ = [
    "AfterMatch", "SkipMode", "And", "AnyOf", "AttrRef", "Between", "Binary", "Call", "Consume", "Emit", "EventPattern",
    "Equivalence", "Expr", "Index", "IndexKind", "InList", "IsNull", "Kleene", "Like", "Literal",
    "Node", "Not", "Or", "Pattern", "Pick", "PickMode", "Query", "ReturnItem", "Seq", "Strategy",
    "TimeUnit", "Unary", "VarRef", "Window", "Within",
]
