"""Checking a query against the input it will run on: the columns (a CSV header, an Arrow or
DataFrame schema) and, when known, the event types.

A typo in an attribute, a type or a PARTITION BY column otherwise runs silently: the column is
NULL everywhere and the query finds nothing (or, for PARTITION BY, puts every event in one NULL
partition). :func:`check_against` turns those into a :class:`QueryValidationError` with a
did-you-mean, and a comparison between a string column and a number into one too (through the
type rules, :mod:`kleene.semantic.rules.types`).

Example:
    >>> from kleene.api import analyze
    >>> aq = analyze("PATTERN SEQ(Traffic a, Traffic b) WHERE b.avgspeed < a.avgSpeed")
    >>> schema = InputSchema({"REPORT_ID": "number", "avgSpeed": "number"},
    ...                      frozenset({"Traffic"}))
    >>> check_against(aq, schema)
    Traceback (most recent call last):
    ...
    kleene.errors.QueryValidationError: Line 1, column 41: the input has no column 'avgspeed' (did you mean 'avgSpeed'?); ...
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .. import ast
from ..diagnostics import Span
from ..frozen import dataclass
from .analyzed import AnalyzedQuery
from .walk import Reporter, sub_exprs

PSEUDO_ATTRIBUTES = {"ts": "timestamp", "type": "string", "id": None}
"""What ``v.ts``, ``v.type`` and ``v.id`` read when the input has no column of that name."""


@dataclass(frozen=True, slots=True)
class InputSchema:
    """What an input offers a query.

    ``columns``: attribute name -> kind (``number``, ``string``, ``bool``, ``timestamp``; or an
    Arrow type, a Python type, or ``None`` when unknown). ``types``: the event types the input
    holds, when known; ``types_complete`` says whether that set is all of them (the whole input
    was read) or only what a first chunk showed. ``source`` names the input in messages.
    """

    columns: Mapping[str, Any]
    types: frozenset[str] | None = None
    types_complete: bool = True
    source: str = "the input"

    def __post_init__(self) -> None:
        if self.types is not None and not isinstance(self.types, frozenset):
            object.__setattr__(self, "types", frozenset(self.types))

    @staticmethod
    def of(events: Any, *, types_complete: bool = True, source: str = "the input"
           ) -> InputSchema:
        """The schema of a :class:`kleene.EventBatch` (its attribute columns and the types it
        holds)."""
        import pyarrow.compute as pc

        from ..events.model import RESERVED, TYPE

        table = events.table
        columns = {f.name: str(f.type) for f in table.schema if f.name not in RESERVED}
        types = {str(t) for t in pc.unique(table.column(TYPE)).to_pylist() if t is not None}
        return InputSchema(columns, frozenset(types), types_complete, source)

    def kind(self, attr: str) -> str | None:
        """The kind of an attribute (``None``: unknown or untyped)."""
        from .rules.types import kind_of

        if attr in self.columns:
            spec = self.columns[attr]
            return None if spec is None else kind_of(spec)
        return PSEUDO_ATTRIBUTES.get(attr)

    def has(self, attr: str) -> bool:
        """Whether ``v.attr`` reads something: a column, or ``ts``/``type``/``id``."""
        return attr in self.columns or attr in PSEUDO_ATTRIBUTES

    def by_type(self, types: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The analyzer's ``schema`` argument (type -> attribute -> kind) for ``types``: every
        type has the input's columns (a file has one header for all its types)."""
        attrs: dict[str, Any] = {a: self.kind(a) for a in self.columns}
        for name, kind in PSEUDO_ATTRIBUTES.items():
            attrs.setdefault(name, kind)
        return {t: attrs for t in types}


def suggest(name: str, candidates: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the candidate closest to ``name`` (case first), or ``''``.

    Example:
        >>> suggest("avgspeed", ["REPORT_ID", "avgSpeed"]), suggest("REPORTID", ["REPORT_ID"])
        (" (did you mean 'avgSpeed'?)", " (did you mean 'REPORT_ID'?)")
    """
    import difflib  # only on an error: start-up

    cands = list(candidates)
    folded = [c for c in cands if c.casefold() == name.casefold()]
    close = folded or difflib.get_close_matches(name, cands, n=1, cutoff=0.6)
    if not close:
        squeezed = {c.replace("_", "").casefold(): c for c in cands}
        hit = squeezed.get(name.replace("_", "").casefold())
        close = [hit] if hit else []
    return f" (did you mean '{close[0]}'?)" if close else ""


def check_against(analyzed: AnalyzedQuery, schema: InputSchema) -> list[str]:
    """Raise :class:`~kleene.errors.QueryValidationError` when the query names a column, a
    PARTITION BY column or an event type the input does not have, or compares values of
    different kinds (a string column with a number). Returns warnings: event types not seen
    in a first chunk (``types_complete=False``), which may still come later."""
    query = analyzed.query
    report = Reporter(query)
    listed = ", ".join(schema.columns) or "(none)"
    warnings: list[str] = []

    def missing(attr: str, what: str, span: Span | None) -> Exception:
        return report.error(f"{what} '{attr}'{suggest(attr, schema.columns)}; its columns "
                            f"are: {listed}", span)

    for attr in query.partition_by:
        if not schema.has(attr):
            raise missing(attr, f"PARTITION BY {attr}: {schema.source} has no column",
                          _partition_span(query, attr))
    for attr in analyzed.equivalence:
        if not schema.has(attr):
            raise missing(attr, f"the equivalence test [{attr}]: {schema.source} has no "
                          "column", _equivalence_span(query, attr))
    roots: list[ast.Expr] = [] if query.where is None else [query.where]
    roots += [r.expr for r in query.returns]
    for root in roots:
        for e in sub_exprs(root):
            if isinstance(e, ast.AttrRef) and not schema.has(e.attr):
                    raise report.error(
                    f"{schema.source} has no column '{e.attr}'{suggest(e.attr, schema.columns)}; "
                    f"its columns are: {listed}", e.span)
    if schema.types is not None:
        known = sorted(schema.types)
        shown = ", ".join(known[:20]) + (", ..." if len(known) > 20 else "") or "(none)"
        for info in analyzed.variables.values():
            if info.type is None or info.type in schema.types:
                continue
            hint = suggest(info.type, known)
            if schema.types_complete:
                raise report.error(
                    f"event type '{info.type}' (variable '{info.name}') does not occur in "
                    f"{schema.source}{hint}; its types are: {shown}", _var_span(query, info.name))
            warnings.append(f"event type '{info.type}' (variable '{info.name}') is not among "
                            f"the types of the first rows of {schema.source}{hint}: {shown}")
    from .analyzer import analyze

    types = {v.type for v in analyzed.variables.values() if v.type is not None}
    analyze(query, udfs=analyzed.udfs, default_name=analyzed.name,
            schema=schema.by_type(types))
    return warnings


def read_attributes(analyzed: AnalyzedQuery) -> frozenset[str] | None:
    """The attributes a query reads (WHERE, RETURN, PARTITION BY, ``[attr]``), or ``None``
    when it reads whole events (``RETURN a``, a UDF given ``a``): every column then.

    Example:
        >>> from kleene.api import analyze
        >>> sorted(read_attributes(analyze(
        ...     "PATTERN SEQ(A a, B b) WHERE b.x > a.y AND [k] PARTITION BY p RETURN a.z")))
        ['k', 'p', 'x', 'y', 'z']
        >>> read_attributes(analyze("PATTERN SEQ(A a, B b) RETURN a")) is None
        True
    """
    query = analyzed.query
    out = set(query.partition_by) | set(analyzed.equivalence)
    roots: list[ast.Expr] = [] if query.where is None else [query.where]
    roots += [r.expr for r in query.returns]
    for root in roots:
        for e in sub_exprs(root):
            if isinstance(e, ast.AttrRef):
                out.add(e.attr)
            elif isinstance(e, ast.VarRef) and not _counted(root, e):
                return None
    return frozenset(out)


def _counted(root: ast.Expr, ref: ast.VarRef) -> bool:
    """Whether ``ref`` is the argument of ``count(v)`` (which reads no attribute)."""
    return any(isinstance(e, ast.Call) and e.name == "count" and any(a is ref for a in e.args)
               for e in sub_exprs(root))


def _var_span(query: ast.Query, var: str) -> Span | None:
    from .walk import bindings

    for b in bindings(query.pattern):
        if b.event.var == var:
            return b.event.span
    return None


def _partition_span(query: ast.Query, attr: str) -> Span | None:
    """Where ``attr`` is written after PARTITION BY in the query text (else the query)."""
    import re

    text = query.source
    clause = re.search(r"\bPARTITION\s+BY\b", text, re.IGNORECASE)
    if clause is not None:
        hit = re.compile(rf"\b{re.escape(attr)}\b").search(text, clause.end())
        if hit is not None:
            return Span.at(text, hit.start(), hit.end())
    return query.span


def _equivalence_span(query: ast.Query, attr: str) -> Span | None:
    if query.where is None:
        return None
    for e in sub_exprs(query.where):
        if isinstance(e, ast.Equivalence) and attr in e.attrs:
            return e.span
    return None


__all__ = ["PSEUDO_ATTRIBUTES", "InputSchema", "check_against", "read_attributes", "suggest"]
