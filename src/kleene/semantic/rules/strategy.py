"""Strategy rule (docs/dev/decisions.md §8): skip-till-next-match supports SEQ, Kleene on event
types, NOT inside SEQ and OR; AND, ANY and Kleene on groups are rejected."""

from __future__ import annotations

from ... import ast
from ...lang.printer import pattern_text
from ..walk import sub_patterns
from .context import Context


def check_strategy(ctx: Context) -> None:
    """Reject constructs skip-till-next-match cannot express."""
    if ctx.query.strategy is not ast.Strategy.SKIP_TILL_NEXT_MATCH:
        return
    for p in sub_patterns(ctx.query.pattern):
        what = None
        if isinstance(p, ast.And):
            what = "AND"
        elif isinstance(p, ast.AnyOf):
            what = "ANY"
        elif isinstance(p, ast.Kleene) and not isinstance(p.body, ast.EventPattern):
            what = "a repetition of a group"
        if what is not None:
            raise ctx.reporter.error(
                f"skip-till-next-match does not support {what} ({pattern_text(p, nested=True)}); "
                "use USING skip-till-any-match, or rewrite it with SEQ, OR and Kleene on single "
                "event types", p.span)


__all__ = ["check_strategy"]
