"""Vectorized one-variable predicates: a conjunct that mentions one variable becomes an Arrow
compute expression evaluated over a whole batch into a candidate mask, so that events which can
bind nothing never enter the engine's Python loop.

Arrow's kernels already implement SQL three-valued logic (``and_kleene`` / ``or_kleene``, NULL
propagation), which is exactly decisions.md 3; the final mask keeps only TRUE. Expressions Arrow
cannot evaluate (UDFs, ``%``, most scalar functions, a comparison between a string and a number)
are left out of the mask and stay on the take edge, evaluated per event by the generated Python.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import ast
from ..errors import EngineError
from ..frozen import dataclass
from ..udf import VectorizedUdf
from .expr import CompiledExpr, Layout, compile_expr

_CMP = {"=": pc.equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal,
        ">": pc.greater, ">=": pc.greater_equal}


class _NotVectorizable(Exception):
    pass


_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1
_FLOAT_EXACT = 2 ** 53
"""Integers up to this magnitude convert to float64 exactly."""


def _exact_as_float(*xs: Any, both: bool = False) -> None:
    """Raise :class:`_NotVectorizable` if Arrow would compare or divide these numbers through
    float64 with a rounding that Python's exact int/float arithmetic does not make: an int64
    operand beyond 2**53 next to a float one (or, with ``both``, any such int64)."""
    ints = [x for x in xs if pa.types.is_integer(x.type)]
    if not ints or (not both and len(ints) == len(xs)):
        return
    for x in ints:
        if isinstance(x, pa.Scalar):
            v = x.as_py()
            big = v is not None and abs(v) > _FLOAT_EXACT
        else:
            mm = pc.min_max(x)
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
            big = lo is not None and (lo < -_FLOAT_EXACT or hi > _FLOAT_EXACT)
        if big:
            raise _NotVectorizable


def _is_num(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t))


def _kind(t: pa.DataType) -> str:
    if pa.types.is_boolean(t):
        return "bool"
    if _is_num(t):
        return "num"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "str"
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_timestamp(t):
        return "num"
    return "other"


VNode = tuple[Any, ...]
"""A lowered one-variable expression, plain data (the runtime evaluates these; it never sees
the AST): ``("lit", v)``, ``("attr", name)``, ``("not", x)``, ``("neg", x)``,
``("logic", op, x, y)``, ``("bin", op, x, y)``, ``("between", x, lo, hi, negated)``,
``("isnull", x, negated)``, ``("like", x, pattern, negated)``, ``("in", x, values, negated)``,
``("abs", x)``, ``("vudf", fn, args)`` (a vectorized UDF, :class:`kleene.udf.VectorizedUdf`), or
``("never",)`` for what Arrow is never asked to evaluate (checked per row)."""

_NEVER: VNode = ("never",)


def lower(e: ast.Expr, var: str,  # noqa: C901
          udfs: Mapping[str, Callable[..., Any]] | None = None) -> VNode:
    """``e`` (a conjunct over ``var`` only) as a :data:`VNode` tree (``udfs``: the vectorized
    ones among them are called on arrays)."""
    if udfs is not None and isinstance(e, ast.Call) and e.args and \
            isinstance(udfs.get(e.name), VectorizedUdf):
        return ("vudf", udfs[e.name], tuple(lower(a, var, udfs) for a in e.args))
    if isinstance(e, ast.Literal):
        v = e.value
        if isinstance(v, int) and not isinstance(v, bool) and not _INT64_MIN <= v <= _INT64_MAX:
            return _NEVER  # exact Python ints, per row (issue 17 item 7)
        return ("lit", v)
    if isinstance(e, ast.AttrRef):
        if e.var != var or (e.index is not None and not (
                e.index.kind is ast.IndexKind.CURRENT and e.index.offset == 0)):
            return _NEVER
        return ("attr", e.attr)
    if isinstance(e, ast.Unary):
        return ("not" if e.op == "not" else "neg", lower(e.operand, var, udfs))
    if isinstance(e, ast.Binary):
        kind = "logic" if e.op in ("and", "or") else "bin"
        return (kind, e.op, lower(e.left, var, udfs), lower(e.right, var, udfs))
    if isinstance(e, ast.Between):
        return ("between", lower(e.operand, var, udfs), lower(e.low, var, udfs),
                lower(e.high, var, udfs), e.negated)
    if isinstance(e, ast.IsNull):
        return ("isnull", lower(e.operand, var, udfs), e.negated)
    if isinstance(e, ast.Like):
        if not (isinstance(e.pattern, ast.Literal) and isinstance(e.pattern.value, str)):
            return _NEVER
        return ("like", lower(e.operand, var, udfs), e.pattern.value, e.negated)
    if isinstance(e, ast.InList):
        if not all(isinstance(i, ast.Literal) for i in e.items):
            return _NEVER
        vals = tuple(i.value for i in e.items if isinstance(i, ast.Literal))
        return ("in", lower(e.operand, var, udfs), vals, e.negated)
    if isinstance(e, ast.Call) and e.name == "abs" and len(e.args) == 1:
        return ("abs", lower(e.args[0], var, udfs))
    return _NEVER


def _eval(e: VNode, table: pa.Table, n: int) -> Any:  # noqa: C901
    op = e[0]
    if op == "lit":
        v = e[1]
        if v is None:
            return pa.scalar(None)
        if isinstance(v, bool):
            return pa.scalar(v, pa.bool_())
        if isinstance(v, int):
            return pa.scalar(v, pa.int64())
        if isinstance(v, float):
            return pa.scalar(v, pa.float64())
        return pa.scalar(v, pa.string())
    if op == "attr":
        name = e[1]
        if name not in table.column_names and name in ("ts", "type", "id"):
            name = "__" + name
        if name not in table.column_names:
            return pa.nulls(n, pa.null())
        col = table.column(name)
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("us", col.type.tz)).cast(pa.int64())
        return col
    if op == "not":
        x = _eval(e[1], table, n)
        if _kind(x.type) not in ("bool", "null"):
            raise _NotVectorizable
        return pc.invert(x.cast(pa.bool_()) if _kind(x.type) == "null" else x)
    if op == "neg":
        x = _eval(e[1], table, n)
        if _kind(x.type) != "num":
            raise _NotVectorizable
        return pc.negate_checked(x)
    if op == "logic":
        x = _eval(e[2], table, n)
        y = _eval(e[3], table, n)
        kx, ky = _kind(x.type), _kind(y.type)
        if kx not in ("bool", "null") or ky not in ("bool", "null"):
            raise _NotVectorizable
        x = x.cast(pa.bool_()) if kx == "null" else x
        y = y.cast(pa.bool_()) if ky == "null" else y
        return (pc.and_kleene if e[1] == "and" else pc.or_kleene)(x, y)
    if op == "bin":
        bop = e[1]
        x = _eval(e[2], table, n)
        y = _eval(e[3], table, n)
        kx, ky = _kind(x.type), _kind(y.type)
        if "null" in (kx, ky):
            return pa.nulls(n, pa.bool_() if bop in _CMP else pa.float64())
        if bop in _CMP:
            if kx != ky or kx == "other":
                raise _NotVectorizable
            if kx == "num":
                _exact_as_float(x, y)
            return _CMP[bop](x, y)
        if kx != "num" or ky != "num":
            raise _NotVectorizable
        # checked kernels: an int64 overflow raises ArrowInvalid, and the conjunct is then
        # evaluated per row with exact Python ints (issue 17 item 7)
        if bop == "+":
            return pc.add_checked(x, y)
        if bop == "-":
            return pc.subtract_checked(x, y)
        if bop == "*":
            return pc.multiply_checked(x, y)
        if bop == "/":
            _exact_as_float(x, y, both=True)
            xf = pc.cast(x, pa.float64())
            yf = pc.cast(y, pa.float64())
            zero = pc.equal(yf, pa.scalar(0.0))
            return pc.if_else(zero, pa.scalar(None, pa.float64()), pc.divide(xf, yf))
        raise _NotVectorizable
    if op == "between":
        x = _eval(e[1], table, n)
        lo = _eval(e[2], table, n)
        hi = _eval(e[3], table, n)
        kinds = {_kind(x.type), _kind(lo.type), _kind(hi.type)} - {"null"}
        if len(kinds) > 1 or kinds & {"other"}:
            raise _NotVectorizable
        if kinds == {"num"}:
            _exact_as_float(x, lo, hi)
        if "null" in (_kind(x.type), _kind(lo.type), _kind(hi.type)):
            r = pa.nulls(n, pa.bool_())
        else:
            r = pc.and_kleene(pc.greater_equal(x, lo), pc.less_equal(x, hi))
        return pc.invert(r) if e[4] else r
    if op == "isnull":
        x = _eval(e[1], table, n)
        if _kind(x.type) == "null":
            r = pa.array(np.ones(n, dtype=bool))
        else:
            r = pc.is_null(x)
        return pc.invert(r) if e[2] else r
    if op == "like":
        x = _eval(e[1], table, n)
        if _kind(x.type) == "null":
            return pa.nulls(n, pa.bool_())
        if _kind(x.type) != "str":
            raise _NotVectorizable
        r = pc.match_like(x, e[2])
        return pc.invert(r) if e[3] else r
    if op == "in":
        x = _eval(e[1], table, n)
        vals = e[2]
        kx = _kind(x.type)
        non_null = [v for v in vals if v is not None]
        if kx == "null":
            return pa.nulls(n, pa.bool_())
        for v in non_null:
            if isinstance(v, bool) != (kx == "bool") or (isinstance(v, str) != (kx == "str")):
                raise _NotVectorizable
        if kx == "num":
            if any(isinstance(v, int) and abs(v) > _FLOAT_EXACT for v in non_null):
                raise _NotVectorizable
            _exact_as_float(x, both=True)
            vs = pa.array([float(v) + 0.0 for v in non_null], pa.float64())
            # + 0.0 turns -0.0 into 0.0: is_in hashes them apart, and -0.0 = 0 is TRUE
            xx = pc.add(pc.cast(x, pa.float64()), pa.scalar(0.0))
        else:
            vs = pa.array(non_null, x.type if hasattr(x, "type") else None)
            xx = x
        hit = pc.is_in(xx, value_set=vs)
        hit = pc.if_else(pc.is_null(x), pa.scalar(None, pa.bool_()), hit)
        if len(non_null) < len(vals):  # x IN (..., NULL): not found means NULL
            hit = pc.if_else(hit, hit, pa.scalar(None, pa.bool_()))
        return pc.invert(hit) if e[3] else hit
    if op == "abs":
        x = _eval(e[1], table, n)
        if _kind(x.type) != "num":
            raise _NotVectorizable
        return pc.abs_checked(x)
    if op == "vudf":
        fn: VectorizedUdf = e[1]
        args = []
        for a in e[2]:
            x = _eval(a, table, n)
            if isinstance(x, pa.Scalar):
                x = pa.nulls(n) if x.as_py() is None else pa.repeat(x, n)
            elif isinstance(x, pa.ChunkedArray):
                x = x.combine_chunks()
            args.append(x)
        try:
            return fn.batch(n, *args)
        except Exception as exc:  # noqa: BLE001 - a UDF may raise anything; report it clearly
            raise EngineError(f"user function {fn.__name__!r} raised {type(exc).__name__}: "
                              f"{exc}") from exc
    raise _NotVectorizable


def _heavy(e: VNode) -> bool:
    """Does the lowered conjunct call a vectorized UDF (evaluated last, on surviving rows)?"""
    if e[0] == "vudf":
        return True
    return any(isinstance(x, tuple) and x and isinstance(x[0], str) and _heavy(x)
               for x in e[1:])


@dataclass(frozen=True, slots=True)
class VectorPred:
    """One-variable conjuncts of a variable, evaluated over a batch into a boolean mask.

    ``exprs`` are the conjuncts it *may* cover; :meth:`mask` also returns which of them it
    could not evaluate on this batch's schema (those are then checked per event)."""

    var: str
    slot: int
    is_list: bool
    exprs: tuple[ast.Expr, ...]
    """The conjuncts (for the plan compiler and explain; the runtime reads ``program``)."""
    row_fns: tuple[CompiledExpr, ...]
    """The same conjuncts compiled per row (used where Arrow cannot evaluate one)."""
    program: tuple[VNode, ...] = ()
    """The same conjuncts lowered to plain data (:func:`lower`): what :meth:`mask` evaluates."""
    order: tuple[int, ...] = ()
    """The order :meth:`mask` evaluates ``program`` in: conjuncts calling a vectorized UDF
    last, each on the rows still TRUE (empty: in program order, every one on every row)."""

    def mask(self, table: pa.Table) -> tuple[np.ndarray[Any, np.dtype[np.bool_]],
                                             tuple[int, ...]]:
        """TRUE-only mask over the batch, and the indices of the conjuncts that Arrow could
        not evaluate on this schema (to be checked per row with ``row_fns``)."""
        n = table.num_rows
        m = np.ones(n, dtype=bool)
        left: list[int] = []
        program = self.program
        for k in self.order or range(len(program)):
            e = program[k]
            rows: np.ndarray[Any, Any] | None = None
            sub, size = table, n
            if self.order and _heavy(e) and not m.all():
                rows = np.flatnonzero(m)  # a vectorized UDF sees only the surviving rows
                if len(rows) == 0:
                    continue
                sub, size = table.take(pa.array(rows)), len(rows)
            try:
                r = _eval(e, sub, size)
            except (_NotVectorizable, pa.ArrowNotImplementedError, pa.ArrowInvalid,
                    pa.ArrowTypeError):
                left.append(k)
                continue
            if isinstance(r, pa.Scalar):
                v = r.as_py()
                if v is not True:
                    m[:] = False
                continue
            if pa.types.is_null(r.type):
                m[:] = False
                continue
            if not pa.types.is_boolean(r.type):
                left.append(k)
                continue
            arr = pc.fill_null(r, False)
            if isinstance(arr, pa.ChunkedArray):
                arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
            hit = arr.to_numpy(zero_copy_only=False)
            if rows is None:
                m &= hit
            else:
                m[rows] &= hit
        return m, tuple(sorted(left))


def row_udfs(names: set[str] | frozenset[str],
             udfs: Mapping[str, Callable[..., Any]]) -> bool:
    """Does a conjunct calling the UDFs ``names`` call one that is not vectorized (so it stays
    on the take edge, evaluated per event)?"""
    return any(not isinstance(udfs.get(n), VectorizedUdf) for n in names)


def vectorize(exprs: list[ast.Expr], layout: Layout, var: str,
              udfs: Mapping[str, Callable[..., Any]]) -> VectorPred:
    """The vectorized form of a variable's one-variable conjuncts."""
    fns = tuple(compile_expr(e, layout, udfs, f"m_{i}") for i, e in enumerate(exprs))
    program = tuple(lower(e, var, udfs) for e in exprs)
    heavy = [k for k, p in enumerate(program) if _heavy(p)]
    order = tuple([k for k in range(len(program)) if k not in heavy] + heavy) if heavy else ()
    return VectorPred(var, layout.var_slots[var], var in layout.list_vars, tuple(exprs), fns,
                      program, order)


__all__ = ["VNode", "VectorPred", "lower", "row_udfs", "vectorize"]
