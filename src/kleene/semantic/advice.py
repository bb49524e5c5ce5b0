"""Advice on valid queries that are likely to hurt: warnings, never errors.

:func:`explosion_warning`: a Kleene variable under skip-till-any-match (the default strategy)
makes every subset of its qualifying events a match -- 2^n matches (and live runs) for n
events in the window -- unless a count window keeps n small. ``kleene check`` and ``kleene
explain`` print it on stderr.
"""

from __future__ import annotations

from .. import ast
from .analyzed import AnalyzedQuery
from .walk import bindings

TIGHT_COUNT_WINDOW = 20
"""A count window of at most this many events bounds a Kleene variable's subsets to 2^20
(about a million) per start: tight enough not to warn."""


def _explosive(p: ast.Pattern, count_window: float | None, out: list[ast.Kleene]) -> None:
    """Collect the Kleene nodes outside NOT whose repetitions no tight count window bounds."""
    if isinstance(p, ast.Within):
        w = p.window
        if w.is_count:
            count_window = w.amount if count_window is None else min(count_window, w.amount)
        _explosive(p.body, count_window, out)
    elif isinstance(p, ast.Kleene):
        limit = p.max if count_window is None else (
            count_window if p.max is None else min(p.max, count_window))
        if limit is None or limit > TIGHT_COUNT_WINDOW:
            out.append(p)
        _explosive(p.body, count_window, out)
    elif isinstance(p, (ast.Seq, ast.And, ast.Or, ast.AnyOf)):
        for item in p.items:
            _explosive(item, count_window, out)
    # EventPattern: nothing; Not: never bound, produces no matches


def explosion_warning(analyzed: AnalyzedQuery) -> str | None:
    """A warning when the query can produce exponentially many matches, with what to use
    instead; ``None`` when it cannot (another strategy, no Kleene, a tight count window).

    Example:
        >>> from kleene.api import analyze
        >>> print(explosion_warning(analyze(
        ...     "PATTERN SEQ(A a, B+ b[], C c) WITHIN 1 hour")))  # doctest: +ELLIPSIS
        query 'query': the Kleene variable 'b' (B+ b[]) under skip-till-any-match (the default strategy) can produce exponentially many matches: ...
        >>> explosion_warning(analyze("PATTERN SEQ(A a, B+ b[]) WITHIN 10 EVENTS")) is None
        True
        >>> explosion_warning(analyze(
        ...     "PATTERN SEQ(A a, B+ b[]) WITHIN 1 hour USING skip-till-next-match")) is None
        True
    """
    if analyzed.strategy is not ast.Strategy.SKIP_TILL_ANY_MATCH:
        return None
    query = analyzed.query
    window = query.within
    found: list[ast.Kleene] = []
    _explosive(query.pattern, window.amount if window is not None and window.is_count else None,
               found)
    if not found:
        return None
    from ..lang.printer import pattern_text, window_text

    names = []
    for k in found:
        inner = [b.event.var for b in bindings(k.body)]
        names.append(f"'{', '.join(inner)}' ({pattern_text(k)})")
    what = ("the Kleene variable " if len(found) == 1 and "," not in names[0]
            else "the Kleene variables ")
    default = " (the default strategy)" if query.strategy is None else ""
    if window is None:
        bound = "and nothing bounds n (no WITHIN)"
    elif window.is_count:
        bound = f"and WITHIN {window.amount:g} EVENTS allows n up to {window.amount:g}"
    else:
        bound = ("and a time window does not bound n (it is however many qualifying events "
                 f"fall within {window_text(window)})")
    return (
        f"query '{analyzed.name}': {what}{', '.join(names)} under skip-till-any-match{default} "
        "can produce exponentially many matches: every subset of the qualifying events in "
        f"order is a match (2^n for n events), {bound}. Unless every combination is wanted, "
        "use USING skip-till-next-match (one match per start, taking each qualifying event), "
        "USING strict-contiguity or partition-contiguity (consecutive events only), or a "
        f"count window (WITHIN {TIGHT_COUNT_WINDOW} EVENTS). A run that explodes stops at a "
        "cap: --max-runs-per-partition, --max-matches-per-event, --max-matches-per-call "
        "(--on-cap truncate keeps going and counts what it drops)")


__all__ = ["TIGHT_COUNT_WINDOW", "explosion_warning"]
