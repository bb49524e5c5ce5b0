"""Which queries SCEMon's shared network evaluates, and their network spec.

The network (``kleene.runtime.shared``) is a plan for a *set* of queries, not for one, so it
is not a :class:`~kleene.plans.registry.PlanKind` (a plan kind compiles one query to one
matcher). :func:`shared_spec` translates an analyzed query into the network's plain-data spec,
or says why the network cannot take it; such a query falls back to its own plan (the
registry's cheapest) in the same pass.

Supported: ``SEQ``, ``AND`` or ``OR`` of single events (or one event) of distinct, named types
(nested compositions of the same kind are inlined), WHERE conjuncts that each mention one
variable (they become the variable's *virtual class*: the ECQ of the events of its type that
satisfy them, evaluated once per batch for every query that shares them; equivalence tests
``[attr]`` become the partition key with PARTITION BY), skip-till-any-match, a time window or none (without one, nothing is ever cleaned: the
state grows with the stream, as for the single-query plans), EMIT ALL or RECENT, and no PICK,
CONSUME or RETURN.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from .. import ast
from ..plan.expr import RefInfo, has_running, refs
from ..plan.layout import Layout
from ..plan.vector import vectorize
from ..runtime.shared import CNJ, DSJ, SEQ, ClassFilter, SharedSpec
from ..semantic.analyzed import AnalyzedQuery, VarKind
from ..vocab import Emit, Strategy


def shared_spec(aq: AnalyzedQuery) -> SharedSpec | str:
    """The network spec of ``aq``, or the reason the network cannot evaluate it."""
    q = aq.query
    if aq.strategy is not Strategy.SKIP_TILL_ANY_MATCH:
        return f"strategy {aq.strategy.value} (the network selects skip-till-any-match)"
    filters = _filters(aq)
    if isinstance(filters, str):
        return filters
    if aq.emit not in (Emit.ALL, Emit.RECENT):
        return f"EMIT {aq.emit.value.upper()} (the network emits ALL or RECENT)"
    if q.timeouts:
        return "EMIT TIMEOUTS (the network keeps no partial matches to time out)"
    if q.picks or q.consume is not None or q.returns:
        return "PICK, CONSUME or RETURN"
    if any(v.kind is not VarKind.SINGLE for v in aq.variables.values()):
        return "Kleene or negated variables"
    pat = q.pattern
    items: tuple[ast.Pattern, ...]
    if isinstance(pat, ast.EventPattern):
        kind, items = DSJ, (pat,)
    elif isinstance(pat, (ast.Seq, ast.And, ast.Or)):
        items = _flat(pat)
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
    vars_ = tuple(p.var for p in evs)
    return SharedSpec(
        name=aq.name, kind=kind, types=names, vars=vars_,
        window_us=None if window is None else window.microseconds,
        recent=aq.emit is Emit.RECENT,
        key_attrs=tuple(dict.fromkeys(aq.partition_by + aq.equivalence)),
        filters=tuple(filters.get(v) for v in vars_) if filters else ())


def _flat(p: ast.Seq | ast.And | ast.Or) -> tuple[ast.Pattern, ...]:
    """The items of a composition with nested compositions of the same kind inlined
    (``SEQ(A a, SEQ(B b, C c))`` is ``SEQ(A a, B b, C c)``, docs/semantics.md 3)."""
    out: list[ast.Pattern] = []
    for i in p.items:
        out += _flat(i) if isinstance(i, type(p)) else [i]
    return tuple(out)


def _canon(x: Any) -> Any:
    """An expression as nested tuples without spans and with variable names left out (two
    queries' conditions on their own variables compare equal when they say the same)."""
    if isinstance(x, (ast.AttrRef, ast.VarRef)):
        return (type(x).__name__, "_") + tuple(
            _canon(getattr(x, f.name)) for f in dataclasses.fields(x)
            if f.name not in ("var", "span"))
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return (type(x).__name__,) + tuple(_canon(getattr(x, f.name))
                                           for f in dataclasses.fields(x) if f.name != "span")
    if isinstance(x, (tuple, list)):
        return tuple(_canon(v) for v in x)
    if isinstance(x, enum.Enum):
        return x.value
    return x


def _filters(aq: AnalyzedQuery) -> dict[str, ClassFilter] | str:
    """The WHERE conjuncts of each variable as its class filter, or why the network cannot
    evaluate them (a conjunct over two variables needs the partial match's bindings, which
    the network's PMB does not keep)."""
    per: dict[str, list[ast.Expr]] = {}
    info: dict[str, list[RefInfo]] = {}
    for e in aq.conjuncts:
        r = refs(e, frozenset())
        if len(r.vars) != 1:
            return ("WHERE conditions over two or more variables" if r.vars else
                    "a WHERE condition that mentions no variable")
        (v,) = r.vars
        if v not in aq.variables:
            return f"a WHERE condition on {v!r}, which the pattern does not bind"
        if r.iter_vars or r.prev_vars or r.abs_index or r.closing or has_running((e,)):
            return "an indexed or aggregated reference in WHERE"
        per.setdefault(v, []).append(e)
        info.setdefault(v, []).append(r)
    out: dict[str, ClassFilter] = {}
    for v, exprs in per.items():
        attrs = sorted({a for r in info[v] for a in r.attrs} - {"__ts", "__id"})
        fns = sorted({n for r in info[v] for n in r.udfs})
        layout = Layout({v: 0}, frozenset(), tuple(attrs))
        pred = vectorize(exprs, layout, v, aq.udfs)
        sig = " AND ".join(sorted(repr(_canon(e)) for e in exprs))
        if fns:  # the same function name may be another function in another set
            sig += " UDF " + repr([(n, id(aq.udfs.get(n))) for n in fns])
        out[v] = ClassFilter(sig, pred, tuple(attrs))
    return out


__all__ = ["shared_spec"]
