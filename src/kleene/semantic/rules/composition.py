"""Composition rules: ANY(k) has at least k branches; a predicate never joins OR branches."""

from __future__ import annotations

from ... import ast
from ...lang.printer import expr_text
from ..walk import mentioned_vars, sub_patterns
from .context import Context


def check_any(ctx: Context) -> None:
    """``ANY(k, p1..pn)`` needs 1 <= k <= n; composites need at least one item."""
    for p in sub_patterns(ctx.query.pattern):
        if isinstance(p, (ast.Seq, ast.And, ast.Or, ast.AnyOf)) and not p.items:
            raise ctx.reporter.error(f"{type(p).__name__.upper()}() needs at least one pattern",
                                     p.span)
        if isinstance(p, ast.AnyOf):
            n = len(p.items)
            if p.k < 1:
                raise ctx.reporter.error(f"ANY({p.k}, ...) must ask for at least 1 branch",
                                         p.span)
            if p.k > n:
                raise ctx.reporter.error(
                    f"ANY({p.k}, ...) asks for {p.k} branches but has only {n}; "
                    f"use k <= {n} or add branches", p.span)


def check_or_branches(ctx: Context) -> None:
    """A WHERE conjunct cannot relate variables from different branches of one OR/ANY."""
    paths = {b.event.var: {n: i for n, i, excl in b.or_path if excl} for b in ctx.bindings}
    for c in ctx.conjuncts():
        vars_ = [v for v in mentioned_vars(c) if v in paths]
        for i, a in enumerate(vars_):
            for b in vars_[i + 1:]:
                pa, pb = paths[a], paths[b]
                for node, branch in pa.items():
                    if node in pb and pb[node] != branch:
                        raise ctx.reporter.error(
                            f"'{expr_text(c)}' relates '{a}' and '{b}', which are in different "
                            "branches of the same OR/ANY and are never bound together; split "
                            "it into one condition per branch", c.span)


__all__ = ["check_any", "check_or_branches"]
