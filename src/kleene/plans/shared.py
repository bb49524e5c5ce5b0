"""Which queries SCEMon's shared network evaluates, and their network spec.

The network (``kleene.runtime.shared``) is a plan for a *set* of queries, not for one, so it
is not a :class:`~kleene.plans.registry.PlanKind` (a plan kind compiles one query to one
matcher). :func:`shared_spec` translates an analyzed query into the network's plain-data spec,
or says why the network cannot take it; such a query falls back to its own plan (the
registry's cheapest) in the same pass.

Supported: ``SEQ``, ``AND`` or ``OR`` of single events (or one event) of distinct, named types,
no WHERE conjunct (equivalence tests ``[attr]`` are allowed: they become the partition key with
PARTITION BY), skip-till-any-match, a time window or none (without one, nothing is ever cleaned: the
state grows with the stream, as for the single-query plans), EMIT ALL or RECENT, and no PICK,
CONSUME or RETURN.
"""

from __future__ import annotations

from .. import ast
from ..runtime.shared import CNJ, DSJ, SEQ, SharedSpec
from ..semantic.analyzed import AnalyzedQuery, VarKind
from ..vocab import Emit, Strategy


def shared_spec(aq: AnalyzedQuery) -> SharedSpec | str:
    """The network spec of ``aq``, or the reason the network cannot evaluate it."""
    q = aq.query
    if aq.strategy is not Strategy.SKIP_TILL_ANY_MATCH:
        return f"strategy {aq.strategy.value} (the network selects skip-till-any-match)"
    if aq.conjuncts:
        return "WHERE conditions other than equivalence tests"
    if aq.emit not in (Emit.ALL, Emit.RECENT):
        return f"EMIT {aq.emit.value.upper()} (the network emits ALL or RECENT)"
    if q.picks or q.consume is not None or q.returns:
        return "PICK, CONSUME or RETURN"
    if any(v.kind is not VarKind.SINGLE for v in aq.variables.values()):
        return "Kleene or negated variables"
    pat = q.pattern
    items: tuple[ast.Pattern, ...]
    if isinstance(pat, ast.EventPattern):
        kind, items = DSJ, (pat,)
    elif isinstance(pat, (ast.Seq, ast.And, ast.Or)):
        items = pat.items
        kind = SEQ if isinstance(pat, ast.Seq) else CNJ if isinstance(pat, ast.And) else DSJ
    else:
        return f"pattern {type(pat).__name__} (the network composes SEQ, AND and OR of events)"
    if not all(isinstance(p, ast.EventPattern) for p in items):
        return "nested sub-patterns (the network composes single events)"
    evs = [p for p in items if isinstance(p, ast.EventPattern)]
    types = [p.type for p in evs]
    if any(t is None for t in types):
        return "a variable without an event type"
    names = tuple(t for t in types if t is not None)
    if len(set(names)) != len(names):
        return "the same event type twice in one pattern"
    if len(names) == 1:
        kind = DSJ
    window = q.within
    if window is not None and window.is_count:
        return "a count window"
    return SharedSpec(
        name=aq.name, kind=kind, types=names, vars=tuple(p.var for p in evs),
        window_us=None if window is None else window.microseconds,
        recent=aq.emit is Emit.RECENT,
        key_attrs=tuple(dict.fromkeys(aq.partition_by + aq.equivalence)))


__all__ = ["shared_spec"]
