"""``EMIT ... TIMEOUTS`` rule (docs/semantics.md 20): timed-out partial matches are defined for a
SEQ of events, Kleene closures of events and choices of events, with a query-level time window."""

from __future__ import annotations

from ... import ast
from ...lang.printer import pattern_text
from .context import Context


def _linear(p: ast.Pattern) -> ast.Pattern | None:
    """The first sub-pattern outside the fragment (None: ``p`` is inside it)."""
    if isinstance(p, ast.EventPattern):
        return None
    if isinstance(p, ast.Kleene):
        return None if isinstance(p.body, ast.EventPattern) else p
    if isinstance(p, ast.Or):
        return next((i for i in p.items if not isinstance(i, ast.EventPattern)), None)
    if isinstance(p, ast.Within):
        return _linear(p.body) if isinstance(p.body, ast.Seq) else p
    if isinstance(p, ast.Seq):
        for item in p.items:
            bad = _linear(item)
            if bad is not None:
                return bad
        return None
    return p


def check_timeouts(ctx: Context) -> None:
    """EMIT TIMEOUTS needs a time window and a linear pattern without NOT."""
    q = ctx.query
    if not q.timeouts:
        return
    if q.within is None or q.within.is_count:
        raise ctx.reporter.error(
            "EMIT TIMEOUTS needs a time window: a partial match times out when the query's "
            "WITHIN <duration> has passed since its first event (add e.g. WITHIN 10 minutes)",
            q.within.span if q.within is not None else q.span)
    if q.emit is ast.Emit.COVERAGE:
        raise ctx.reporter.error("EMIT COVERAGE TIMEOUTS is not supported: use EMIT ALL "
                                 "TIMEOUTS (or EMIT RECENT TIMEOUTS)", q.span)
    if getattr(q, "after_match", None) is not None:
        raise ctx.reporter.error("EMIT TIMEOUTS cannot be combined with AFTER MATCH SKIP (one "
                                 "match per attempt leaves no defined set of partial matches)",
                                 q.span)
    if q.strategy is ast.Strategy.MAXIMAL_GROUPING:
        raise ctx.reporter.error("EMIT TIMEOUTS is not defined under maximal-grouping; use "
                                 "skip-till-any-match, skip-till-next-match or a contiguity "
                                 "strategy", q.span)
    bad = _linear(q.pattern)
    if bad is not None:
        raise ctx.reporter.error(
            f"EMIT TIMEOUTS supports a SEQ of events, Kleene closures of events (B+ b[]) and "
            f"choices of events (OR(B b, C c)), not {pattern_text(bad, nested=True)}", bad.span)


__all__ = ["check_timeouts"]
