"""The reference semantics: a brute-force, literal transcription of docs/semantics.md.

The oracle enumerates every candidate binding of the pattern over a (tiny) stream, keeps those the
definitions accept, applies the policies and sorts the result in output order. It is written for
clarity, not speed, and shares no code with the engines (an import-linter contract forbids
``kleene.runtime`` and ``kleene.plan`` here): it has its own tree-walking expression evaluator.
Section numbers (§) refer to docs/semantics.md.

Example:
    >>> from kleene.api import analyze
    >>> from kleene.testing.timeline import events
    >>> ms = evaluate(analyze("PATTERN SEQ(A a, B b)"), events("a1@1 b1@2 b2@3"))
    >>> [dict(m.bindings) for m in ms]
    [{'a': 'a1', 'b': 'b1'}, {'a': 'a1', 'b': 'b2'}]
"""

from __future__ import annotations

import datetime as _dt
import functools
import itertools
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import field
from typing import Any

from .. import ast
from ..errors import CapacityError, EngineError, InputError, QueryValidationError
from ..events import ID, TS, TYPE, EventBatch, Match
from ..frozen import dataclass
from ..semantic.analyzed import AnalyzedQuery
from ..semantic.walk import children as _children

MAX_EVENTS = 200
"""The oracle refuses larger inputs: brute force is exponential in the number of events."""
MAX_CANDIDATES = 50_000
"""The oracle stops once this many partial bindings have been enumerated."""

AGGREGATES = frozenset({"count", "sum", "avg", "min", "max"})

Value = Any
"""A runtime value: None (NULL), bool, int, float, str."""
Bound = int | tuple[int, ...]
"""A binding inside the oracle: a partition-local position, or a tuple of them for lists."""


class OracleLimitError(CapacityError):
    """The input is too large for the brute-force oracle (use a real engine)."""


# ---------------------------------------------------------------------------------------------
# Events
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Event:
    """One event as the oracle sees it (§1)."""

    gpos: int
    """Global position in (ts, input position) order."""
    ts: int
    type: str
    id: Any
    attrs: Mapping[str, Value]


def _normalize(value: Any) -> Value:
    """Arrow values to the semantic value domain: datetimes become int microseconds (§5)."""
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(_dt.UTC).replace(tzinfo=None)
        return (value - _dt.datetime(1970, 1, 1)) // _dt.timedelta(microseconds=1)
    if isinstance(value, _dt.timedelta):
        return value // _dt.timedelta(microseconds=1)
    if isinstance(value, _dt.date):
        return (value - _dt.date(1970, 1, 1)).days * 86_400_000_000
    return value


def _attr(ev: _Event, name: str) -> Value:
    """``v.name``: a user column, else the reserved ``ts``/``type``/``id`` (§5), else NULL."""
    if name in ev.attrs:
        return ev.attrs[name]
    if name in ("ts", TS):
        return ev.ts
    if name in ("type", TYPE):
        return ev.type
    if name in ("id", ID):
        return ev.id
    return None


def _load(events: EventBatch) -> list[_Event]:
    out = []
    for i, row in enumerate(events.rows()):
        attrs = {k: _normalize(v) for k, v in row.items() if k not in (ID, TS, TYPE)}
        out.append(_Event(i, int(row[TS]), str(row[TYPE]), row[ID], attrs))
    # EventBatch promises (ts, input) order; sort stably anyway so the oracle never relies on it.
    out.sort(key=lambda e: e.ts)
    return [_Event(i, e.ts, e.type, e.id, e.attrs) for i, e in enumerate(out)]


# ---------------------------------------------------------------------------------------------
# Pattern helpers
# ---------------------------------------------------------------------------------------------


def _positive_vars(p: ast.Pattern) -> list[str]:
    """Variables bound by ``p`` (not inside NOT), in pattern order."""
    if isinstance(p, ast.EventPattern):
        return [p.var]
    if isinstance(p, ast.Not):
        return []
    if isinstance(p, ast.Kleene | ast.Within):
        return _positive_vars(p.body)
    return [v for item in p.items for v in _positive_vars(item)]


def _flat(items: Sequence[ast.Pattern]) -> list[ast.Pattern]:
    """SEQ items with directly nested SEQs spliced in (SEQ is associative, §3)."""
    out: list[ast.Pattern] = []
    for item in items:
        out.extend(_flat(item.items) if isinstance(item, ast.Seq) else [item])
    return out


def _nots(p: ast.Pattern) -> list[ast.Not]:
    if isinstance(p, ast.EventPattern):
        return []
    if isinstance(p, ast.Not):
        return [p]
    if isinstance(p, ast.Kleene | ast.Within):
        return _nots(p.body)
    return [n for item in p.items for n in _nots(item)]


# ---------------------------------------------------------------------------------------------
# Expressions: references
# ---------------------------------------------------------------------------------------------


def _is_aggregate(e: ast.Expr) -> bool:
    return isinstance(e, ast.Call) and e.name.lower() in AGGREGATES and len(e.args) == 1


def _mentioned(e: ast.Expr) -> set[str]:
    """Every variable name the expression mentions (inside aggregates too)."""
    if isinstance(e, ast.AttrRef | ast.VarRef):
        return {e.var}
    out: set[str] = set()
    for c in _children(e):
        out |= _mentioned(c)
    return out


def _outer_refs(e: ast.Expr) -> list[ast.AttrRef]:
    """Attribute references outside aggregate arguments."""
    if isinstance(e, ast.AttrRef):
        return [e]
    if _is_aggregate(e):
        return []
    return [r for c in _children(e) for r in _outer_refs(c)]


# ---------------------------------------------------------------------------------------------
# Expressions: evaluation (§5)
# ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Env:
    """What an expression sees: the partition's events and the bindings (positions)."""

    events: Sequence[_Event]
    bindings: Mapping[str, Bound]
    udfs: Mapping[str, Callable[..., Any]]
    current: dict[str, int] = field(default_factory=dict)
    """0-based element chosen for unindexed references to a list variable."""
    i: int | None = None
    """The shared 1-based index of ``v[i]`` references."""
    start: int | None = None
    end: int | None = None
    match_number: int | None = None
    """AFTER MATCH SKIP (§19): the match's number in its partition (``match_number()``)."""
    classifier: str | None = None
    """EMIT ROWS (§19): the current row's variable (``classifier()``)."""
    whole: _Env | None = None
    """EMIT ROWS (§19): the environment of the whole match (``final(x)``)."""

    def with_(self, current: Mapping[str, int], i: int | None) -> _Env:
        return _Env(self.events, self.bindings, self.udfs, dict(current), i, self.start, self.end,
                    self.match_number, self.classifier,
                    None if self.whole is None else self.whole.with_(current, i))


def _is_num(x: Value) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _comparable(a: Value, b: Value) -> bool:
    return ((_is_num(a) and _is_num(b)) or (isinstance(a, str) and isinstance(b, str))
            or (isinstance(a, bool) and isinstance(b, bool)))


_CMP: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: bool(a == b), "!=": lambda a, b: bool(a != b),
    "<": lambda a, b: bool(a < b), "<=": lambda a, b: bool(a <= b),
    ">": lambda a, b: bool(a > b), ">=": lambda a, b: bool(a >= b),
}


def _compare(op: str, a: Value, b: Value) -> bool | None:
    if a is None or b is None or not _comparable(a, b):
        return None
    return _CMP[op](a, b)


def _arith(op: str, a: Value, b: Value) -> Value:
    if not (_is_num(a) and _is_num(b)):
        return None
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return None if b == 0 else a / b
    if op == "%":
        return None if b == 0 else a % b
    raise EngineError(f"oracle: unknown arithmetic operator {op!r}")


def _bool(x: Value) -> bool | None:
    return x if isinstance(x, bool) else None


def _and3(values: Iterable[bool | None]) -> bool | None:
    result: bool | None = True
    for v in values:
        if v is False:
            return False
        if v is None:
            result = None
    return result


def _or3(values: Iterable[bool | None]) -> bool | None:
    result: bool | None = False
    for v in values:
        if v is True:
            return True
        if v is None:
            result = None
    return result


def _not3(v: bool | None) -> bool | None:
    return None if v is None else not v


def _like(s: Value, pattern: Value) -> bool | None:
    if not (isinstance(s, str) and isinstance(pattern, str)):
        return None
    rx = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    return re.fullmatch(rx, s, flags=re.DOTALL) is not None


def _math1(fn: Callable[[float], Any]) -> Callable[[Value], Value]:
    def f(x: Value) -> Value:
        if not _is_num(x):
            return None
        try:
            return fn(x)
        except (ValueError, OverflowError, ZeroDivisionError):
            return None
    return f


def _str1(fn: Callable[[str], Any]) -> Callable[[Value], Value]:
    return lambda x: fn(x) if isinstance(x, str) else None


def _round(x: Value, d: Value = 0) -> Value:
    if not _is_num(x) or not (isinstance(d, int) and not isinstance(d, bool)):
        return None
    return round(x, d) if d else round(x)


def _power(x: Value, y: Value) -> Value:
    if not (_is_num(x) and _is_num(y)):
        return None
    try:
        return math.pow(x, y)
    except (ValueError, OverflowError, ZeroDivisionError):
        return None


def _extreme(pick: Callable[..., Any]) -> Callable[..., Value]:
    def f(*xs: Value) -> Value:
        if not xs or any(x is None for x in xs):
            return None
        if not all(_comparable(xs[0], x) for x in xs):
            return None
        return pick(xs)
    return f


def _log(x: Value, base: Value = None) -> Value:
    if not _is_num(x) or (base is not None and not _is_num(base)):
        return None
    try:
        return math.log(x) if base is None else math.log(x, base)
    except (ValueError, OverflowError, ZeroDivisionError):
        return None


def _sign(x: Value) -> Value:
    return None if not _is_num(x) else (x > 0) - (x < 0)


def _substr(s: Value, start: Value, n: Value = None) -> Value:
    if not isinstance(s, str) or not _is_int(start) or (n is not None and not _is_int(n)):
        return None
    if n is not None and n < 0:
        return None
    begin = max(start, 1) - 1
    if n is None:
        return s[begin:]
    return s[begin:max(start - 1 + n, begin)]


def _concat(*xs: Value) -> Value:
    return "".join(xs) if xs and all(isinstance(x, str) for x in xs) else None


def _is_int(x: Value) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _nullif(x: Value, y: Value) -> Value:
    """NULL when ``x = y`` is TRUE, else x (SQL's NULLIF)."""
    return None if _compare("=", x, y) is True else x


_BUILTINS: dict[str, Callable[..., Value]] = {
    "nullif": _nullif,
    "abs": _math1(abs),
    "sqrt": _math1(math.sqrt),
    "exp": _math1(math.exp),
    "ln": _math1(math.log),
    "log": _log,
    "floor": _math1(math.floor),
    "ceil": _math1(math.ceil),
    "round": _round,
    "power": _power,
    "sign": _sign,
    "lower": _str1(str.lower),
    "upper": _str1(str.upper),
    "length": _str1(len),
    "trim": _str1(str.strip),
    "substr": _substr,
    "concat": _concat,
    "least": _extreme(min),
    "greatest": _extreme(max),
    "min": _extreme(min),  # with two or more arguments (one argument is the aggregate)
    "max": _extreme(max),
}


def _elements(b: Bound) -> tuple[int, ...]:
    return b if isinstance(b, tuple) else (b,)


def _ref_event(r: ast.AttrRef, env: _Env) -> _Event | None:
    """The event an attribute reference points to, or None (NULL)."""
    b = env.bindings.get(r.var)
    if b is None:
        return None
    elems = _elements(b)
    idx = r.index
    k: int | None  # 1-based
    if idx is None:
        if not isinstance(b, tuple):
            return env.events[b]
        k = env.current[r.var] + 1 if r.var in env.current else None
    elif idx.kind is ast.IndexKind.UPTO:  # inside its aggregate: the element chosen there
        k = env.current[r.var] + 1 if r.var in env.current else None
    elif idx.kind is ast.IndexKind.CURRENT:
        k = None if env.i is None else env.i + idx.offset
    elif idx.kind is ast.IndexKind.ABSOLUTE:
        k = idx.offset
    elif idx.kind is ast.IndexKind.FIRST:
        k = 1
    else:  # LAST
        k = len(elems) + idx.offset
    if k is None or not 1 <= k <= len(elems):
        return None
    return env.events[elems[k - 1]]


def _upto_var(e: ast.Expr) -> str | None:
    """The variable ``v`` of ``v[..i]`` references in ``e`` (a running aggregate, §21)."""
    if isinstance(e, ast.AttrRef) and e.index is not None \
            and e.index.kind is ast.IndexKind.UPTO:
        return e.var
    for c in _children(e):
        v = _upto_var(c)
        if v is not None:
            return v
    return None


def _running_vars(e: ast.Expr) -> set[str]:
    """Variables of the running aggregates (``agg(v[..i].x)``) in ``e``: they are iterated by
    their conjunct like ``v[i]`` (§21)."""
    if _is_aggregate(e):
        v = _upto_var(e)
        return set() if v is None else {v}
    out: set[str] = set()
    for c in _children(e):
        out |= _running_vars(c)
    return out


def _list_var_of(arg: ast.Expr, env: _Env) -> str | None:
    """The list variable an aggregate ranges over: the one referenced elementwise in ``arg``."""
    names = {r.var for r in _outer_refs(arg)
             if r.index is None or r.index.kind is ast.IndexKind.CURRENT}
    if isinstance(arg, ast.VarRef):
        names.add(arg.var)
    names = {n for n in names if n in env.bindings}
    if len(names) > 1:
        raise QueryValidationError(
            f"an aggregate ranges over one list variable, got {', '.join(sorted(names))}")
    return next(iter(names), None)


def _aggregate(e: ast.Call, env: _Env) -> Value:
    name = e.name.lower()
    arg = e.args[0]
    if any(v not in env.bindings for v in _mentioned(arg)) and not (
            isinstance(arg, ast.VarRef) and arg.var in ("start", "end")):
        return None
    var = _list_var_of(arg, env)
    if isinstance(arg, ast.VarRef) and name == "count":
        return len(_elements(env.bindings[arg.var]))
    values: list[Value]
    running = _upto_var(arg)
    if running is not None:  # §21: over the elements 1..i of the list, i the conjunct's
        n = min(env.i or 0, len(_elements(env.bindings[running])))
        values = [_eval(arg, env.with_({**env.current, running: k}, env.i)) for k in range(n)]
    elif var is None:
        values = [_eval(arg, env)]
    else:
        n = len(_elements(env.bindings[var]))
        values = [_eval(arg, env.with_({**env.current, var: k}, k + 1)) for k in range(n)]
    present = [v for v in values if v is not None]
    if name == "count":
        return len(present)
    if name == "sum":
        if not all(_is_num(v) for v in present):
            return None
        total: Value = 0
        for v in present:
            total = total + v
        return total
    if name == "avg":
        if not present or not all(_is_num(v) for v in present):
            return None
        total = 0
        for v in present:
            total = total + v
        return total / len(present)
    if not present or not all(_comparable(present[0], v) for v in present):
        return None
    return min(present) if name == "min" else max(present)


def _eval(e: ast.Expr, env: _Env) -> Value:
    """Evaluate an expression to a value; None is NULL (§5)."""
    if isinstance(e, ast.Literal):
        return e.value
    if isinstance(e, ast.AttrRef):
        ev = _ref_event(e, env)
        return None if ev is None else _attr(ev, e.attr)
    if isinstance(e, ast.VarRef):
        if e.var in env.bindings:
            b = env.bindings[e.var]
            return (tuple(env.events[x].id for x in b) if isinstance(b, tuple)
                    else env.events[b].id)
        if e.var == "start":
            return env.start
        if e.var == "end":
            return env.end
        return None
    if isinstance(e, ast.Unary):
        x = _eval(e.operand, env)
        if e.op == "not":
            return _not3(_bool(x))
        if e.op == "-":
            return -x if _is_num(x) else None
        raise EngineError(f"oracle: unknown unary operator {e.op!r}")
    if isinstance(e, ast.Binary):
        op = e.op.lower()
        if op in ("and", "or"):
            lv, rv = _bool(_eval(e.left, env)), _bool(_eval(e.right, env))
            return _and3((lv, rv)) if op == "and" else _or3((lv, rv))
        a, b = _eval(e.left, env), _eval(e.right, env)
        if op == "<>":
            op = "!="
        if op in _CMP:
            return _compare(op, a, b)
        return _arith(op, a, b)
    if isinstance(e, ast.Between):
        x, lo, hi = _eval(e.operand, env), _eval(e.low, env), _eval(e.high, env)
        r = _and3((_compare("<=", lo, x), _compare("<=", x, hi)))
        return _not3(r) if e.negated else r
    if isinstance(e, ast.InList):
        x = _eval(e.operand, env)
        r = _or3(_compare("=", x, _eval(item, env)) for item in e.items)
        return _not3(r) if e.negated else r
    if isinstance(e, ast.Like):
        r = _like(_eval(e.operand, env), _eval(e.pattern, env))
        return _not3(r) if e.negated else r
    if isinstance(e, ast.IsNull):
        r2 = _eval(e.operand, env) is None
        return not r2 if e.negated else r2
    if isinstance(e, ast.Call):
        name = e.name.lower()
        if _is_aggregate(e):
            return _aggregate(e, env)
        if name in ("start", "end") and not e.args:
            return env.start if name == "start" else env.end
        if name == "match_number" and not e.args:
            return env.match_number
        if name == "classifier" and not e.args:
            return env.classifier
        if name == "final" and len(e.args) == 1:  # §19: over the whole match
            return _eval(e.args[0], env if env.whole is None else env.whole)
        args = [_eval(a, env) for a in e.args]
        if e.name in env.udfs:
            return env.udfs[e.name](*args)
        if name == "coalesce":
            return next((a for a in args if a is not None), None)
        if name in _BUILTINS:
            try:
                return _BUILTINS[name](*args)
            except TypeError:
                raise QueryValidationError(
                    f"wrong number of arguments for {e.name}()") from None
        raise QueryValidationError(f"unknown function {e.name!r}")
    if isinstance(e, ast.Equivalence):
        evs = [env.events[x] for b in env.bindings.values() for x in _elements(b)]
        return len({_equiv_value(ev, e.attrs) for ev in evs}) <= 1
    raise EngineError(f"oracle: unknown expression node {type(e).__name__}")


def _equiv_value(ev: _Event, attrs: Sequence[str]) -> tuple[Value, ...]:
    """Grouping value (§6): NULL equals NULL because None == None in a tuple."""
    return tuple(_attr(ev, a) for a in attrs)


def _eval_conjunct(c: ast.Expr, env: _Env, *, fixed: tuple[str, int] | None = None) -> bool | None:
    """A WHERE conjunct over a match, with the Kleene quantifiers of §5.

    ``fixed=(v, k)`` evaluates it for the new element k (1-based) of list variable v only (the
    incremental test of skip-till-next-match, §8).
    """
    if any(v not in env.bindings for v in _mentioned(c)):
        return True  # a conjunct on an unbound variable does not apply (§5)
    refs = _outer_refs(c)
    lists = {v for v in {r.var for r in refs} if isinstance(env.bindings[v], tuple)}
    indexed = {r.var for r in refs if r.index is not None and r.index.kind is ast.IndexKind.CURRENT}
    indexed |= _running_vars(c)
    lists |= _running_vars(c)
    has_prev = any(r.index is not None and r.index.kind is ast.IndexKind.CURRENT
                   and r.index.offset < 0 for r in refs)
    unindexed = {r.var for r in refs if r.index is None and r.var in lists} - indexed
    i_range: list[int | None]
    if fixed is not None and fixed[0] in indexed:
        k = fixed[1]
        i_range = [] if has_prev and k < 2 else [k]
    elif indexed:
        n = max(len(_elements(env.bindings[v])) for v in indexed)
        i_range = list(range(2 if has_prev else 1, n + 1))
    else:
        i_range = [None]
    free = sorted(unindexed - ({fixed[0]} if fixed else set()))
    results: list[bool | None] = []
    for i in i_range:
        base = {v: i - 1 for v in indexed} if i is not None else {}
        if fixed is not None and fixed[0] in unindexed:
            base[fixed[0]] = fixed[1] - 1
        for combo in itertools.product(*(range(len(_elements(env.bindings[v]))) for v in free)):
            current = {**base, **dict(zip(free, combo, strict=True))}
            results.append(_bool(_eval(c, env.with_(current, i))))
    return _and3(results)


# ---------------------------------------------------------------------------------------------
# Enumeration of occurrences (§2, §3)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Occ:
    """An occurrence of a sub-pattern: its bindings and the (local) positions it binds."""

    bindings: Mapping[str, Bound]
    events: frozenset[int]


class _Enumerator:
    """Enumerates occurrences of pattern nodes over one partition's events."""

    def __init__(self, events: Sequence[_Event], prune: Callable[[_Occ], bool], *,
                 grouping: bool = False, relax: bool = False) -> None:
        self.events = events
        self.prune = prune
        self.count = 0
        self.grouping = grouping
        """maximal-grouping (§18): a Kleene item of an AND does not interleave with the others."""
        self.relax = relax
        """§18: every Kleene's maximum is lifted (the group is formed as for ``{n,}``)."""

    def _emit(self, occs: list[_Occ]) -> list[_Occ]:
        self.count += len(occs)
        if self.count > MAX_CANDIDATES:
            raise OracleLimitError(
                f"the oracle enumerated more than {MAX_CANDIDATES} partial matches; it is a "
                f"brute-force reference for tiny inputs — use another --engine")
        return [o for o in occs if self.prune(o)]

    def occ(self, p: ast.Pattern, subset: Sequence[int] | None = None) -> list[_Occ]:
        """Occurrences of ``p``; ``subset`` restricts the events that may be bound."""
        allowed = range(len(self.events)) if subset is None else subset
        if isinstance(p, ast.EventPattern):
            return self._emit([_Occ({p.var: i}, frozenset((i,))) for i in allowed
                               if p.type is None or self.events[i].type == p.type])
        if isinstance(p, ast.Within):
            return [o for o in self.occ(p.body, subset)
                    if _span_ok(p.window, o.events, self.events)]
        if isinstance(p, ast.Or):
            return [o for item in p.items for o in self.occ(item, subset)]
        if isinstance(p, ast.Seq):
            return self._seq([i for i in p.items if not isinstance(i, ast.Not)], subset)
        if isinstance(p, ast.And):
            return self._and([i for i in p.items if not isinstance(i, ast.Not)], subset)
        if isinstance(p, ast.AnyOf):
            items = [i for i in p.items if not isinstance(i, ast.Not)]
            return [o for chosen in itertools.combinations(items, p.k)
                    for o in self._and(list(chosen), subset)]
        if isinstance(p, ast.Kleene):
            return self._kleene(p, subset)
        if isinstance(p, ast.Not):
            raise QueryValidationError("NOT is only allowed directly inside SEQ or AND")
        raise EngineError(f"oracle: unknown pattern node {type(p).__name__}")

    def _seq(self, items: Sequence[ast.Pattern], subset: Sequence[int] | None) -> list[_Occ]:
        # every event of item i precedes every event of item j > i: compare with the max so far
        partial = [_Occ({}, frozenset())]
        for item in items:
            occs = self.occ(item, subset)
            partial = self._emit([
                _Occ({**acc.bindings, **o.bindings}, acc.events | o.events)
                for acc in partial for o in occs
                if not (o.events and acc.events and min(o.events) <= max(acc.events))])
        return partial

    def _and(self, items: Sequence[ast.Pattern], subset: Sequence[int] | None) -> list[_Occ]:
        if self.grouping and any(isinstance(i, ast.Kleene) for i in items):
            return self._and_apart(items, subset)
        partial = [_Occ({}, frozenset())]
        for item in items:
            occs = self.occ(item, subset)
            partial = self._emit([_Occ({**a.bindings, **o.bindings}, a.events | o.events)
                                  for a in partial for o in occs if not a.events & o.events])
        return partial

    def _and_apart(self, items: Sequence[ast.Pattern], subset: Sequence[int] | None
                   ) -> list[_Occ]:
        """AND under maximal-grouping (§18): as AND, and the events of a Kleene item lie all
        before or all after the events of each other item (``A+ & B = (A+;B) | (B;A+)``)."""
        def apart(x: frozenset[int], y: frozenset[int]) -> bool:
            return not x or not y or max(x) < min(y) or max(y) < min(x)

        partial: list[tuple[_Occ, tuple[tuple[frozenset[int], bool], ...]]] = [
            (_Occ({}, frozenset()), ())]
        for item in items:
            occs = self.occ(item, subset)
            kl = isinstance(item, ast.Kleene)
            nxt = [(_Occ({**a.bindings, **o.bindings}, a.events | o.events),
                    parts + ((o.events, kl),))
                   for a, parts in partial for o in occs
                   if not a.events & o.events
                   and all(apart(ev, o.events) for ev, k in parts if k or kl)]
            kept = {id(o) for o in self._emit([o for o, _p in nxt])}
            partial = [(o, p) for o, p in nxt if id(o) in kept]
        return [o for o, _p in partial]

    def _kleene(self, p: ast.Kleene, subset: Sequence[int] | None) -> list[_Occ]:
        body = [o for o in self.occ(p.body, subset) if o.events]  # a repetition binds >= 1 event
        body.sort(key=lambda o: min(o.events))
        names = _positive_vars(p.body)
        out: list[_Occ] = []
        seen: set[tuple[tuple[str, Bound], ...]] = set()

        def grow(reps: list[_Occ], top: int) -> None:
            if len(reps) >= p.min:
                binds: dict[str, Bound] = {}
                for v in names:
                    binds[v] = tuple(x for r in reps if v in r.bindings
                                     for x in _elements(r.bindings[v]))
                occ = _Occ(binds, frozenset().union(*(r.events for r in reps)))
                if not self._emit([occ]):
                    return  # pruned: every extension is pruned too (windows, equivalence)
                # §2: one match per mapping -- another split of the same events into
                # repetitions (or another empty branch) forms the same lists again
                key = tuple(sorted(binds.items()))
                if key not in seen:
                    seen.add(key)
                    out.append(occ)
            if p.max is not None and not self.relax and len(reps) >= p.max:
                return
            for o in body:
                if min(o.events) > top:
                    grow([*reps, o], max(o.events))

        grow([], -1)
        return out


def _span_ok(window: ast.Window, positions: Iterable[int], events: Sequence[_Event]) -> bool:
    pos = list(positions)
    if not pos:
        return True
    if window.is_count:
        return max(pos) - min(pos) < window.amount
    ts = [events[i].ts for i in pos]
    return max(ts) - min(ts) <= window.microseconds


# ---------------------------------------------------------------------------------------------
# The query, prepared
# ---------------------------------------------------------------------------------------------


def _split_and(e: ast.Expr) -> list[ast.Expr]:
    if isinstance(e, ast.Binary) and e.op.lower() == "and":
        return _split_and(e.left) + _split_and(e.right)
    return [e]


@dataclass(frozen=True, slots=True)
class _Prepared:
    aq: AnalyzedQuery
    order: tuple[str, ...]
    """Positive variables in pattern order."""
    var_order: Mapping[str, int]
    positive: tuple[ast.Expr, ...]
    """Conjuncts that restrict matches."""
    negation: Mapping[int, tuple[ast.Expr, ...]]
    """id(Not node) -> conjuncts that restrict it."""
    equivalence: tuple[str, ...]
    types: Mapping[str, str | None]
    list_vars: frozenset[str]


def _prepare(aq: AnalyzedQuery) -> _Prepared:
    q = aq.query
    pattern = q.pattern
    conjuncts = list(aq.conjuncts)
    if not conjuncts and q.where is not None:
        conjuncts = _split_and(q.where)
    equivalence = list(aq.equivalence)
    plain: list[ast.Expr] = []
    for c in conjuncts:
        if isinstance(c, ast.Equivalence):
            equivalence.extend(a for a in c.attrs if a not in equivalence)
        else:
            plain.append(c)
    order = tuple(_positive_vars(pattern))
    if not order:
        raise QueryValidationError("the pattern has no positive variable to match")
    # every NOT at every depth (§4, "Nested negation"), with the NOTs whose bodies hold it
    outer: dict[int, tuple[int, ...]] = {}
    owner: dict[str, int] = {}

    def nest(p: ast.Pattern, chain: tuple[int, ...]) -> None:
        for n in _nots(p):
            outer[id(n)] = chain
            owner.update((v, id(n)) for v in _positive_vars(n.body))
            nest(n.body, (*chain, id(n)))

    nest(pattern, ())
    negation: dict[int, list[ast.Expr]] = {k: [] for k in outer}
    positive: list[ast.Expr] = []
    for c in plain:
        owners = {owner[v] for v in _mentioned(c) if v in owner}
        inner = [k for k in owners if owners <= {k, *outer[k]}]
        if owners and not inner:
            raise QueryValidationError(
                "a condition may not mention variables of two different NOTs (unless one "
                "lies inside the other's body)")
        if owners:
            negation[inner[0]].append(c)
        else:
            positive.append(c)
    types: dict[str, str | None] = {}
    list_vars: set[str] = set()

    def walk(p: ast.Pattern, in_rep: bool) -> None:
        if isinstance(p, ast.EventPattern):
            types[p.var] = p.type
            if in_rep:
                list_vars.add(p.var)
        elif isinstance(p, ast.Kleene):
            walk(p.body, True)
        elif isinstance(p, ast.Not | ast.Within):
            walk(p.body, in_rep)
        else:
            for item in p.items:
                walk(item, in_rep)

    walk(pattern, False)
    _validate(aq, pattern)
    return _Prepared(aq, order, {v: i for i, v in enumerate(order)}, tuple(positive),
                     {k: tuple(v) for k, v in negation.items()}, tuple(equivalence), types,
                     frozenset(list_vars))


def _validate(aq: AnalyzedQuery, pattern: ast.Pattern) -> None:
    """The checks of §14 the oracle depends on (the semantic layer should reject these first)."""
    window = aq.within

    def walk(p: ast.Pattern, parent: ast.Pattern | None, win: ast.Window | None,
             in_rep: bool, in_not: bool) -> None:
        if isinstance(p, ast.Not):
            if not isinstance(parent, ast.Seq | ast.And):
                raise QueryValidationError("NOT is only allowed directly inside SEQ or AND")
            if in_rep:
                raise QueryValidationError("NOT inside a repetition is not supported")
            # §4 "Nested negation": the NOTs of a NOT's body are bounded by its interval
            walk(p.body, p, None, in_rep, True)
            return
        if isinstance(p, ast.Seq):
            flat = _flat(p.items)
            positives = [not isinstance(i, ast.Not) for i in flat]
            for k, item in enumerate(flat):
                if isinstance(item, ast.Not) and win is None and not in_not and (
                        not any(positives[:k]) or not any(positives[k + 1:])):
                    raise QueryValidationError(
                        "a leading or trailing NOT needs a window (WITHIN) to bound it")
        if isinstance(p, ast.EventPattern):
            return
        if isinstance(p, ast.Within):
            walk(p.body, p, p.window, in_rep, in_not)
            return
        if isinstance(p, ast.Kleene):
            walk(p.body, p, win, True, in_not)
            return
        for item in (_flat(p.items) if isinstance(p, ast.Seq) else p.items):
            walk(item, p, win, in_rep, in_not)

    walk(pattern, None, window, False, False)
    if aq.strategy is ast.Strategy.SKIP_TILL_NEXT_MATCH:
        branches = pattern.items if isinstance(pattern, ast.Or) else (pattern,)
        for b in branches:
            _stnm_components(b)


# ---------------------------------------------------------------------------------------------
# Negation (§4)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Cand:
    """A candidate match inside one partition."""

    events: Sequence[_Event]
    bindings: Mapping[str, Bound]
    positions: frozenset[int]


def _bound_positions(vars_: Iterable[str], bindings: Mapping[str, Bound]) -> list[int]:
    return [x for v in vars_ if v in bindings for x in _elements(bindings[v])]


def _negation_ok(prep: _Prepared, cand: _Cand, enum: _Enumerator) -> bool:
    events = cand.events
    all_pos = sorted(cand.positions)

    def forbidden(n: ast.Not, lo: Callable[[int], bool], bindings: Mapping[str, Bound],
                  stream: Sequence[int]) -> bool:
        """True if an occurrence of n.body inside the interval could bind it: its conjuncts
        hold with ``bindings`` and its own NOTs accept it, the interval being its stream
        (§4, "Nested negation")."""
        subset = [q for q in stream if lo(q)]
        if prep.equivalence:
            value = _equiv_value(events[all_pos[0]], prep.equivalence)
            subset = [q for q in subset if _equiv_value(events[q], prep.equivalence) == value]
        if not subset:
            return False
        for o in enum.occ(n.body, subset):
            both = {**bindings, **o.bindings}
            env = _Env(events, both, prep.aq.udfs)
            if all(_eval_conjunct(c, env) is True for c in prep.negation[id(n)]) and walk(
                    n.body, None, sorted(o.events), both, subset):
                return True
        return False

    def walk(p: ast.Pattern, win: ast.Window | None, scope: list[int],
             bindings: Mapping[str, Bound], stream: Sequence[int]) -> bool:
        """Do the NOTs of ``p`` accept ``bindings`` (over the positions ``stream``)?"""
        if isinstance(p, ast.EventPattern | ast.Kleene):
            return True  # NOT inside a repetition is rejected by validation
        if isinstance(p, ast.Within):
            inner = sorted(_bound_positions(_positive_vars(p.body), bindings))
            return walk(p.body, p.window, inner, bindings, stream)
        if isinstance(p, ast.Or | ast.AnyOf):  # only the branches the match took
            return all(walk(i, win, scope, bindings, stream) for i in p.items
                       if any(v in bindings for v in _positive_vars(i)))
        if isinstance(p, ast.Not):
            return True
        items = tuple(_flat(p.items)) if isinstance(p, ast.Seq) else p.items
        if isinstance(p, ast.And):
            mine = _bound_positions(_positive_vars(p), bindings)
            for item in items:
                if isinstance(item, ast.Not) and mine:
                    lo, hi = min(mine), max(mine)

                    def between(q: int, lo: int = lo, hi: int = hi) -> bool:
                        return lo < q < hi

                    if forbidden(item, between, bindings, stream):
                        return False
        else:
            for k, item in enumerate(items):
                if not isinstance(item, ast.Not):
                    continue
                left = _bound_positions([v for i in items[:k] for v in _positive_vars(i)],
                                        bindings)
                right = _bound_positions([v for i in items[k + 1:] for v in _positive_vars(i)],
                                         bindings)
                if not forbidden(item, _interval(left, right, win, scope, events), bindings,
                                 stream):
                    continue
                return False
        return all(walk(i, win, scope, bindings, stream) for i in items
                   if not isinstance(i, ast.Not))

    return walk(prep.aq.pattern, prep.aq.within, all_pos, cand.bindings, range(len(events)))


def _interval(left: list[int], right: list[int], win: ast.Window | None, scope: list[int],
              events: Sequence[_Event]) -> Callable[[int], bool]:
    """The positions a NOT between ``left`` and ``right`` forbids (§4)."""
    lo = max(left) if left else None
    hi = min(right) if right else None
    first, last = (min(scope), max(scope)) if scope else (None, None)

    def inside(q: int) -> bool:
        if lo is not None:
            if q <= lo:
                return False
        elif win is not None and last is not None:  # leading NOT: the lead-in of the window
            if win.is_count and not last - q < win.amount:
                return False
            if not win.is_count and events[q].ts < events[last].ts - win.microseconds:
                return False
        if hi is not None:
            if q >= hi:
                return False
        elif win is not None and first is not None:  # trailing NOT: the tail of the window
            if win.is_count and not q - first < win.amount:
                return False
            if not win.is_count and events[q].ts > events[first].ts + win.microseconds:
                return False
        return True

    return inside


# ---------------------------------------------------------------------------------------------
# Strategies (§8)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Comp:
    """A component of a skip-till-next-match SEQ."""

    vars: tuple[str, ...]
    types: tuple[str | None, ...]
    min: int
    max: int | None
    is_list: bool
    windows: tuple[tuple[ast.Window, frozenset[str]], ...]


def _stnm_components(p: ast.Pattern) -> list[_Comp]:
    """Flatten a skip-till-next-match branch into components, or reject it (§8, §14)."""
    out: list[_Comp] = []
    hint = "; use USING skip-till-any-match"

    def walk(p: ast.Pattern, wins: tuple[tuple[ast.Window, frozenset[str]], ...]) -> None:
        if isinstance(p, ast.Seq):
            for item in p.items:
                walk(item, wins)
        elif isinstance(p, ast.Within):
            walk(p.body, (*wins, (p.window, frozenset(_positive_vars(p.body)))))
        elif isinstance(p, ast.Not):
            return
        elif isinstance(p, ast.EventPattern):
            out.append(_Comp((p.var,), (p.type,), 1, 1, False, wins))
        elif isinstance(p, ast.Kleene):
            if not isinstance(p.body, ast.EventPattern):
                raise QueryValidationError(
                    "skip-till-next-match supports Kleene only on an event type" + hint)
            out.append(_Comp((p.body.var,), (p.body.type,), p.min, p.max, True, wins))
        elif isinstance(p, ast.Or):
            if not all(isinstance(i, ast.EventPattern) for i in p.items):
                raise QueryValidationError(
                    "skip-till-next-match supports OR inside SEQ only between single events"
                    + hint)
            evs = [i for i in p.items if isinstance(i, ast.EventPattern)]
            out.append(_Comp(tuple(i.var for i in evs), tuple(i.type for i in evs), 1, 1, False,
                             wins))
        else:
            raise QueryValidationError(
                f"skip-till-next-match does not support {type(p).__name__.upper()}" + hint)

    walk(p, ())
    return out


def _closing_aggregates(e: ast.Expr) -> set[str]:
    """Variables aggregated in ``e`` over the whole list (not running, §21)."""
    if _is_aggregate(e):
        return set() if _upto_var(e) is not None else _mentioned(e)
    out: set[str] = set()
    for c in _children(e):
        out |= _closing_aggregates(c)
    return out


def _is_closing(c: ast.Expr, v: str) -> bool:
    if v in _closing_aggregates(c):
        return True
    return any(r.var == v and r.index is not None and (
        r.index.kind is ast.IndexKind.LAST
        or (r.index.kind is ast.IndexKind.ABSOLUTE and r.index.offset >= 2))
        for r in _outer_refs(c))


def _skip_till_next_ok(prep: _Prepared, cand: _Cand) -> bool:
    pattern = prep.aq.pattern
    branch = pattern
    if isinstance(pattern, ast.Or):
        branch = next(b for b in pattern.items
                      if any(v in cand.bindings for v in _positive_vars(b)))
    comps = _stnm_components(branch)
    comp_of = {v: k for k, c in enumerate(comps) for v in c.vars}
    at: dict[str, list[ast.Expr]] = {}
    for c in prep.positive:
        ms = [v for v in _mentioned(c) if v in prep.var_order]
        if ms:
            at.setdefault(max(ms, key=prep.var_order.__getitem__), []).append(c)
    events = cand.events
    pos = sorted(cand.positions)
    equiv = _equiv_value(events[pos[0]], prep.equivalence) if prep.equivalence else None
    udfs = prep.aq.udfs

    def fits(var: str, comp: _Comp, e: int, prefix: Mapping[str, Bound]) -> bool:
        ev = events[e]
        t = comp.types[comp.vars.index(var)]
        if t is not None and ev.type != t:
            return False
        if equiv is not None and _equiv_value(ev, prep.equivalence) != equiv:
            return False
        for w, scope in comp.windows:
            if not _span_ok(w, [*_bound_positions(scope, prefix), e], events):
                return False
        return True

    def can_take(var: str, comp: _Comp, e: int, prefix: Mapping[str, Bound]) -> bool:
        if not fits(var, comp, e, prefix):
            return False
        if comp.is_list:
            new = (*_elements(prefix.get(var, ())), e)
            env = _Env(events, {**prefix, var: new}, udfs)
            return all(_eval_conjunct(c, env, fixed=(var, len(new))) is True
                       for c in at.get(var, ()) if not _is_closing(c, var))
        env = _Env(events, {**prefix, var: e}, udfs)
        return all(_eval_conjunct(c, env) is True for c in at.get(var, ()))

    def can_close(comp: _Comp, prefix: Mapping[str, Bound]) -> bool:
        if not comp.is_list:
            return True
        var = comp.vars[0]
        lst = _elements(prefix.get(var, ()))
        if len(lst) < comp.min:
            return False
        env = _Env(events, {**prefix, var: tuple(lst)}, udfs)
        return all(_eval_conjunct(c, env) is True for c in at.get(var, ()) if _is_closing(c, var))

    for p in range(pos[0] + 1, pos[-1]):
        if p in cand.positions:
            continue
        last_before = max(x for x in cand.positions if x < p)
        j = next(comp_of[v] for v, b in cand.bindings.items() if last_before in _elements(b))
        # the prefix: what the run bound before p; components after j are not reached yet
        reached: dict[str, Bound] = {}
        for v, b in cand.bindings.items():
            if comp_of[v] > j:
                continue
            if isinstance(b, tuple):
                reached[v] = tuple(x for x in b if x < p)
            else:
                reached[v] = b
        cj = comps[j]
        if cj.is_list:
            v = cj.vars[0]
            if (cj.max is None or len(_elements(reached[v])) < cj.max) and can_take(v, cj, p,
                                                                                    reached):
                return False
        if not can_close(cj, reached):
            continue
        ext = dict(reached)
        for k in range(j + 1, len(comps)):
            ck = comps[k]
            if any(can_take(v, ck, p, ext) for v in ck.vars):
                return False
            if ck.min > 0 or not ck.is_list:
                break
            ext[ck.vars[0]] = ()
            if not can_close(ck, ext):
                break
    return True


def _contiguous(positions: Sequence[int]) -> bool:
    return all(b == a + 1 for a, b in itertools.pairwise(positions))


def _strategy_ok(prep: _Prepared, cand: _Cand) -> bool:
    s = prep.aq.strategy
    pos = sorted(cand.positions)
    if s is ast.Strategy.STRICT_CONTIGUITY:
        return _contiguous(pos)
    if s is ast.Strategy.PARTITION_CONTIGUITY:
        if not prep.equivalence:
            return _contiguous(pos)
        value = _equiv_value(cand.events[pos[0]], prep.equivalence)
        group = [i for i, ev in enumerate(cand.events)
                 if _equiv_value(ev, prep.equivalence) == value]
        rank = {p: r for r, p in enumerate(group)}
        return _contiguous([rank[p] for p in pos])
    if s is ast.Strategy.SKIP_TILL_NEXT_MATCH:
        return _skip_till_next_ok(prep, cand)
    return True


# ---------------------------------------------------------------------------------------------
# Policies (§9) and output order (§10)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Found:
    """An accepted match with global positions (what policies and ordering compare)."""

    cand: _Cand
    gbind: Mapping[str, tuple[int, ...]]
    """Variable -> global positions (a tuple even for single variables)."""
    gpos: tuple[int, ...]
    """Sorted global positions of all positive events."""


def _thesis_earlier(w: tuple[int, ...], x: tuple[int, ...]) -> bool | None:
    """Definition 4.4.12 of parallel-cep-without-splitter, literally: is the final match with
    sorted positions ``w`` earlier than ``x`` (None: neither)? Last events, then first events,
    then the same comparison on both with the last event removed."""
    while True:
        if not w or not x:
            return None if len(w) == len(x) else not w
        if w[-1] != x[-1]:
            return w[-1] < x[-1]
        if w[0] != x[0]:
            return w[0] < x[0]
        w, x = w[:-1], x[:-1]


def _per_var_key(f: _Found, order: Sequence[str]) -> tuple[Any, ...]:
    return tuple((1, *f.gbind[v]) if v in f.gbind else (0,) for v in order)


def _sort_output(found: list[_Found], order: Sequence[str]) -> list[_Found]:
    """Output order (§10): Definition 4.4.12 on the positions, then the bindings."""
    def cmp(a: _Found, b: _Found) -> int:
        e = _thesis_earlier(a.gpos, b.gpos)
        if e is not None:
            return -1 if e else 1
        ka, kb = _per_var_key(a, order), _per_var_key(b, order)
        return -1 if ka < kb else (1 if ka > kb else 0)
    return sorted(found, key=functools.cmp_to_key(cmp))


def _recency_key(f: _Found, order: Sequence[str]) -> tuple[Any, ...]:
    per_var = tuple((1, *sorted(f.gbind[v], reverse=True)) if v in f.gbind else (0,)
                    for v in reversed(order))
    return (tuple(reversed(f.gpos)), per_var)


def _ts_of(f: _Found, var: str) -> list[int]:
    return [f.cand.events[x].ts for x in _elements(f.cand.bindings[var])]


def _local_of(f: _Found, var: str) -> list[int]:
    return list(_elements(f.cand.bindings[var]))


def _apply_pick(found: list[_Found], pick: ast.Pick) -> list[_Found]:
    v = pick.var
    if pick.within is not None and pick.from_var is not None:
        u, w = pick.from_var, pick.within
        kept = []
        for f in found:
            if v in f.gbind and u in f.gbind:
                if w.is_count:
                    ok = all(abs(a - b) < w.amount
                             for a in _local_of(f, v) for b in _local_of(f, u))
                else:
                    ok = all(abs(a - b) <= w.microseconds
                             for a in _ts_of(f, v) for b in _ts_of(f, u))
                if not ok:
                    continue
            kept.append(f)
        found = kept
    if pick.mode is ast.PickMode.EACH:
        return found
    groups: dict[tuple[Any, ...], list[_Found]] = {}
    for f in found:
        key = (tuple(sorted((k, b) for k, b in f.gbind.items() if k != v)), v in f.gbind)
        groups.setdefault(key, []).append(f)
    choose = min if pick.mode is ast.PickMode.FIRST else max
    chosen = {id(choose(g, key=lambda f: f.gbind.get(v, ()))) for g in groups.values()}
    return [f for f in found if id(f) in chosen]


def _apply_recent(found: list[_Found], order: Sequence[str]) -> list[_Found]:
    best: dict[int, _Found] = {}
    for f in found:
        k = f.gpos[-1]
        if k not in best or _recency_key(f, order) > _recency_key(best[k], order):
            best[k] = f
    return list(best.values())


def _candidate_conditions(prep: _Prepared) -> dict[str, list[ast.Expr]]:
    """Per positive variable, its candidate conditions (§16): the conjuncts that mention it
    alone, call no user function and, for a list variable, read it only elementwise."""
    udfs = set(prep.aq.udfs)

    def calls(e: ast.Expr) -> set[str]:
        own = {e.name} if isinstance(e, ast.Call) else set()
        return own.union(*(calls(c) for c in _children(e)))

    def all_refs(e: ast.Expr) -> list[ast.Expr]:
        own: list[ast.Expr] = [e] if isinstance(e, ast.AttrRef | ast.VarRef) else []
        return own + [r for c in _children(e) for r in all_refs(c)]

    def elementwise(e: ast.Expr) -> bool:
        if _is_aggregate(e):
            return False
        for r in all_refs(e):
            if isinstance(r, ast.VarRef):
                return False
            assert isinstance(r, ast.AttrRef)
            if r.index is not None and not (r.index.kind is ast.IndexKind.CURRENT
                                            and r.index.offset == 0):
                return False
        return all(not _is_aggregate(c) for c in _subexprs(e))

    out: dict[str, list[ast.Expr]] = {v: [] for v in prep.order}
    for c in prep.positive:
        m = _mentioned(c)
        if len(m) != 1 or calls(c) & udfs:
            continue
        v = next(iter(m))
        if v not in out or (v in prep.list_vars and not elementwise(c)):
            continue
        out[v].append(c)
    return out


def _subexprs(e: ast.Expr) -> list[ast.Expr]:
    return [e] + [x for c in _children(e) for x in _subexprs(c)]


def _apply_coverage(found: list[_Found], prep: _Prepared) -> list[_Found]:
    """EMIT COVERAGE (§16): keep the matches no other match covers."""
    conds = _candidate_conditions(prep)
    udfs = prep.aq.udfs
    cand_cache: dict[tuple[int, int, str], bool] = {}

    def candidate(part: Sequence[_Event], x: int, v: str) -> bool:
        key = (id(part), x, v)
        if key not in cand_cache:
            t = prep.types.get(v)
            ok = t is None or part[x].type == t
            if ok:
                b: Bound = (x,) if v in prep.list_vars else x
                env = _Env(part, {v: b}, udfs)
                ok = all(_eval_conjunct(c, env) is True for c in conds[v])
            cand_cache[key] = ok
        return cand_cache[key]

    run_cache: dict[tuple[int, tuple[Value, ...], str], dict[int, int]] = {}

    def run_of(part: Sequence[_Event], eq: tuple[Value, ...], v: str, x: int) -> int:
        """The run (its first relevant event) of event x for variable v in its sub-stream."""
        key = (id(part), eq, v)
        if key not in run_cache:
            runs: dict[int, int] = {}
            start: int | None = None
            for y in range(len(part)):
                if prep.equivalence and _equiv_value(part[y], prep.equivalence) != eq:
                    continue
                if not any(candidate(part, y, u) for u in prep.order):
                    continue  # not relevant: invisible to adjacency
                if candidate(part, y, v):
                    if start is None:
                        start = y
                    runs[y] = start
                else:
                    start = None
            run_cache[key] = runs
        return run_cache[key][x]

    def signature(f: _Found) -> tuple[Any, ...]:
        part = f.cand.events
        first = min(f.cand.positions)
        eq = _equiv_value(part[first], prep.equivalence) if prep.equivalence else ()
        sig: list[Any] = [id(part), eq]
        for v in prep.order:
            if v not in f.cand.bindings:
                sig.append(None)
                continue
            sig.append(tuple(run_of(part, eq, v, x) for x in _elements(f.cand.bindings[v])))
        return tuple(sig)

    def positions(f: _Found) -> tuple[int, ...]:
        return tuple(x for v in prep.order if v in f.cand.bindings
                     for x in _elements(f.cand.bindings[v]))

    sigs = [signature(f) for f in found]
    pos = [positions(f) for f in found]
    out = []
    for i, f in enumerate(found):
        covered = any(j != i and sigs[j] == sigs[i] and pos[j] != pos[i]
                      and all(q >= p for p, q in zip(pos[i], pos[j], strict=True))
                      for j in range(len(found)))
        if not covered:
            out.append(f)
    return out


def _select(found: list[_Found], analyzed: AnalyzedQuery, order: Sequence[str]) -> list[_Found]:
    """PICK (in the order written), then EMIT RECENT."""
    for pick in analyzed.query.picks:
        found = _apply_pick(found, pick)
    if analyzed.emit is ast.Emit.RECENT:
        found = _apply_recent(found, order)
    return found


def _apply_consume(found: list[_Found], consume: ast.Consume, order: Sequence[str],
                   analyzed: AnalyzedQuery, *, select: bool = True) -> list[_Found]:
    """The walk in output order (§9): a match is emitted if none of its events is consumed
    and (``select``) it survives PICK and EMIT RECENT among the matches still valid at that
    point."""
    consumed: set[int] = set()
    out = []
    survivors: set[int] | None = None
    for f in found:
        if consumed & set(f.gpos):
            continue
        if survivors is None and select:
            valid = [g for g in found if not consumed & set(g.gpos)]
            survivors = {id(g) for g in _select(valid, analyzed, order)}
        if survivors is not None and id(f) not in survivors:
            continue
        out.append(f)
        survivors = None
        names = order if consume.all_vars else consume.vars
        for v in names:
            consumed.update(f.gbind.get(v, ()))
    return out


# ---------------------------------------------------------------------------------------------
# RETURN (§11)
# ---------------------------------------------------------------------------------------------


def _expr_text(e: ast.Expr) -> str:
    """The canonical text of an expression: the default name of a RETURN item (§11)."""
    from ..lang.printer import expr_text

    return expr_text(e)


def _return_values(prep: _Prepared, f: _Found, start: int, end: int,
                   numbers: Mapping[int, int], env: _Env | None = None) -> dict[str, Any]:
    items = prep.aq.query.returns
    if not items:
        return {}
    if env is None:
        env = _Env(f.cand.events, f.cand.bindings, prep.aq.udfs, start=start, end=end,
                   match_number=numbers.get(id(f.cand)))
    out: dict[str, Any] = {}
    for item in items:
        name = item.alias or _expr_text(item.expr)
        elementwise = {r.var for r in _outer_refs(item.expr)
                       if r.var in env.bindings and isinstance(env.bindings[r.var], tuple)
                       and (r.index is None or r.index.kind is ast.IndexKind.CURRENT)}
        if len(elementwise) > 1:
            raise QueryValidationError(
                f"RETURN item {name!r} references several list variables elementwise "
                f"({', '.join(sorted(elementwise))}); use an index or an aggregate")
        if elementwise:
            v = elementwise.pop()
            n = len(_elements(env.bindings[v]))
            out[name] = [_eval(item.expr, env.with_({v: k}, k + 1)) for k in range(n)]
        else:
            out[name] = _eval(item.expr, env)
    return out


def _row_matches(prep: _Prepared, f: _Found, m: Match, numbers: Mapping[int, int]
                 ) -> list[Match]:
    """EMIT ROWS (§19): one record per row r of the match (rows of EXCLUDE variables left
    out), in row order: ``row`` = r's id, then RETURN over the match's bindings restricted to
    the rows at or before r (a list keeps its prefix, possibly empty; a single variable
    mapped later is unbound), ``classifier()`` = r's variable, ``final(x)`` over the whole
    match."""
    excluded = prep.aq.query.rows or ()
    evs = f.cand.events
    bound = f.cand.bindings
    rows = sorted((x, v) for v, b in bound.items() if v not in excluded for x in _elements(b))
    out = []
    number = numbers.get(id(f.cand))
    for x, v in rows:
        upto: dict[str, Bound] = {}
        for w, b in bound.items():
            if isinstance(b, tuple):
                upto[w] = tuple(y for y in b if y <= x)
            elif b <= x:
                upto[w] = b
        whole = _Env(evs, bound, prep.aq.udfs, start=m.start, end=m.end,
                     match_number=number, classifier=v)
        env = _Env(evs, upto, prep.aq.udfs, start=m.start, end=evs[x].ts,
                   match_number=number, classifier=v, whole=whole)
        values = {"row": evs[x].id, **_return_values(prep, f, m.start, evs[x].ts, numbers, env)}
        out.append(Match(m.query, m.bindings, m.start, m.end, values))
    return out


# ---------------------------------------------------------------------------------------------
# The oracle
# ---------------------------------------------------------------------------------------------


def _partitions(events: list[_Event], keys: Sequence[str]) -> list[list[_Event]]:
    if not keys:
        return [events]
    groups: dict[tuple[Value, ...], list[_Event]] = {}
    for ev in events:
        groups.setdefault(tuple(_attr(ev, k) for k in keys), []).append(ev)
    return list(groups.values())


def _candidates(prep: _Prepared, part: list[_Event], *, relax: bool = False) -> Iterator[_Cand]:
    aq = prep.aq
    contiguous = aq.query.after_match is not None

    def prune(o: _Occ) -> bool:
        # Sound pruning: windows and equivalence only get harder as events are added.
        if aq.within is not None and not _span_ok(aq.within, o.events, part):
            return False
        if contiguous and o.events and max(o.events) - min(o.events) + 1 != len(o.events):
            return False  # §19 patterns only add later events: a gap stays a gap
        if prep.equivalence:
            return len({_equiv_value(part[i], prep.equivalence) for i in o.events}) <= 1
        return True

    enum = _Enumerator(part, prune, grouping=aq.strategy is ast.Strategy.MAXIMAL_GROUPING,
                       relax=relax)
    for o in enum.occ(aq.pattern):
        if not o.events:
            continue  # a match binds at least one event (§2)
        cand = _Cand(part, o.bindings, o.events)
        env = _Env(part, o.bindings, aq.udfs)
        if not all(_eval_conjunct(c, env) is True for c in prep.positive):
            continue
        if not _negation_ok(prep, cand, enum):
            continue
        if not _strategy_ok(prep, cand):
            continue
        yield cand


def _kleene_vars(p: ast.Pattern, bounded: bool = False, inside: bool = False
                 ) -> dict[str, bool]:
    """List variables (inside a Kleene) -> is some enclosing Kleene bounded (finite max)?"""
    if isinstance(p, ast.EventPattern):
        return {p.var: bounded} if inside else {}
    if isinstance(p, ast.Kleene):
        return _kleene_vars(p.body, bounded or p.max is not None, True)
    if isinstance(p, ast.Not):
        return {}
    if isinstance(p, ast.Within):
        return _kleene_vars(p.body, bounded, inside)
    out: dict[str, bool] = {}
    for item in p.items:
        out.update(_kleene_vars(item, bounded, inside))
    return out


def _grouped(prep: _Prepared, part: list[_Event]) -> list[_Cand]:
    """maximal-grouping (§18): the candidates whose Kleene lists are maximal (under inclusion,
    with every other binding fixed) among the candidates with every Kleene maximum lifted;
    a bounded Kleene then takes every subset of its maximal group that is a candidate."""
    bounded = _kleene_vars(prep.aq.pattern)

    def fixed(c: _Cand) -> tuple[Any, ...]:
        return (frozenset(c.bindings),
                tuple(sorted((v, b) for v, b in c.bindings.items() if v not in bounded)))

    def sets(c: _Cand) -> dict[str, frozenset[int]]:
        return {v: frozenset(_elements(b)) for v, b in c.bindings.items() if v in bounded}

    groups: dict[tuple[Any, ...], list[tuple[_Cand, dict[str, frozenset[int]]]]] = {}
    for c in _candidates(prep, part, relax=True):
        groups.setdefault(fixed(c), []).append((c, sets(c)))
    maximal: dict[tuple[Any, ...], list[dict[str, frozenset[int]]]] = {}
    found: list[_Cand] = []
    for key, g in groups.items():
        for c, cs in g:
            if any(o is not c and all(cs[v] <= os[v] for v in cs)
                   and any(cs[v] < os[v] for v in cs) for o, os in g):
                continue
            maximal.setdefault(key, []).append(cs)
            found.append(c)
    if not any(bounded.values()):
        return found
    out = []
    for c in _candidates(prep, part):
        cs = sets(c)
        for ms in maximal.get(fixed(c), ()):
            if all((cs[v] <= ms[v] and (bool(cs[v]) or not ms[v])) if bounded[v]
                   else cs[v] == ms[v] for v in cs):
                out.append(c)
                break
    return out


# ---------------------------------------------------------------------------------------------
# AFTER MATCH SKIP (§19): the preferred match per start row, and where the next attempt starts
# ---------------------------------------------------------------------------------------------

_Assign = tuple[tuple[str, int], ...]


def _preferred(p: ast.Pattern, i: int, n: int, cls: tuple[str, ...],
               viable: frozenset[tuple[str, ...]]) -> Iterator[tuple[int, _Assign,
                                                                      tuple[str, ...]]]:
    """Every way ``p`` maps the rows ``i, i+1, ...`` (contiguously), in SQL's preference
    order (§19): ``(next row, (variable, row) pairs, classifier sequence so far)``. A mapping
    whose classifier sequence is no prefix of a candidate's (``viable``) is cut (sound
    pruning: no candidate can complete it)."""
    if isinstance(p, ast.EventPattern):
        nxt = (*cls, p.var)
        if i < n and nxt in viable:
            yield i + 1, ((p.var, i),), nxt
        return
    if isinstance(p, ast.Within):
        yield from _preferred(p.body, i, n, cls, viable)
        return
    if isinstance(p, ast.Seq):
        yield from _preferred_seq(p.items, i, n, cls, viable)
        return
    if isinstance(p, ast.Or):
        for item in p.items:  # the branch written first is preferred
            yield from _preferred(item, i, n, cls, viable)
        return
    if isinstance(p, ast.Kleene):
        yield from _preferred_rep(p, 0, i, n, cls, viable)
        return
    raise AssertionError(f"AFTER MATCH SKIP does not define {type(p).__name__}")


def _preferred_seq(items: Sequence[ast.Pattern], i: int, n: int, cls: tuple[str, ...],
                   viable: frozenset[tuple[str, ...]]
                   ) -> Iterator[tuple[int, _Assign, tuple[str, ...]]]:
    if not items:
        yield i, (), cls
        return
    for j, a, c in _preferred(items[0], i, n, cls, viable):
        for k, b, d in _preferred_seq(items[1:], j, n, c, viable):
            yield k, a + b, d


def _preferred_rep(p: ast.Kleene, count: int, i: int, n: int, cls: tuple[str, ...],
                   viable: frozenset[tuple[str, ...]]
                   ) -> Iterator[tuple[int, _Assign, tuple[str, ...]]]:
    more = p.max is None or count < p.max
    stop = count >= p.min
    for choice in (("stop", "more") if p.reluctant else ("more", "stop")):
        if choice == "stop" and stop:
            yield i, (), cls
        elif choice == "more" and more:
            for j, a, c in _preferred(p.body, i, n, cls, viable):
                if j == i:
                    continue  # a repetition maps at least one row
                for k, b, d in _preferred_rep(p, count + 1, j, n, c, viable):
                    yield k, a + b, d


def _rows_key(bindings: Mapping[str, Bound]) -> frozenset[tuple[str, tuple[int, ...]]]:
    return frozenset((v, _elements(b)) for v, b in bindings.items() if _elements(b))


def _after_match(prep: _Prepared, part: list[_Event], cands: list[_Cand]) -> list[_Cand]:
    """§19 literally: from the partition's first row, the match of an attempt at row r is
    the first mapping of the pattern onto rows r, r+1, ... in preference order that is a
    candidate; no mapping is a candidate -> try r+1; else the SKIP rule gives the next r."""
    am = prep.aq.query.after_match
    assert am is not None
    by_rows: dict[frozenset[tuple[str, tuple[int, ...]]], _Cand] = {}
    starts: dict[int, set[tuple[str, ...]]] = {}
    for c in cands:
        by_rows.setdefault(_rows_key(c.bindings), c)
        order = sorted((x, v) for v, b in c.bindings.items() for x in _elements(b))
        seq = tuple(v for _x, v in order)
        pre = starts.setdefault(min(c.positions), set())
        for k in range(1, len(seq) + 1):
            pre.add(seq[:k])
    out: list[_Cand] = []
    r = 0
    n = len(part)
    while r < n:
        chosen: _Cand | None = None
        if r in starts:
            viable = frozenset(starts[r])
            for _j, assign, _cls in _preferred(prep.aq.pattern, r, n, (), viable):
                rows: dict[str, list[int]] = {}
                for v, x in assign:
                    rows.setdefault(v, []).append(x)
                got = by_rows.get(frozenset((v, tuple(xs)) for v, xs in rows.items()))
                if got is not None:
                    chosen = got
                    break
        if chosen is None:
            r += 1
            continue
        out.append(chosen)
        first, last = min(chosen.positions), max(chosen.positions)
        if am.mode is ast.SkipMode.TO_NEXT_ROW:
            r = first + 1
        elif am.mode is ast.SkipMode.PAST_LAST_ROW:
            r = last + 1
        else:
            assert am.var is not None
            mapped = _elements(chosen.bindings[am.var]) if am.var in chosen.bindings else ()
            where = f"the match at rows {first}..{last} of its partition"
            if not mapped:
                raise InputError(f"AFTER MATCH SKIP {am.mode.value} {am.var}: {where} maps no "
                                 f"row to {am.var} (SQL raises an exception here)")
            target = mapped[0] if am.mode is ast.SkipMode.TO_FIRST else mapped[-1]
            if target == first:
                raise InputError(f"AFTER MATCH SKIP {am.mode.value} {am.var}: {where} would "
                                 "start the next attempt at its own first row (SQL raises an "
                                 "exception here)")
            r = target
    return out


# ---------------------------------------------------------------------------------------------
# Timed-out partial matches (§20)
# ---------------------------------------------------------------------------------------------


def _prefixes(prep: _Prepared, part: list[_Event], comps: list[_Comp]
              ) -> Iterator[tuple[dict[str, Bound], frozenset[int], int]]:
    """Every prefix binding of §20 (``(bindings, positions, j)``, cj the last component bound),
    with the query window and equivalence used only as sound pruning."""
    aq = prep.aq
    assert aq.within is not None
    count = 0

    def ok(poss: frozenset[int]) -> bool:
        nonlocal count
        count += 1
        if count > MAX_CANDIDATES:
            raise OracleLimitError(
                f"the oracle enumerated more than {MAX_CANDIDATES} partial matches; it is a "
                f"brute-force reference for tiny inputs — use another --engine")
        assert aq.within is not None
        if not _span_ok(aq.within, poss, part):
            return False
        return not prep.equivalence or len(
            {_equiv_value(part[i], prep.equivalence) for i in poss}) <= 1

    def options(c: _Comp, last: int) -> Iterator[tuple[str, Bound, tuple[int, ...]]]:
        after = range(last + 1, len(part))
        if not c.is_list:
            for v, t in zip(c.vars, c.types, strict=True):
                for i in after:
                    if t is None or part[i].type == t:
                        yield v, i, (i,)
            return
        v, t = c.vars[0], c.types[0]
        cands = [i for i in after if t is None or part[i].type == t]
        top = len(cands) if c.max is None else min(c.max, len(cands))
        for n in range(1, top + 1):
            for combo in itertools.combinations(cands, n):
                yield v, combo, combo

    def rec(k: int, binds: dict[str, Bound], last: int, poss: frozenset[int]
            ) -> Iterator[tuple[dict[str, Bound], frozenset[int], int]]:
        c = comps[k]
        for v, b, ps in options(c, last):
            p2 = poss | frozenset(ps)
            if not ok(p2):
                continue
            b2 = {**binds, v: b}
            yield b2, p2, k
            if k + 1 < len(comps) and len(ps) >= c.min:
                yield from rec(k + 1, b2, max(ps), p2)
        if c.is_list and c.min == 0 and k + 1 < len(comps):
            yield from rec(k + 1, {**binds, c.vars[0]: ()}, last, poss)

    yield from rec(0, {}, -1, frozenset())


def _extends(q: Mapping[str, Bound], qpos: frozenset[int], p: Mapping[str, Bound],
             ppos: frozenset[int]) -> bool:
    """Does Q extend P (§20): P's bindings kept (lists as prefixes), the rest after P?"""
    if qpos == ppos or not qpos > ppos:
        return False
    for v, b in p.items():
        if v not in q:
            return False
        if isinstance(b, tuple):
            qb = q[v]
            if not isinstance(qb, tuple) or qb[:len(b)] != b:
                return False
        elif q[v] != b:
            return False
    return min(qpos - ppos) > max(ppos)


def _timeouts(prep: _Prepared, part: list[_Event], matches: list[_Cand]) -> list[_Found]:
    """The timed-out partial matches of one partition (§20), as found entries with T."""
    aq = prep.aq
    assert aq.within is not None
    W = aq.within.microseconds
    comps = _stnm_components(aq.pattern)
    windows = {id(w): (w, scope) for c in comps for w, scope in c.windows}
    partial: list[tuple[dict[str, Bound], frozenset[int]]] = []
    match_binds = [dict(m.bindings) for m in matches]
    for binds, poss, j in _prefixes(prep, part, comps):
        if not all(_span_ok(w, _bound_positions(scope, binds), part)
                   for w, scope in windows.values()):
            continue
        cj = comps[j]
        env = _Env(part, binds, aq.udfs)
        if not all(_eval_conjunct(c, env) is True for c in prep.positive
                   if not (cj.is_list and _is_closing(c, cj.vars[0]))):
            continue
        if not _strategy_ok(prep, _Cand(part, binds, poss)):
            continue
        full = {**binds, **{c.vars[0]: () for c in comps[j + 1:] if c.is_list and c.min == 0}}
        if all(c.is_list and c.min == 0 for c in comps[j + 1:]) and full in match_binds:
            continue  # P is itself a match
        partial.append((binds, poss))
    grown = [(dict(m.bindings), frozenset(m.positions)) for m in matches] + partial
    contiguity = aq.strategy in (ast.Strategy.STRICT_CONTIGUITY,
                                 ast.Strategy.PARTITION_CONTIGUITY)
    out = []
    for binds, poss in partial:
        if any(_extends(q, qpos, binds, poss) for q, qpos in grown):
            continue
        expires = part[min(poss)].ts + W
        if contiguity:
            last = max(poss)
            nxt = list(range(last + 1, len(part)))
            if aq.strategy is ast.Strategy.PARTITION_CONTIGUITY and prep.equivalence:
                value = _equiv_value(part[last], prep.equivalence)
                nxt = [i for i in nxt if _equiv_value(part[i], prep.equivalence) == value]
            if nxt and part[nxt[0]].ts <= expires:
                continue  # killed by the next event of its sub-stream before it expired
        cand = _Cand(part, binds, poss)
        gbind = {v: tuple(part[x].gpos for x in _elements(b)) for v, b in binds.items()}
        out.append(_Found(cand, gbind, tuple(sorted(part[x].gpos for x in poss))))
    return out


def _timeout_matches(prep: _Prepared, found: list[_Found]) -> list[Match]:
    """Timed-out partial matches as output (§20): by expiry time, then §10."""
    aq = prep.aq
    assert aq.within is not None
    W = aq.within.microseconds

    def expiry(f: _Found) -> int:
        return f.cand.events[min(f.cand.positions)].ts + W

    out = []
    for _t, group in itertools.groupby(sorted(found, key=expiry), key=expiry):
        for f in _sort_output(list(group), prep.order):
            evs = f.cand.events
            ts = [evs[x].ts for x in f.cand.positions]
            bindings: dict[str, Any] = {}
            for v in prep.order:
                if v in f.cand.bindings:
                    b = f.cand.bindings[v]
                    bindings[v] = (tuple(evs[x].id for x in b) if isinstance(b, tuple)
                                   else evs[b].id)
            out.append(Match(aq.name, bindings, min(ts), max(ts), {}, expiry(f)))
    return out


def evaluate(analyzed: AnalyzedQuery, events: EventBatch) -> list[Match]:
    """Every match of ``analyzed`` over ``events``, after policies, in output order.

    Raises :class:`OracleLimitError` for inputs too large for brute force (more than
    ``MAX_EVENTS`` events or ``MAX_CANDIDATES`` partial matches).
    """
    if len(events) > MAX_EVENTS:
        raise OracleLimitError(
            f"the oracle is a brute-force reference for tiny inputs: got {len(events)} events, "
            f"the limit is {MAX_EVENTS}; use another --engine (e.g. automaton)")
    prep = _prepare(analyzed)
    found: list[_Found] = []
    numbers: dict[int, int] = {}
    timed_out: list[_Found] = []
    grouping = analyzed.strategy is ast.Strategy.MAXIMAL_GROUPING
    for part in _partitions(_load(events), analyzed.partition_by):
        cands: Iterable[_Cand] = (_grouped(prep, part) if grouping
                                  else list(_candidates(prep, part)))
        if analyzed.query.after_match is not None:
            cands = _after_match(prep, part, list(cands))
            numbers.update((id(c), k) for k, c in enumerate(cands, 1))  # §19: per partition
        if analyzed.query.timeouts:
            timed_out += _timeouts(prep, part, list(cands))
        for cand in cands:
            gbind = {v: tuple(part[x].gpos for x in _elements(b))
                     for v, b in cand.bindings.items()}
            gpos = tuple(sorted(part[x].gpos for x in cand.positions))
            found.append(_Found(cand, gbind, gpos))
    order = prep.order
    if analyzed.emit is ast.Emit.COVERAGE:
        # EMIT COVERAGE (§16) keeps its own order of application: PICK, coverage, then the
        # plain CONSUME walk
        for pick in analyzed.query.picks:
            found = _apply_pick(found, pick)
        found = _sort_output(_apply_coverage(found, prep), order)
        if analyzed.query.consume is not None:
            found = _apply_consume(found, analyzed.query.consume, order, analyzed, select=False)
    elif analyzed.query.consume is None:
        found = _sort_output(_select(found, analyzed, order), order)
    else:
        found = _apply_consume(_sort_output(found, order), analyzed.query.consume, order,
                               analyzed)
    out = []
    for f in found:
        evs = f.cand.events
        ts = [evs[x].ts for x in f.cand.positions]
        start, end = min(ts), max(ts)
        bindings: dict[str, Any] = {}
        for v in order:
            if v in f.cand.bindings:
                b = f.cand.bindings[v]
                bindings[v] = (tuple(evs[x].id for x in b) if isinstance(b, tuple)
                               else evs[b].id)
        m = Match(analyzed.name, bindings, start, end,
                  {} if analyzed.query.rows is not None
                  else _return_values(prep, f, start, end, numbers))
        out += [m] if analyzed.query.rows is None else _row_matches(prep, f, m, numbers)
    if analyzed.query.timeouts:
        # one sequence (§20): a timeout with expiry T after the matches completed at ts <= T
        out = sorted(out + _timeout_matches(prep, timed_out),
                     key=lambda m: (m.end if m.expired is None else m.expired,
                                    m.expired is not None))
    return out


def evaluate_set(queries: Sequence[AnalyzedQuery], events: EventBatch,
                 spans: Sequence[tuple[int, int]] | None = None) -> list[Match]:
    """A query set (docs/semantics.md §17): each query alone over the events it saw
    (``spans[i]``: the half-open range of stream positions between its addition and its
    removal; default the whole stream), merged by the place of the completing event, then the
    query's place in ``queries``, then the query's own order. Nested queries (a type that is
    another query's NAME): producers first; each consumer over the input events of its span
    plus its producers' derived events, each right after its completing event."""
    names = [aq.name for aq in queries]
    reads = _set_reads(queries)
    ids = events.ids.to_pylist()
    pos = {i: p for p, i in enumerate(ids)}
    # the place of an event in the set's order: (input position,) for an input event,
    # (completing place..., producer's place, k) for a derived event
    entries: list[tuple[tuple[int, ...], int, int, Match]] = []
    derived: dict[int, list[tuple[tuple[int, ...], Match, str, dict[str, Any]]]] = {}
    rows = events.rows()
    order = sorted(range(len(queries)), key=lambda qi: bool(reads[qi]))  # producers first
    for qi in order:
        aq = queries[qi]
        lo, hi = spans[qi] if spans is not None else (0, len(events))
        if hi <= lo:
            derived[qi] = []
            continue
        places: list[tuple[int, ...]]
        if not reads[qi]:
            ms = evaluate(aq, events.slice(lo, hi - lo))
            places = [(max(pos[i] for i in _bound_ids(m)),) for m in ms]
        else:
            ms, places = _evaluate_consumer(aq, events, lo, hi,
                                            [d for pi in reads[qi] for d in derived[pi]])
        key_attrs = list(dict.fromkeys(aq.partition_by + aq.equivalence))
        derived[qi] = [(place + (qi, k + 1), m, f"{names[qi]}#{k + 1}",
                        {a: rows[place[0]].get(a) for a in key_attrs})
                       for k, (place, m) in enumerate(zip(places, ms, strict=True))]
        for k, (place, m) in enumerate(zip(places, ms, strict=True)):
            entries.append((place, qi, k, m))
    entries.sort(key=lambda e: (e[0], e[1], e[2]))
    return [e[3] for e in entries]


def _bound_ids(m: Match) -> list[Any]:
    return [i for b in m.bindings.values() for i in (b if isinstance(b, tuple) else (b,))]


def _set_reads(queries: Sequence[AnalyzedQuery]) -> list[list[int]]:
    """Per query, the places of the queries whose matches it reads (§17, nested queries); the
    rejected shapes raise ``QueryValidationError``."""
    place = {aq.name: i for i, aq in enumerate(queries)}
    reads = [sorted({place[v.type] for v in aq.variables.values() if v.type in place})
             for aq in queries]
    for qi, rs in enumerate(reads):
        if qi in rs:
            raise QueryValidationError(f"query set: query {queries[qi].name!r} reads its own "
                                       "matches (a cycle)")
        for pi in rs:
            if reads[pi]:
                raise QueryValidationError(
                    f"query set: {queries[qi].name!r} reads {queries[pi].name!r}, which reads "
                    f"{queries[reads[pi][0]].name!r}; one level of nesting is supported")
    return reads


def _evaluate_consumer(aq: AnalyzedQuery, events: EventBatch, lo: int, hi: int,
                       derived: list[tuple[tuple[int, ...], Match, str, dict[str, Any]]]
                       ) -> tuple[list[Match], list[tuple[int, ...]]]:
    """A consumer alone over its stream: the input events ``lo..hi`` and the derived events
    whose completing input event is among them, in place order; bindings of input events are
    their ids, of derived events their labels. Returns its matches and their completing
    places."""
    import pyarrow as pa

    rows: list[tuple[tuple[int, ...], dict[str, Any], Any]] = []
    for p, r in enumerate(events.rows()[lo:hi], start=lo):
        rows.append(((p,), r, r[ID]))
    for place, m, label, key in derived:
        if lo <= place[0] < hi:
            rows.append((place, {TS: m.end, TYPE: m.query, **key, **dict(m.values)}, label))
    rows.sort(key=lambda x: x[0])
    recs = []
    has_id = "id" in events.attribute_names
    for n, (place, r, orig) in enumerate(rows):
        rec = dict(r)
        rec[ID] = n  # the consumer's own event ids: positions in its stream
        if not has_id:
            rec["id"] = orig if len(place) == 1 else None
        recs.append(rec)
    keys = list(dict.fromkeys(k for r in recs for k in r))
    table = pa.table({k: pa.array([r.get(k) for r in recs]) for k in keys})
    ms = evaluate(aq, EventBatch(table, events.time))
    back = [orig for _p, _r, orig in rows]
    out: list[Match] = []
    places: list[tuple[int, ...]] = []
    for m in ms:
        bindings = {v: (tuple(back[int(i)] for i in b) if isinstance(b, tuple)
                        else back[int(b)]) for v, b in m.bindings.items()}
        out.append(Match(m.query, bindings, m.start, m.end, m.values))
        places.append(max(rows[int(i)][0] for i in _bound_ids(m)))
    return out, places


__all__ = ["MAX_CANDIDATES", "MAX_EVENTS", "OracleLimitError", "evaluate", "evaluate_set"]
