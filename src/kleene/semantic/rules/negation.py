"""Negation rules: NOT sits inside SEQ or AND, and a NOT with no positive event on one side
needs a window to bound it; a pattern must require at least one positive event."""

from __future__ import annotations

from ... import ast
from ...lang.printer import pattern_text
from ..walk import mentioned_vars
from .context import Context


def positive(p: ast.Pattern) -> bool:
    """True if every match of ``p`` binds at least one (non-negated) event."""
    if isinstance(p, ast.EventPattern):
        return True
    if isinstance(p, ast.Kleene):
        return p.min >= 1 and positive(p.body)
    if isinstance(p, ast.Not):
        return False
    if isinstance(p, ast.Within):
        return positive(p.body)
    if isinstance(p, (ast.Seq, ast.And)):
        return any(positive(i) for i in p.items)
    if isinstance(p, ast.Or):
        return all(positive(i) for i in p.items)
    return sum(positive(i) for i in p.items) >= p.k and p.k >= 1


def check_negation(ctx: Context) -> None:
    """Placement of NOT and the window rule for leading/trailing negations."""

    repeated: list[ast.Kleene] = []

    def go(p: ast.Pattern, left: bool, right: bool, windowed: bool, parent: str) -> None:
        if isinstance(p, ast.Not):
            text = pattern_text(p, nested=True)
            if repeated and parent in ("SEQ", "AND"):
                raise ctx.reporter.error(
                    f"{text} is inside the repetition {pattern_text(repeated[0], nested=True)}; "
                    "a negation inside a repetition is not supported", p.span)
            if parent not in ("SEQ", "AND"):
                where = "the whole pattern" if parent == "" else f"inside {parent}"
                raise ctx.reporter.error(
                    f"{text} is {where}; a negation is only allowed inside SEQ or AND, next to "
                    "positive events (e.g. SEQ(A a, NOT(B b), C c))", p.span)
            if not (left and right) and not windowed:
                side = "before" if not left else "after"
                raise ctx.reporter.error(
                    f"{text} has no positive event {side} it and no window bounds it; add "
                    "a WITHIN clause (e.g. WITHIN 10 seconds) or a positive event "
                    f"{side} it", p.span)
            # a NOT inside this body is bounded by this NOT's interval (docs/semantics.md 4,
            # "Nested negation")
            go(p.body, True, True, True, "NOT")
        elif isinstance(p, ast.Seq):
            if not any(positive(i) for i in p.items):
                raise ctx.reporter.error(
                    f"{pattern_text(p, nested=True)} has no positive event; a sequence needs at "
                    "least one event that must occur", p.span)
            for j, item in enumerate(p.items):
                lft = left or any(positive(i) for i in p.items[:j])
                rgt = right or any(positive(i) for i in p.items[j + 1:])
                go(item, lft, rgt, windowed, "SEQ")
        elif isinstance(p, ast.And):
            if not any(positive(i) for i in p.items):
                raise ctx.reporter.error(
                    f"{pattern_text(p, nested=True)} has no positive event; a conjunction "
                    "needs at least one event that must occur", p.span)
            for item in p.items:
                go(item, True, True, windowed, "AND")
        elif isinstance(p, ast.Kleene):
            repeated.append(p)
            go(p.body, left, right, windowed, "a repetition")
            repeated.pop()
        elif isinstance(p, (ast.Or, ast.AnyOf)):
            for item in p.items:
                go(item, left, right, windowed, "OR" if isinstance(p, ast.Or) else "ANY")
        elif isinstance(p, ast.Within):
            # a window on a NOT itself is not a SEQ/AND item (docs/semantics.md: NOT only
            # directly inside SEQ or AND); windows on other sub-patterns are transparent
            go(p.body, left, right, True, "WITHIN" if isinstance(p.body, ast.Not) else parent)

    go(ctx.query.pattern, False, False, ctx.query.within is not None, "")


def check_not_only_optional(ctx: Context) -> None:
    """A pattern whose every component may be empty (``A* a[]`` alone) matches nothing real."""
    p = ctx.query.pattern
    if positive(p):
        return
    inner = p.body if isinstance(p, ast.Within) else p
    if isinstance(inner, ast.Kleene):
        body = inner.body
        suggestion = (f"'{pattern_text(ast.Kleene(body, max(inner.min, 1), inner.max))}'")
        raise ctx.reporter.error(
            f"'{pattern_text(inner, nested=True)}' is the only component and may match zero "
            f"events; use {suggestion} or add a required event", inner.span)
    raise ctx.reporter.error(
        "the pattern can match without any event (every component is optional); make at least "
        "one component required (use + instead of *)", p.span)


def _negations(p: ast.Pattern, chain: tuple[ast.Not, ...],
               out: dict[str, tuple[ast.Not, ...]]) -> None:
    """Map every variable bound inside a NOT to the chain of NOTs around it, outermost first
    (its own NOT last)."""
    if isinstance(p, ast.EventPattern):
        if chain:
            out[p.var] = chain
        return
    if isinstance(p, ast.Not):
        _negations(p.body, (*chain, p), out)
    elif isinstance(p, (ast.Kleene, ast.Within)):
        _negations(p.body, chain, out)
    else:
        for item in p.items:
            _negations(item, chain, out)


def check_negation_conditions(ctx: Context) -> None:
    """A condition may restrict one negation, not relate the events of two different NOTs:
    each NOT forbids its own events independently, so ``c.x = d.x`` for ``NOT(C c)`` and
    ``NOT(D d)`` has no meaning. Variables of NOTs nested in one another may meet: the
    condition restricts the innermost (docs/semantics.md 4, "Nested negation")."""
    chains: dict[str, tuple[ast.Not, ...]] = {}
    _negations(ctx.query.pattern, (), chains)
    if not chains:
        return
    for conj in ctx.conjuncts():
        deepest: tuple[str, tuple[ast.Not, ...]] | None = None
        for var in mentioned_vars(conj):
            if var not in chains:
                continue
            chain = chains[var]
            if deepest is None:
                deepest = (var, chain)
                continue
            v0, c0 = deepest
            short, long_ = (c0, chain) if len(c0) <= len(chain) else (chain, c0)
            if any(a is not b for a, b in zip(short, long_, strict=False)):
                v1, n1 = v0, c0[-1]
                v2, n2 = var, chain[-1]
                raise ctx.reporter.error(
                    f"this condition relates '{v1}' in {pattern_text(n1, nested=True)} and "
                    f"'{v2}' in {pattern_text(n2, nested=True)}; each negation is checked on "
                    "its own, so a condition may mention the variables of one NOT only, or of "
                    "NOTs nested in one another (split it, or put both events in one NOT, e.g. "
                    "NOT(SEQ(C c, D d)))", getattr(conj, "span", None))
            if len(chain) > len(c0):
                deepest = (var, chain)


__all__ = ["check_negation", "check_negation_conditions", "check_not_only_optional",
           "positive"]
