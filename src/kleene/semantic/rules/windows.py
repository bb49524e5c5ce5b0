"""Window rules: positive lengths; count windows are whole numbers."""

from __future__ import annotations

import math

from ... import ast
from ..walk import sub_patterns
from .context import Context


def _check(ctx: Context, w: ast.Window, what: str) -> None:
    amount = w.amount
    if isinstance(amount, bool) or not isinstance(amount, (int, float)) \
            or not math.isfinite(amount) or amount <= 0:
        raise ctx.reporter.error(f"{what} must be a positive length, not {amount!r}", w.span)
    if w.is_count and float(amount) != int(amount):
        raise ctx.reporter.error(
            f"{what} counts events and must be a whole number, not {amount!r}", w.span)


def check_windows(ctx: Context) -> None:
    """Query window, sub-pattern windows and PICK windows."""
    q = ctx.query
    if q.within is not None:
        _check(ctx, q.within, "WITHIN")
    for p in sub_patterns(q.pattern):
        if isinstance(p, ast.Within):
            _check(ctx, p.window, "the window on a sub-pattern")
    for pick in q.picks:
        if pick.within is not None:
            _check(ctx, pick.within, "PICK ... WITHIN")


__all__ = ["check_windows"]
