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
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import ast
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


def _eval(e: ast.Expr, var: str, table: pa.Table, n: int) -> Any:  # noqa: C901
    if isinstance(e, ast.Literal):
        if e.value is None:
            return pa.scalar(None)
        if isinstance(e.value, bool):
            return pa.scalar(e.value, pa.bool_())
        if isinstance(e.value, int):
            if not _INT64_MIN <= e.value <= _INT64_MAX:
                raise _NotVectorizable  # exact Python ints, per row (issue 17 item 7)
            return pa.scalar(e.value, pa.int64())
        if isinstance(e.value, float):
            return pa.scalar(e.value, pa.float64())
        return pa.scalar(e.value, pa.string())
    if isinstance(e, ast.AttrRef):
        if e.var != var or (e.index is not None and not (
                e.index.kind is ast.IndexKind.CURRENT and e.index.offset == 0)):
            raise _NotVectorizable
        name = e.attr
        if name not in table.column_names and name in ("ts", "type", "id"):
            name = "__" + name
        if name not in table.column_names:
            return pa.nulls(n, pa.null())
        col = table.column(name)
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("us", col.type.tz)).cast(pa.int64())
        return col
    if isinstance(e, ast.Unary):
        x = _eval(e.operand, var, table, n)
        if e.op == "not":
            if _kind(x.type) not in ("bool", "null"):
                raise _NotVectorizable
            return pc.invert(x.cast(pa.bool_()) if _kind(x.type) == "null" else x)
        if _kind(x.type) != "num":
            raise _NotVectorizable
        return pc.negate_checked(x)
    if isinstance(e, ast.Binary):
        x = _eval(e.left, var, table, n)
        y = _eval(e.right, var, table, n)
        kx, ky = _kind(x.type), _kind(y.type)
        if e.op in ("and", "or"):
            if kx not in ("bool", "null") or ky not in ("bool", "null"):
                raise _NotVectorizable
            x = x.cast(pa.bool_()) if kx == "null" else x
            y = y.cast(pa.bool_()) if ky == "null" else y
            return (pc.and_kleene if e.op == "and" else pc.or_kleene)(x, y)
        if "null" in (kx, ky):
            return pa.nulls(n, pa.bool_() if e.op in _CMP else pa.float64())
        if e.op in _CMP:
            if kx != ky or kx == "other":
                raise _NotVectorizable
            if kx == "num":
                _exact_as_float(x, y)
            return _CMP[e.op](x, y)
        if kx != "num" or ky != "num":
            raise _NotVectorizable
        # checked kernels: an int64 overflow raises ArrowInvalid, and the conjunct is then
        # evaluated per row with exact Python ints (issue 17 item 7)
        if e.op == "+":
            return pc.add_checked(x, y)
        if e.op == "-":
            return pc.subtract_checked(x, y)
        if e.op == "*":
            return pc.multiply_checked(x, y)
        if e.op == "/":
            _exact_as_float(x, y, both=True)
            xf = pc.cast(x, pa.float64())
            yf = pc.cast(y, pa.float64())
            zero = pc.equal(yf, pa.scalar(0.0))
            return pc.if_else(zero, pa.scalar(None, pa.float64()), pc.divide(xf, yf))
        raise _NotVectorizable
    if isinstance(e, ast.Between):
        x = _eval(e.operand, var, table, n)
        lo = _eval(e.low, var, table, n)
        hi = _eval(e.high, var, table, n)
        kinds = {_kind(x.type), _kind(lo.type), _kind(hi.type)} - {"null"}
        if len(kinds) > 1 or kinds & {"other"}:
            raise _NotVectorizable
        if kinds == {"num"}:
            _exact_as_float(x, lo, hi)
        if "null" in (_kind(x.type), _kind(lo.type), _kind(hi.type)):
            r = pa.nulls(n, pa.bool_())
        else:
            r = pc.and_kleene(pc.greater_equal(x, lo), pc.less_equal(x, hi))
        return pc.invert(r) if e.negated else r
    if isinstance(e, ast.IsNull):
        x = _eval(e.operand, var, table, n)
        if _kind(x.type) == "null":
            r = pa.array(np.ones(n, dtype=bool))
        else:
            r = pc.is_null(x)
        return pc.invert(r) if e.negated else r
    if isinstance(e, ast.Like):
        x = _eval(e.operand, var, table, n)
        if not (isinstance(e.pattern, ast.Literal) and isinstance(e.pattern.value, str)):
            raise _NotVectorizable
        if _kind(x.type) == "null":
            return pa.nulls(n, pa.bool_())
        if _kind(x.type) != "str":
            raise _NotVectorizable
        r = pc.match_like(x, e.pattern.value)
        return pc.invert(r) if e.negated else r
    if isinstance(e, ast.InList):
        x = _eval(e.operand, var, table, n)
        if not all(isinstance(i, ast.Literal) for i in e.items):
            raise _NotVectorizable
        vals = [i.value for i in e.items if isinstance(i, ast.Literal)]
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
        return pc.invert(hit) if e.negated else hit
    if isinstance(e, ast.Call) and e.name == "abs" and len(e.args) == 1:
        x = _eval(e.args[0], var, table, n)
        if _kind(x.type) != "num":
            raise _NotVectorizable
        return pc.abs_checked(x)
    raise _NotVectorizable


@dataclass(frozen=True, slots=True)
class VectorPred:
    """One-variable conjuncts of a variable, evaluated over a batch into a boolean mask.

    ``exprs`` are the conjuncts it *may* cover; :meth:`mask` also returns which of them it
    could not evaluate on this batch's schema (those are then checked per event)."""

    var: str
    slot: int
    is_list: bool
    exprs: tuple[ast.Expr, ...]
    row_fns: tuple[CompiledExpr, ...]
    """The same conjuncts compiled per row (used where Arrow cannot evaluate one)."""

    def mask(self, table: pa.Table) -> tuple[np.ndarray[Any, np.dtype[np.bool_]],
                                             tuple[int, ...]]:
        """TRUE-only mask over the batch, and the indices of the conjuncts that Arrow could
        not evaluate on this schema (to be checked per row with ``row_fns``)."""
        n = table.num_rows
        m = np.ones(n, dtype=bool)
        left: list[int] = []
        for k, e in enumerate(self.exprs):
            try:
                r = _eval(e, self.var, table, n)
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
            m &= arr.to_numpy(zero_copy_only=False)
        return m, tuple(left)


def vectorize(exprs: list[ast.Expr], layout: Layout, var: str,
              udfs: Mapping[str, Callable[..., Any]]) -> VectorPred:
    """The vectorized form of a variable's one-variable conjuncts."""
    fns = tuple(compile_expr(e, layout, udfs, f"m_{i}") for i, e in enumerate(exprs))
    return VectorPred(var, layout.var_slots[var], var in layout.list_vars, tuple(exprs), fns)


__all__ = ["VectorPred", "vectorize"]
