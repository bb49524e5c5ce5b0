"""Predicate compilation: the validated expression AST -> generated Python source, compiled once.

A compiled predicate is a plain Python function ``f(B, i)``:

``B``  a tuple indexed by variable slot: a *record* for a single variable (``None`` when unbound)
       and a tuple of records for a list (Kleene) variable;
``i``  the 0-based element index of the *iterated* list variable (the one referenced as ``v``,
       ``v[i]`` or ``v[i-1]`` outside an aggregate), ignored when there is none.

A record is a tuple ``(gpos, ts, id, cpos, wpos, attr_0, attr_1, ...)`` whose attribute slots are
fixed per plan (:class:`Layout`). Values follow SQL three-valued logic: ``None`` is NULL, and
every operator returns ``None`` on NULL input, on division by zero and on a comparison between a
string and a number (docs/dev/decisions.md, 3).

Source is generated only from the validated AST: identifiers never reach the source (attributes
and variables become integer slots), literals are embedded with ``repr`` of ``int``/``float``/
``str``/``bool``/``None`` values only, and UDFs are passed in as closure values, never by name.
Two versions are generated: a *fast* one with inline operators, and a *safe* one through helper
functions; the fast one falls back to the safe one on ``TypeError`` (mixed types), so the common
case pays no helper-call overhead.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any

from .. import ast
from ..codegen import build
from ..errors import EngineError
from ..frozen import dataclass
from .layout import ATTR0, CPOS, GPOS, ID, RESERVED_ATTRS, TS, WPOS, CompiledExpr, Layout, PredFn

# --------------------------------------------------------------------------------------------
# Runtime helpers (the safe path and the few operations that are not inlined)
# --------------------------------------------------------------------------------------------

def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _comparable(x: Any, y: Any) -> bool:
    return ((_num(x) and _num(y)) or (isinstance(x, str) and isinstance(y, str))
            or (isinstance(x, bool) and isinstance(y, bool)))


def h_cmp(op: str, x: Any, y: Any) -> Any:
    """Three-valued comparison; NULL on NULL input or incomparable types."""
    if x is None or y is None or not _comparable(x, y):
        return None
    if op == "=":
        return x == y
    if op == "!=":
        return x != y
    if op == "<":
        return x < y
    if op == "<=":
        return x <= y
    if op == ">":
        return x > y
    return x >= y


def h_eq(x: Any, y: Any) -> Any:
    """``x = y`` with NULL for NULL input or incomparable types."""
    return h_cmp("=", x, y)


def h_arith(op: str, x: Any, y: Any) -> Any:
    """Arithmetic on numbers only; NULL otherwise, and for ``x / 0`` and ``x % 0``."""
    if not (_num(x) and _num(y)):
        return None
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    if op == "/":
        return None if y == 0 else x / y
    if op == "%":
        return None if y == 0 else x % y
    raise EngineError(f"unknown arithmetic operator {op!r}")


def h_and(x: Any, y: Any) -> Any:
    """Kleene AND."""
    if x is False or y is False:
        return False
    if x is None or y is None:
        return None
    return True


def h_or(x: Any, y: Any) -> Any:
    """Kleene OR."""
    if x is True or y is True:
        return True
    if x is None or y is None:
        return None
    return False


def h_not(x: Any) -> Any:
    """Kleene NOT."""
    return None if x is None else not x


def h_neg(x: Any) -> Any:
    """Unary minus."""
    return -x if _num(x) else None


def h_between(x: Any, lo: Any, hi: Any, negated: bool) -> Any:
    """``x [NOT] BETWEEN lo AND hi``."""
    r = h_and(h_cmp(">=", x, lo), h_cmp("<=", x, hi))
    return h_not(r) if negated else r


def h_in(x: Any, items: tuple[Any, ...], negated: bool) -> Any:
    """SQL ``IN``: TRUE if any item equals; NULL if none does and one comparison was NULL."""
    saw_null = False
    for it in items:
        r = h_cmp("=", x, it)
        if r is True:
            return not negated
        if r is None:
            saw_null = True
    if saw_null:
        return None
    return negated


_LIKE_CACHE: dict[str, re.Pattern[str]] = {}


def like_regex(pattern: str) -> re.Pattern[str]:
    """The regex of a SQL LIKE pattern (``%`` any run, ``_`` one character)."""
    rx = _LIKE_CACHE.get(pattern)
    if rx is None:
        parts = []
        for ch in pattern:
            parts.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        rx = re.compile("".join(parts), re.DOTALL)
        _LIKE_CACHE[pattern] = rx
    return rx


def h_like(x: Any, pat: Any, negated: bool) -> Any:
    """SQL LIKE."""
    if not isinstance(x, str) or not isinstance(pat, str):
        return None
    r = like_regex(pat).fullmatch(x) is not None
    return (not r) if negated else r


def h_isnull(x: Any, negated: bool) -> Any:
    """``IS [NOT] NULL`` (NaN counts as a value)."""
    return (x is not None) if negated else (x is None)


def _agg_vals(vals: list[Any]) -> list[Any]:
    return [v for v in vals if v is not None]


def h_agg(name: str, vals: list[Any]) -> Any:
    """Aggregate over the values of a list variable (NULLs ignored; see decisions 5)."""
    if name == "count":
        return len(_agg_vals(vals))
    nums = _agg_vals(vals)
    if name == "sum":
        if not all(_num(v) for v in nums):
            return None
        return sum(nums) if nums else 0
    if not nums:
        return None
    if not _cmp_types(nums[0], nums[0]):
        return None  # a list (or another non-scalar) has no order, even alone
    if name == "avg":
        if not all(_num(v) for v in nums):
            return None
        return sum(nums) / len(nums)
    try:
        if name == "min":
            return min(nums)
        if name == "max":
            return max(nums)
    except TypeError:
        return None
    raise EngineError(f"unknown aggregate {name!r}")


def _m1(fn: Callable[[Any], Any]) -> Callable[..., Any]:
    def f(x: Any) -> Any:
        if not _num(x):
            return None
        try:
            return fn(x)
        except (ValueError, OverflowError, ZeroDivisionError):
            return None
    return f


def _s1(fn: Callable[[str], Any]) -> Callable[..., Any]:
    return lambda x: fn(x) if isinstance(x, str) else None


def _round(x: Any, d: Any = 0) -> Any:
    if not _num(x) or not (isinstance(d, int) and not isinstance(d, bool)):
        return None
    return round(x, d) if d else round(x)


def _power(x: Any, y: Any) -> Any:
    if not (_num(x) and _num(y)):
        return None
    try:
        return math.pow(x, y)
    except (ValueError, OverflowError, ZeroDivisionError):
        return None


def _extreme(pick: Callable[..., Any]) -> Callable[..., Any]:
    def f(*xs: Any) -> Any:
        if not xs or any(x is None for x in xs):
            return None
        if not all(_cmp_types(xs[0], x) for x in xs):
            return None
        return pick(xs)
    return f


def _cmp_types(a: Any, b: Any) -> bool:
    return ((_num(a) and _num(b)) or (isinstance(a, str) and isinstance(b, str))
            or (isinstance(a, bool) and isinstance(b, bool)))


def _log(x: Any, base: Any = None) -> Any:
    if not _num(x) or (base is not None and not _num(base)):
        return None
    try:
        return math.log(x) if base is None else math.log(x, base)
    except (ValueError, OverflowError, ZeroDivisionError):
        return None


def _sign(x: Any) -> Any:
    return None if not _num(x) else (x > 0) - (x < 0)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _substr(s: Any, start: Any, n: Any = None) -> Any:
    if not isinstance(s, str) or not _is_int(start) or (n is not None and not _is_int(n)):
        return None
    if n is not None and n < 0:
        return None
    begin = max(start, 1) - 1
    if n is None:
        return s[begin:]
    return s[begin:max(start - 1 + n, begin)]


def _concat(*xs: Any) -> Any:
    return "".join(xs) if xs and all(isinstance(x, str) for x in xs) else None


def _nullif(x: Any, y: Any) -> Any:
    return None if h_cmp("=", x, y) is True else x


def _coalesce(*xs: Any) -> Any:
    return next((a for a in xs if a is not None), None)


#: Built-in scalar functions (docs/semantics.md 5): NULL in, NULL out; wrong types -> NULL.
SCALARS: dict[str, Callable[..., Any]] = {
    "abs": _m1(abs), "sqrt": _m1(math.sqrt), "exp": _m1(math.exp), "ln": _m1(math.log),
    "log": _log, "log10": _m1(math.log10), "floor": _m1(math.floor), "ceil": _m1(math.ceil),
    "round": _round, "power": _power, "sign": _sign, "lower": _s1(str.lower),
    "upper": _s1(str.upper), "length": _s1(len), "trim": _s1(str.strip), "substr": _substr,
    "concat": _concat, "least": _extreme(min), "greatest": _extreme(max),
    "coalesce": _coalesce, "nullif": _nullif,
}


def _scalar(name: str, args: list[Any]) -> Any:
    fn = SCALARS.get(name)
    if fn is None:
        raise EngineError(f"unknown function {name!r}")
    try:
        return fn(*args)
    except TypeError:
        raise EngineError(f"wrong number of arguments for {name}()") from None


def h_call(name: str, *args: Any) -> Any:
    """A built-in scalar function."""
    return _scalar(name, list(args))


def h_udf(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a registered UDF; an exception becomes an EngineError naming the function."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - a UDF may raise anything; report it clearly
        name = getattr(fn, "__name__", "udf")
        raise EngineError(f"user function {name!r} raised {type(exc).__name__}: {exc}") from exc


def h_bothbool(x: Any, y: Any) -> bool:
    """Both values are booleans (which may be ordered: FALSE < TRUE)."""
    return type(x) is bool and type(y) is bool


HELPERS: dict[str, Any] = {
    "_bb": h_bothbool, "_bool": bool, "_type": type, "_cmp": h_cmp, "_eq": h_eq, "_ar": h_arith, "_and": h_and, "_or": h_or, "_not": h_not,
    "_neg": h_neg, "_btw": h_between, "_in": h_in, "_like": h_like, "_isnull": h_isnull,
    "_agg": h_agg, "_call": h_call, "_udf": h_udf,
}

# --------------------------------------------------------------------------------------------
# Analysis of an expression
# --------------------------------------------------------------------------------------------

AGGREGATES = frozenset({"count", "sum", "avg", "min", "max"})


def has_running(exprs: Any) -> bool:
    """Does one of the expressions hold a running aggregate (``avg(v[..i].x)``, semantics
    21)? Plans that do not evaluate them refuse such queries."""
    return any(refs(e, frozenset(refs(e, frozenset()).vars)).running for e in exprs)


@dataclass(slots=True)
class RefInfo:
    """What an expression references."""

    vars: set[str] = field(default_factory=set)
    iter_vars: set[str] = field(default_factory=set)
    indexed: set[str] = field(default_factory=set)
    """List variables referenced with ``[i]`` / ``[i-1]`` outside aggregates (share ``i``)."""
    unindexed: set[str] = field(default_factory=set)
    """List variables referenced without index outside aggregates."""
    """List variables referenced per element (``v.x``, ``v[i].x``) outside aggregates."""
    prev_vars: set[str] = field(default_factory=set)
    """List variables referenced as ``v[i-1]``."""
    abs_index: dict[str, int] = field(default_factory=dict)
    """Largest absolute (1-based) index per list variable, ``first(v)`` counting as 1."""
    closing: set[str] = field(default_factory=set)
    """List variables referenced through ``last``, aggregates or a bare variable."""
    attrs: set[str] = field(default_factory=set)
    udfs: set[str] = field(default_factory=set)
    running: set[str] = field(default_factory=set)
    """List variables of running aggregates (``avg(v[..i].x)``, semantics 21): iterated like
    ``v[i]`` (also in :attr:`iter_vars` and :attr:`indexed`), never closing."""


def refs(e: ast.Expr, list_vars: frozenset[str] | set[str], info: RefInfo | None = None,
         in_agg: bool = False) -> RefInfo:
    """Collect the references of an expression (used for predicate placement)."""
    info = info if info is not None else RefInfo()
    if isinstance(e, ast.AttrRef):
        info.vars.add(e.var)
        info.attrs.add(e.attr)
        if e.var in list_vars:
            idx = e.index
            if idx is not None and idx.kind is ast.IndexKind.UPTO:
                info.running.add(e.var)
                info.iter_vars.add(e.var)
                info.indexed.add(e.var)
            elif in_agg:
                info.closing.add(e.var)
            elif idx is None or idx.kind is ast.IndexKind.CURRENT:
                info.iter_vars.add(e.var)
                (info.unindexed if idx is None else info.indexed).add(e.var)
                if idx is not None and idx.offset < 0:
                    info.prev_vars.add(e.var)
            elif idx.kind is ast.IndexKind.ABSOLUTE:
                info.abs_index[e.var] = max(info.abs_index.get(e.var, 0), idx.offset)
            elif idx.kind is ast.IndexKind.FIRST:
                info.abs_index[e.var] = max(info.abs_index.get(e.var, 0), 1)
            else:
                info.closing.add(e.var)
    elif isinstance(e, ast.VarRef):
        info.vars.add(e.var)
        if e.var in list_vars:
            info.closing.add(e.var)
    elif isinstance(e, ast.Unary):
        refs(e.operand, list_vars, info, in_agg)
    elif isinstance(e, ast.Binary):
        refs(e.left, list_vars, info, in_agg)
        refs(e.right, list_vars, info, in_agg)
    elif isinstance(e, ast.Between):
        for x in (e.operand, e.low, e.high):
            refs(x, list_vars, info, in_agg)
    elif isinstance(e, ast.InList):
        refs(e.operand, list_vars, info, in_agg)
        for x in e.items:
            refs(x, list_vars, info, in_agg)
    elif isinstance(e, ast.Like):
        refs(e.operand, list_vars, info, in_agg)
        refs(e.pattern, list_vars, info, in_agg)
    elif isinstance(e, ast.IsNull):
        refs(e.operand, list_vars, info, in_agg)
    elif isinstance(e, ast.Call):
        agg = e.name in AGGREGATES and len(e.args) == 1
        if not agg and e.name not in _SCALAR_NAMES and e.name not in (
                "min", "max", "match_number", "classifier", "final"):
            info.udfs.add(e.name)
        for x in e.args:
            refs(x, list_vars, info, in_agg or agg)
    return info


_SCALAR_NAMES = frozenset(SCALARS)

# --------------------------------------------------------------------------------------------
# Code generation
# --------------------------------------------------------------------------------------------


def _lit(v: Any) -> str:
    if v is None or isinstance(v, (bool, int, str)):
        return repr(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return f"float({str(v)!r})"
        return repr(v)
    raise EngineError(f"unsupported literal {v!r}")


class _Gen:
    """Generates one Python expression string for an AST expression."""

    def __init__(self, layout: Layout, udfs: Mapping[str, Callable[..., Any]], fast: bool,
                 env: dict[str, Any]) -> None:
        self.layout = layout
        self.udfs = udfs
        self.fast = fast
        self.env = env
        self.n = 0
        self.elem: dict[str, str] = {}  # list var -> the name of the element record in scope
        self.access: Callable[[ast.AttrRef], str | None] | None = None
        self.free: dict[str, int] = {}
        """General mode: unindexed list variables iterated independently (index I[1+k])."""
        self.tprefix = "_t"
        self.cprefix = "_k"

    def tmp(self) -> str:
        self.n += 1
        return f"{self.tprefix}{self.n}"

    def const(self, value: Any) -> str:
        name = f"{self.cprefix}{len(self.env)}"
        self.env[name] = value
        return name

    def attr(self, e: ast.AttrRef) -> str:
        if self.access is not None and e.var not in self.elem:
            src = self.access(e)
            if src is None:
                raise NotInlinable(e.var)
            return src
        slot = self.layout.var_slots[e.var]
        aslot = self.layout.attr_slot(e.attr)
        if e.var not in self.layout.list_vars:
            t = self.tmp()
            return f"(None if ({t} := B[{slot}]) is None else {t}[{aslot}])"
        if e.var in self.elem and (e.index is None or e.index.kind is ast.IndexKind.UPTO
                                   or e.index.kind is ast.IndexKind.CURRENT
                                   and e.index.offset == 0):
            return f"{self.elem[e.var]}[{aslot}]"
        idx = e.index
        t, u = self.tmp(), self.tmp()
        # a list variable is None when it sits in an OR branch that was not taken
        lst = f"({u} := B[{slot}]) is None"
        if idx is None and e.var in self.free:
            pos = f"I[{1 + self.free[e.var]}]"
            return (f"(None if {lst} or not (0 <= ({t} := {pos}) < len({u})) "
                    f"else {u}[{t}][{aslot}])")
        if idx is None or idx.kind is ast.IndexKind.CURRENT:
            off = 0 if idx is None else idx.offset
            pos = "i" if off == 0 else f"i - {-off}"
            return (f"(None if {lst} or not (0 <= ({t} := {pos}) < len({u})) "
                    f"else {u}[{t}][{aslot}])")
        if idx.kind is ast.IndexKind.ABSOLUTE or idx.kind is ast.IndexKind.FIRST:
            k = (idx.offset - 1) if idx.kind is ast.IndexKind.ABSOLUTE else max(0, -idx.offset)
            return f"(None if {lst} or len({u}) <= {k} else {u}[{k}][{aslot}])"
        k = 1 - idx.offset  # LAST with offset 0 -> 1 (i.e. [-1]), offset -1 -> 2
        return f"(None if {lst} or len({u}) < {k} else {u}[-{k}][{aslot}])"

    def gen(self, e: ast.Expr) -> str:  # noqa: C901 - one branch per node type
        if isinstance(e, ast.Literal):
            return _lit(e.value)
        if isinstance(e, ast.AttrRef):
            return self.attr(e)
        if isinstance(e, ast.VarRef):
            if e.var not in self.layout.var_slots:
                if e.var == "start":
                    return "B[-2]"
                if e.var == "end":
                    return "B[-1]"
                return "None"
            slot = self.layout.var_slots[e.var]
            t = self.tmp()
            if e.var in self.layout.list_vars:
                return f"tuple(_r[{ID}] for _r in B[{slot}])"
            return f"(None if ({t} := B[{slot}]) is None else {t}[{ID}])"
        if isinstance(e, ast.Unary):
            x = self.gen(e.operand)
            if e.op == "not":
                if self.fast:
                    t = self.tmp()
                    return f"(None if ({t} := {x}) is None else not {t})"
                return f"_not({x})"
            if self.fast:
                t = self.tmp()
                # a boolean is not a number (-TRUE is NULL), though Python's bool is an int
                return f"(-{t} if type({t} := {x}) is int or type({t}) is float else _neg({t}))"
            return f"_neg({x})"
        if isinstance(e, ast.Binary):
            return self.binary(e)
        if isinstance(e, ast.Between):
            return (f"_btw({self.gen(e.operand)}, {self.gen(e.low)}, {self.gen(e.high)}, "
                    f"{e.negated!r})")
        if isinstance(e, ast.InList):
            items = ", ".join(self.gen(x) for x in e.items)
            return f"_in({self.gen(e.operand)}, ({items},), {e.negated!r})"
        if isinstance(e, ast.Like):
            return f"_like({self.gen(e.operand)}, {self.gen(e.pattern)}, {e.negated!r})"
        if isinstance(e, ast.IsNull):
            return f"_isnull({self.gen(e.operand)}, {e.negated!r})"
        if isinstance(e, ast.Call):
            return self.call(e)
        raise EngineError(f"automaton engine cannot compile expression {type(e).__name__}")

    def binary(self, e: ast.Binary) -> str:
        x, y = self.gen(e.left), self.gen(e.right)
        op = e.op
        if op == "and":
            if self.fast:
                a, b = self.tmp(), self.tmp()
                return (f"(False if ({a} := {x}) is False or ({b} := {y}) is False else "
                        f"(None if {a} is None or {b} is None else True))")
            return f"_and({x}, {y})"
        if op == "or":
            if self.fast:
                a, b = self.tmp(), self.tmp()
                return (f"(True if ({a} := {x}) is True or ({b} := {y}) is True else "
                        f"(None if {a} is None or {b} is None else False))")
            return f"_or({x}, {y})"
        if op in ("=", "!="):
            return f"_cmp({op!r}, {x}, {y})"
        if op in ("<", "<=", ">", ">="):
            if self.fast:
                a, b = self.tmp(), self.tmp()
                guard = _bool_guard(e.left, e.right, a, b)
                if guard:
                    return (f"(None if ({a} := {x}) is None or ({b} := {y}) is None else "
                            f"({a} {op} {b} if {guard} else None))")
                return f"(None if ({a} := {x}) is None or ({b} := {y}) is None else {a} {op} {b})"
            return f"_cmp({op!r}, {x}, {y})"
        if op in ("+", "-", "*") and self.fast:
            a, b = self.tmp(), self.tmp()
            return (f"({a} {op} {b} if ((type({a} := {x}) is int or type({a}) is float) & "
                    f"(type({b} := {y}) is int or type({b}) is float)) else _ar({op!r}, {a}, "
                    f"{b}))")
        if op in ("+", "-", "*", "/", "%"):
            return f"_ar({op!r}, {x}, {y})"
        raise EngineError(f"automaton engine does not support operator {op!r}")

    def _over_list(self, name: str, arg: ast.Expr, v: str, cut: str) -> str:
        """Aggregate ``name`` of ``arg`` over the elements of list variable ``v`` (``cut``:
        a slice of them, ``[:i + 1]`` for a running aggregate, docs/semantics.md 21)."""
        slot = self.layout.var_slots[v]
        r = f"_r{self.n + 1}"
        self.n += 1
        saved = self.elem.get(v)
        self.elem[v] = r
        body = self.gen(arg)
        if saved is None:
            del self.elem[v]
        else:
            self.elem[v] = saved
        return (f"(None if B[{slot}] is None else "
                f"_agg({name!r}, [{body} for {r} in B[{slot}]{cut}]))")

    def call(self, e: ast.Call) -> str:
        # RETURN is evaluated over B + (whole, classifier, match number, start, end), where
        # ``whole`` is the whole match's B so extended (EMIT ROWS' final(), semantics 19)
        if e.name == "match_number" and not e.args:
            return "B[-3]"
        if e.name == "classifier" and not e.args:
            return "B[-4]"
        if e.name == "final" and len(e.args) == 1:
            inner = compile_expr(e.args[0], self.layout, self.udfs, "final")
            return f"{self.const(inner.fn)}(B[-5], i)"
        if e.name in ("min", "max") and len(e.args) != 1:
            args = ", ".join(self.gen(a) for a in e.args)
            return f"_call({'least' if e.name == 'min' else 'greatest'!r}, {args})"
        if e.name in AGGREGATES:
            (arg,) = e.args
            if isinstance(arg, ast.VarRef) and arg.var in self.layout.var_slots:
                slot = self.layout.var_slots[arg.var]
                if arg.var not in self.layout.list_vars:
                    return (f"(None if B[{slot}] is None else "
                            f"_agg({e.name!r}, [B[{slot}][{ID}]]))")
                if e.name == "count":
                    return f"(None if B[{slot}] is None else len(B[{slot}]))"
                return (f"(None if B[{slot}] is None else "
                        f"_agg({e.name!r}, [_r[{ID}] for _r in B[{slot}]]))")
            info = refs(arg, self.layout.list_vars)
            if any(v not in self.layout.var_slots for v in info.vars):
                return "None"
            if info.running:
                # semantics 21: over the elements 0..i of the list (B holds the element being
                # taken); an inline take test sees the parent run's B, without it
                if self.access is not None:
                    raise NotInlinable(next(iter(info.running)))
                (v,) = info.running
                return self._over_list(e.name, arg, v, "[:i + 1]")
            lv = sorted((info.iter_vars | info.closing) & self.layout.list_vars)
            single = sorted(info.vars - self.layout.list_vars)
            if len(lv) > 1:
                raise EngineError("automaton engine supports aggregates over exactly one "
                                  f"list variable, got {lv}")
            if not lv:
                unbound = " or ".join(f"B[{self.layout.var_slots[v]}] is None" for v in single)
                val = self.gen(arg)
                if unbound:
                    return f"(None if {unbound} else _agg({e.name!r}, [{val}]))"
                return f"_agg({e.name!r}, [{val}])"
            return self._over_list(e.name, arg, lv[0], "")
        args = ", ".join(self.gen(a) for a in e.args)
        if e.name in _SCALAR_NAMES:
            return f"_call({e.name!r}, {args})"
        fn = self.udfs.get(e.name)
        if fn is None:
            raise EngineError(f"unknown function {e.name!r}: register it as a UDF")
        return f"_udf({self.const(fn)}, {args})"


class NotInlinable(Exception):
    """A reference the caller's access scheme cannot express inline."""


def inline_condition(e: ast.Expr, layout: Layout, udfs: Mapping[str, Callable[..., Any]],
                     env: dict[str, Any], access: Callable[[ast.AttrRef], str | None],
                     tprefix: str, plain_attrs: bool = False) -> str:
    """Source of a boolean condition "``e`` is TRUE" with attribute references rendered by
    ``access`` (used by the generated kernel). Raises :class:`NotInlinable` if an attribute
    reference has no inline form; may raise ``TypeError`` at run time on mixed types, which
    the caller handles by falling back to the compiled function. With ``plain_attrs`` the
    source assumes that no attribute value is a boolean (no bool-vs-number guard on them)."""
    env.update(HELPERS)
    g = _Gen(layout, udfs, True, env)
    g.access = access
    g.tprefix = tprefix
    g.cprefix = tprefix + "k"
    if isinstance(e, ast.Binary) and e.op in ("<", "<=", ">", ">="):
        x, y = g.gen(e.left), g.gen(e.right)
        a, b = g.tmp(), g.tmp()
        guard = _bool_guard(e.left, e.right, a, b, plain_attrs)
        if _plain(e.left) and _plain(e.right):
            # Ordering comparisons with None (SQL NULL) raise TypeError in Python, and so
            # does any mixed-type comparison but bool vs number (bool is an int in Python:
            # the guard, tested only when the comparison holds, makes that one NULL). The
            # caller's fallback then evaluates the null-aware form. So plain operands need
            # no explicit None tests.
            if not guard:
                return f"({x} {e.op} {y})"
            return f"(({a} := {x}) {e.op} ({b} := {y}) and {guard})"
        tail = f" and {guard}" if guard else ""
        return (f"(({a} := {x}) is not None and ({b} := {y}) is not None and {a} {e.op} {b}"
                f"{tail})")
    return f"({g.gen(e)} is True)"


def _never_bool(e: ast.Expr, plain_attrs: bool = False) -> bool:
    """The value of ``e`` is never a boolean (a number or string literal, arithmetic, a
    numeric function; with ``plain_attrs``, also an attribute reference): an ordering
    comparison with it needs no bool guard on its side."""
    if plain_attrs and isinstance(e, ast.AttrRef):
        return True
    if isinstance(e, ast.Literal):
        return type(e.value) in (int, float, str)
    if isinstance(e, ast.Unary):
        return e.op != "not"
    if isinstance(e, ast.Binary):
        return e.op in ("+", "-", "*", "/", "%")
    if isinstance(e, ast.Call):
        return e.name in _NUMERIC_OR_TEXT_CALLS
    return False


_NUMERIC_OR_TEXT_CALLS = frozenset({
    "abs", "sqrt", "exp", "ln", "log", "log10", "floor", "ceil", "round", "power", "sign",
    "lower", "upper", "length", "trim", "substr", "concat", "count", "sum", "avg"})


def _bool_guard(left: ast.Expr, right: ast.Expr, a: str, b: str,
                plain_attrs: bool = False) -> str:
    """A Python condition, over the operand values ``a`` and ``b``, that an ordering
    comparison does not compare a boolean with a number (Python orders ``True > 0``; SQL
    here makes it NULL, docs/semantics.md). Empty when neither side can be a boolean
    next to a number: a string literal or a numeric expression on one side needs a test of
    the other side only. With ``plain_attrs`` no attribute value is a boolean (the runtime
    knows it from the columns' Arrow types: ``plain_values``)."""
    lb, rb = _never_bool(left, plain_attrs), _never_bool(right, plain_attrs)
    if lb and rb:
        return ""
    if isinstance(left, ast.Literal) and type(left.value) is str or \
            isinstance(right, ast.Literal) and type(right.value) is str:
        return ""  # a string vs a boolean raises TypeError already
    if lb:
        return f"_type({b}) is not _bool"
    if rb:
        return f"_type({a}) is not _bool"
    # the common case (two numbers) costs two type tests; two booleans take the helper
    return f"(_type({a}) is not _bool is not _type({b}) or _bb({a}, {b}))"


def _plain(e: ast.Expr) -> bool:
    """An attribute reference or a non-null scalar literal: its value is a plain Arrow scalar
    or constant, so comparing it with None raises TypeError (never a custom ``__lt__``)."""
    if isinstance(e, ast.AttrRef):
        return True
    return (isinstance(e, ast.Literal) and e.value is not None
            and type(e.value) in (int, float, str, bool))


def compile_expr(e: ast.Expr, layout: Layout, udfs: Mapping[str, Callable[..., Any]],
                 name: str = "pred", free: tuple[str, ...] | None = None) -> CompiledExpr:
    """Compile an expression into ``f(B, i) -> value`` (fast path with safe fallback).

    With ``free`` (the *general* form, docs/semantics.md 5: ``[i]`` references share ``i``,
    unindexed references to different list variables range independently) the function is
    ``f(B, I)`` with ``I = (i, j_1, ..., j_k)``, one ``j`` per variable of ``free``."""
    env: dict[str, Any] = dict(HELPERS)
    gf = _Gen(layout, udfs, True, env)
    gs = _Gen(layout, udfs, False, env)
    if free is not None:
        gf.free = gs.free = {v: k for k, v in enumerate(free)}
    fast = gf.gen(e)
    safe = gs.gen(e)
    if free is None:
        src = (f"def _safe(B, i):\n    return {safe}\n"
               f"def {name}(B, i):\n    try:\n        return {fast}\n"
               f"    except TypeError:\n        return _safe(B, i)\n")
    else:
        src = (f"def _safe(B, I):\n    i = I[0]\n    return {safe}\n"
               f"def {name}(B, I):\n    i = I[0]\n    try:\n        return {fast}\n"
               f"    except TypeError:\n        return _safe(B, I)\n")
    # The source was generated above from the validated AST only: identifiers became integer
    # slots, literals went through repr of plain scalars, UDFs are constants in ``env``.
    fn: PredFn = build(src, env, label="predicate", entry=name)
    return CompiledExpr(fn, src)


__all__ = ["ATTR0", "CPOS", "GPOS", "ID", "RESERVED_ATTRS", "TS", "WPOS", "CompiledExpr",
           "Layout", "NotInlinable", "PredFn", "RefInfo", "compile_expr", "h_cmp",
           "inline_condition", "like_regex", "refs"]
