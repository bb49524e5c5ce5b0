"""The analyzed query: the AST plus resolved facts every backend needs.

Produced by :func:`kleene.semantic.analyze` (the language layer) and consumed by the oracle, the
plan compilers and the CLI. Backends never re-derive these facts from the AST.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any

from .. import ast
from ..frozen import dataclass


class VarKind(enum.Enum):
    """What a pattern variable binds to."""

    SINGLE = "single"
    """One event."""
    LIST = "list"
    """A list of events: a Kleene variable, or any variable inside a repeated group."""
    NEGATED = "negated"
    """A variable inside NOT: never bound in a match; its predicates restrict the negation."""


@dataclass(frozen=True, slots=True, kw_only=True)
class VarInfo:
    """One pattern variable."""

    name: str
    type: str | None
    """The event type it matches (``None``: any type)."""
    kind: VarKind
    order: int
    """Index in pattern order (left to right in the text)."""
    in_or_branch: bool = False
    """True if it sits under an OR/ANY branch and may be unbound."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AnalyzedQuery:
    """A validated query with defaults filled in.

    ``query`` is the canonical AST (dialect-free). ``strategy`` and ``emit`` are never ``None``
    here. ``conjuncts`` is the top-level WHERE split on AND (with ``Equivalence`` tests moved to
    ``equivalence``). ``udfs`` maps registered function names to callables.
    """

    query: ast.Query
    name: str
    variables: Mapping[str, VarInfo]
    strategy: ast.Strategy
    emit: ast.Emit
    conjuncts: tuple[ast.Expr, ...] = ()
    equivalence: tuple[str, ...] = ()
    udfs: Mapping[str, Callable[..., Any]] = field(default_factory=dict)

    @property
    def pattern(self) -> ast.Pattern:
        """The pattern tree."""
        return self.query.pattern

    @property
    def within(self) -> ast.Window | None:
        """The query-level window."""
        return self.query.within

    @property
    def partition_by(self) -> tuple[str, ...]:
        """PARTITION BY attributes."""
        return self.query.partition_by

    def output_fields(self) -> tuple[str, ...]:
        """The names of a match's values, in order: with EMIT ROWS first ``row`` (the row's
        event id), then each RETURN item's alias or text (the CSV and Parquet columns)."""
        from ..syntax import expr_text

        names = tuple(r.alias or expr_text(r.expr) for r in self.query.returns)
        return names if self.query.rows is None else ("row", *names)

    def positive_vars(self) -> list[str]:
        """Variables that appear in matches, in pattern order."""
        return [v.name for v in self.variables.values() if v.kind is not VarKind.NEGATED]


__all__ = ["AnalyzedQuery", "VarInfo", "VarKind"]
