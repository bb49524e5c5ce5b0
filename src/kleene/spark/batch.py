"""Batch CEP on a Spark DataFrame: ``kleene.spark.match``.

The pipeline, per :mod:`kleene.spark.plan`'s decision::

    df -> prepare (``__ts`` µs, ``__type``, ``__id``, ``__ord``)
       -> keyed:  repartition(key).sortWithinPartitions(key, __ts, __ord)
          split:  explode each row into its own range and the ranges it is context for,
                  repartitionByRange(__range).sortWithinPartitions(__range, __ts, __ord)
          single: repartition(1).sortWithinPartitions(__ts, __ord)
       -> mapInArrow(TaskRunner)  (kleene.spark.tasks: the engine, one fresh state per group)

Event ids: ``id_col`` when given; otherwise the 0-based row index in the DataFrame's partition
order (one extra cheap job counts the rows of each partition). Ties in time are broken by
``order_col`` when given, else by that same row order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from numbers import Integral
from typing import Any

import pyarrow as pa

from .. import ast
from ..errors import InputError, QueryValidationError
from ..events import TimeInfo
from ..events.model import ID, RESERVED, TS, TYPE
from ..frozen import dataclass
from ..semantic.analyzed import AnalyzedQuery, VarKind
from .nested import SET_POS
from .plan import SparkPlan, plan_query
from .session import require_pyspark
from .tasks import (
    END_US,
    LAST_POS,
    MAX_MATCHES_PER_CALL,
    MAX_MATCHES_PER_EVENT,
    MAX_RUNS_PER_PARTITION,
    ORD,
    RANGE,
    SEQ,
    CapCounts,
    Caps,
    OutputMode,
    ReturnField,
    TaskRunner,
    TaskSpec,
    TimeOut,
    output_schema,
)

_UNIT_US = {"s": 1_000_000, "ms": 1_000, "us": 1}
INTERNAL = (*RESERVED, ORD, RANGE, END_US, LAST_POS, SEQ)


def analyzed_of(query: Any, *, udfs: Mapping[str, Callable[..., Any]] | None = None,
                name: str | None = None) -> AnalyzedQuery:
    """Accept query text, an AST, a CompiledQuery or an AnalyzedQuery."""
    from ..api import CompiledQuery, analyze

    if isinstance(query, AnalyzedQuery):
        return query
    if isinstance(query, CompiledQuery):
        return query.analyzed
    if isinstance(query, str | ast.Query):
        return analyze(query, udfs=udfs, name=name)
    raise QueryValidationError(f"expected query text, a kleene AST or a compiled query, got "
                               f"{type(query).__name__}")


@dataclass(frozen=True, slots=True)
class Prepared:
    """The input with kleene's reserved columns added, and what the output needs to know."""

    df: Any
    time: TimeInfo
    time_out: TimeOut
    id_type: pa.DataType
    attr_cols: tuple[str, ...]


def _check_columns(df: Any, **named: str | None) -> None:
    cols = df.columns
    for what, c in named.items():
        if c is not None and c not in cols:
            raise InputError(f"{what} {c!r} is not a column of the DataFrame; columns: "
                             f"{', '.join(cols)}", column=c)
    clash = [c for c in cols if c in INTERNAL]
    if clash:
        raise InputError(f"column names {clash} are reserved by kleene; rename them")


def _ts_expr(df: Any, time_col: str, time_unit: str) -> tuple[Any, TimeInfo, TimeOut]:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    dt = df.schema[time_col].dataType
    c = F.col(f"`{time_col}`")
    if isinstance(dt, T.StringType):
        if df.isStreaming:
            raise InputError(f"time column {time_col!r} of a stream holds text; give the stream "
                             "a timestamp or numeric time column (e.g. withColumn(col, "
                             "to_timestamp(col)))", column=time_col)
        sample = df.select(c).where(c.isNotNull()).limit(1).collect()
        zoned = bool(sample) and _has_zone(str(sample[0][0]))
        dt = T.TimestampType() if zoned else T.TimestampNTZType()
        c = F.to_timestamp(c) if zoned else F.to_timestamp_ntz(c)
    if isinstance(dt, T.DateType):
        dt, c = T.TimestampNTZType(), c.cast("timestamp_ntz")
    if isinstance(dt, T.TimestampType):
        return F.unix_micros(c), TimeInfo("datetime", _unit(time_unit), "UTC"), "timestamp"
    if isinstance(dt, T.TimestampNTZType):
        spark = df.sparkSession
        tz = spark.conf.get("spark.sql.session.timeZone")
        if tz not in ("UTC", "Etc/UTC", "GMT", "Z", "+00:00"):
            raise InputError(f"time column {time_col!r} has no time zone and the session "
                             f"time zone is {tz}; set spark.sql.session.timeZone=UTC",
                             column=time_col)
        return (F.unix_micros(c.cast("timestamp")), TimeInfo("datetime", _unit(time_unit), None),
                "timestamp_ntz")
    if time_unit not in _UNIT_US:
        raise InputError(f"time unit {time_unit!r}: use one of s, ms, us")
    unit: Any = time_unit
    mult = _UNIT_US[time_unit]
    if isinstance(dt, T.IntegralType):
        return c.cast("long") * F.lit(mult), TimeInfo("numeric", unit), "long"
    if isinstance(dt, T.FractionalType):
        return (F.bround(c.cast("double") * F.lit(float(mult))).cast("long"),
                TimeInfo("numeric", unit), "double")
    raise InputError(f"time column {time_col!r} has type {dt.simpleString()}; use a timestamp, "
                     "a date, an ISO-8601 string or a number", column=time_col)


def _unit(u: str) -> Any:
    return u if u in _UNIT_US else "s"


def _has_zone(text: str) -> bool:
    import re

    from ..events.convert import ZONE_RE

    return re.search(ZONE_RE, text.strip()) is not None


def with_row_index(df: Any, name: str = ID) -> Any:
    """Add ``name``: the 0-based row index in the DataFrame's partition order.

    One small job counts the rows of each partition; the index is then the partition's offset
    plus the row's place in it (from ``monotonically_increasing_id``). Deterministic for file
    scans and in-memory data; after a shuffle, Spark's row order itself is not.
    """
    from pyspark.sql import functions as F

    mid = "__mid"
    with_mid = df.withColumn(mid, F.monotonically_increasing_id())
    counts = dict(with_mid.groupBy(F.spark_partition_id().alias("p")).count()
                  .select("p", "count").collect())
    offsets = []
    total = 0
    for p in range(max(counts) + 1 if counts else 0):
        offsets.append(total)
        total += int(counts.get(p, 0))
    if not offsets:
        return df.withColumn(name, F.lit(0).cast("long"))
    part = F.shiftright(F.col(mid), 33).cast("int")
    offset = F.element_at(F.array(*[F.lit(o).cast("long") for o in offsets]), part + 1)
    local = F.col(mid).bitwiseAND(F.lit((1 << 33) - 1))
    return with_mid.withColumn(name, offset + local).drop(mid)


def prepare(df: Any, *, time_col: str, type_col: str | None = None,
            event_type: str | None = None, id_col: str | None = None,
            order_col: str | None = None, time_unit: str = "s",
            row_index_col: str | None = None) -> Prepared:
    """Add ``__ts``, ``__type``, ``__id`` and ``__ord`` to ``df`` (all user columns stay).

    ``row_index_col`` names a column that already holds the 0-based input row index (the CLI
    computes it per file); it becomes the id (without ``id_col``) and the tie-break order, and
    is not an attribute.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    _check_columns(df, time_col=time_col, type_col=type_col, id_col=id_col,
                   order_col=order_col)
    if type_col is None and event_type is None:
        raise InputError("say which event type each row is: pass type_col (a column) or "
                         "event_type (one type for every row)")
    attr_cols = tuple(c for c in df.columns if c != row_index_col)
    ts, time, time_out = _ts_expr(df, time_col, time_unit)
    typ = (F.col(f"`{type_col}`").cast("string") if type_col is not None
           else F.lit(event_type))
    id_type: pa.DataType = pa.int64()
    if row_index_col is not None and order_col is None:
        order_col = row_index_col
    if id_col is None:
        base = (df.withColumn(ID, F.col(row_index_col)) if row_index_col is not None
                else with_row_index(df))
        ordc = F.col(ID) if order_col is None else F.col(f"`{order_col}`").cast("long")
    else:
        idt = df.schema[id_col].dataType
        if isinstance(idt, T.IntegralType):
            idc = F.col(f"`{id_col}`").cast("long")
        elif isinstance(idt, T.StringType):
            idc, id_type = F.col(f"`{id_col}`"), pa.string()
        else:
            raise InputError(f"id column {id_col!r} has type {idt.simpleString()}; ids must be "
                             "integers or strings", column=id_col)
        base = df.withColumn(ID, idc)
        ordc = (F.col(f"`{order_col}`").cast("long") if order_col is not None
                else F.monotonically_increasing_id())
    out = base.withColumn(TS, ts).withColumn(TYPE, typ).withColumn(ORD, ordc)
    if row_index_col is not None:
        out = out.drop(row_index_col)
    return Prepared(out, time, time_out, id_type, attr_cols)


# ---------------------------------------------------------------------------------------------
# RETURN field types
# ---------------------------------------------------------------------------------------------

_FLOAT_FUNCS = {"sqrt", "ln", "log", "exp", "power", "avg", "floor", "ceil", "round"}
_STRING_FUNCS = {"lower", "upper", "trim", "substr", "concat"}


def return_fields(q: AnalyzedQuery, attr_types: Mapping[str, pa.DataType],
                  id_type: pa.DataType | None = None) -> tuple[ReturnField, ...]:
    """Name and Arrow type of each RETURN field (``None`` type: stored as JSON text); with
    EMIT ROWS, first ``row``: the row's event id (``id_type``)."""
    names = q.output_fields()
    out = [] if q.query.rows is None else [ReturnField(names[0], id_type)]
    for name, item in zip(names[len(out):], q.query.returns, strict=True):
        out.append(ReturnField(name, _expr_type(item.expr, q, attr_types)))
    return tuple(out)


def _expr_type(e: ast.Expr, q: AnalyzedQuery,
               attrs: Mapping[str, pa.DataType]) -> pa.DataType | None:
    if isinstance(e, ast.Literal):
        v = e.value
        if isinstance(v, bool):
            return pa.bool_()
        if isinstance(v, int):
            return pa.int64()
        if isinstance(v, float):
            return pa.float64()
        if isinstance(v, str):
            return pa.string()
        return None
    if isinstance(e, ast.AttrRef):
        t = attrs.get(e.attr)
        if t is None:
            return None
        info = q.variables.get(e.var)
        if info is not None and info.kind is VarKind.LIST and e.index is None:
            return pa.list_(t)
        return t
    if isinstance(e, ast.Binary):
        if e.op in ("and", "or", "=", "!=", "<", "<=", ">", ">="):
            return pa.bool_()
        lt = _expr_type(e.left, q, attrs)
        rt = _expr_type(e.right, q, attrs)
        if lt is None or rt is None:
            return None
        if e.op in ("+", "-", "*", "%") and pa.types.is_integer(lt) and pa.types.is_integer(rt):
            return pa.int64()
        if _numeric(lt) and _numeric(rt):
            return pa.float64()
        return None
    if isinstance(e, ast.Unary):
        if e.op == "not":
            return pa.bool_()
        t = _expr_type(e.operand, q, attrs)
        return t if t is not None and _numeric(t) else None
    if isinstance(e, ast.Between | ast.InList | ast.Like | ast.IsNull):
        return pa.bool_()
    if isinstance(e, ast.Call):
        n = e.name
        if n in ("count", "length", "match_number"):
            return pa.int64()
        if n == "classifier":
            return pa.string()
        if n == "final" and e.args:
            return _expr_type(e.args[0], q, attrs)
        if n in _STRING_FUNCS:
            return pa.string()
        if n in _FLOAT_FUNCS:
            return pa.float64()
        if n in ("sum", "min", "max", "abs", "sign", "coalesce", "nullif", "greatest",
                 "least") and e.args:
            t = _expr_type(e.args[0], q, attrs)
            if t is not None and pa.types.is_list(t):
                t = t.value_type
            if t is None:
                return None
            if n == "sum":
                return pa.int64() if pa.types.is_integer(t) else (
                    pa.float64() if _numeric(t) else None)
            if n in ("abs", "sign") and not _numeric(t):
                return None
            return pa.int64() if pa.types.is_integer(t) else (
                pa.float64() if pa.types.is_floating(t) else t)
        return None
    return None


def _numeric(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t))


# ---------------------------------------------------------------------------------------------
# distribution and the public entry point
# ---------------------------------------------------------------------------------------------


def default_partitions(spark: Any) -> int:
    """``spark.sql.shuffle.partitions`` (kleene's sessions set it small)."""
    try:
        return max(1, int(spark.conf.get("spark.sql.shuffle.partitions")))
    except Exception:  # noqa: BLE001 - a conf lookup must never fail the job
        return 4


def _split_bounds(df: Any, plan: SparkPlan, ranges: int, *, exact: bool) -> tuple[int, ...]:
    """Range boundaries at approximate quantiles of ``__ts``. Unless ``exact`` (the caller
    asked for a number of ranges), ranges are kept at least 4x the context wide so the
    duplicated context stays small."""
    from pyspark.sql import functions as F

    if ranges <= 1:
        return ()
    probs = [i / ranges for i in range(1, ranges)]
    row = df.agg(F.min(TS), F.max(TS), F.percentile_approx(TS, probs, 10_000)).first()
    lo, hi, qs = row[0], row[1], list(row[2] or [])
    if lo is None or hi is None:
        return ()
    ctx = plan.lookback_us + plan.lookahead_us
    n = ranges if exact else int(min(ranges, max(1, (hi - lo) // max(1, 4 * ctx))))
    if n < ranges:
        qs = [qs[min(len(qs) - 1, round(i * ranges / n) - 1)] for i in range(1, n)]
    return inside_bounds(qs, lo, hi)


def inside_bounds(qs: Sequence[Any], lo: int, hi: int) -> tuple[int, ...]:
    """The quantiles ``qs`` (ascending) usable as range boundaries: ``lo < b <= hi``, strictly
    increasing."""
    bounds: list[int] = []
    for b in qs:
        if lo < b <= hi and (not bounds or b > bounds[-1]):
            bounds.append(int(b))
    return tuple(bounds)


def arrow_types(schema: Any) -> dict[str, pa.DataType]:
    """Each column of a Spark schema as its Arrow type; columns Arrow cannot type are left out
    (their RETURN values become JSON text)."""
    from pyspark.sql.pandas.types import to_arrow_type

    types = {}
    for f in schema.fields:
        try:
            types[f.name] = to_arrow_type(f.dataType, timezone="UTC")
        except Exception:  # noqa: BLE001 - unsupported types simply get JSON text
            continue
    return types


def check_keys(keys: Sequence[str], columns: Sequence[str],
               shown: Sequence[str] | None = None) -> None:
    """Raise :class:`InputError` naming the first key that is not one of ``columns``
    (listing ``shown``, the user's columns, if given, else ``columns``)."""
    missing = [k for k in keys if k not in columns]
    if missing:
        raise InputError(f"PARTITION BY / equivalence attribute {missing[0]!r} is not a "
                         f"column; columns: {', '.join(columns if shown is None else shown)}",
                         column=missing[0])


def distribute(prepared: Any, plan: SparkPlan, *, partitions: int | None,
               ranges: int | None = None, order_col: str = ORD) -> tuple[
                   Any, tuple[str, ...], tuple[int, ...] | None]:
    """Shuffle and sort the prepared rows for the plan; returns (df, group cols, bounds).
    ``order_col`` breaks ties in time (``__ord``, or ``__id`` when the ids are row numbers).

    ``partitions=None`` shuffles into ``spark.sql.shuffle.partitions`` without fixing the
    number, so adaptive execution may merge small partitions (a cluster's default of 200 made
    200 tasks for a few thousand events); a number is kept exactly."""
    from pyspark.sql import functions as F

    def shuffled(df: Any, *cols: Any) -> Any:
        return df.repartition(*cols) if partitions is None else df.repartition(partitions, *cols)

    if plan.mode == "keyed":
        keys = [f"`{k}`" for k in plan.keys]
        check_keys(plan.keys, prepared.columns)
        out = shuffled(prepared, *keys).sortWithinPartitions(*keys, TS, order_col)
        return out, tuple(plan.keys), None
    if plan.mode == "single":
        return prepared.repartition(1).sortWithinPartitions(TS, order_col), (), None
    parts = partitions or default_partitions(prepared.sparkSession)
    bounds = _split_bounds(prepared, plan, min(256, ranges or 4 * parts),
                           exact=ranges is not None)
    if not bounds:
        df = prepared.withColumn(RANGE, F.lit(0))
        return df.repartition(1).sortWithinPartitions(TS, order_col), (RANGE,), ()

    def bucket(x: Any) -> Any:
        # the number of bounds <= x, as plain comparisons (code-generated; a higher-order
        # function over an array literal is interpreted and was several times slower)
        total = F.lit(0)
        for b in bounds:
            total = total + (x >= F.lit(b)).cast("int")
        return total

    first = bucket(F.col(TS) - F.lit(plan.lookahead_us))
    last = bucket(F.col(TS) + F.lit(plan.lookback_us))
    df = prepared.withColumn(RANGE, F.explode(F.sequence(first, last)))
    # more ranges than partitions, hash-spread: no sampling pass (repartitionByRange would
    # read the whole input once more to sample it)
    out = shuffled(df, RANGE).sortWithinPartitions(RANGE, TS, order_col)
    return out, (RANGE,), bounds


class CapReport:
    """What ``on_cap="truncate"`` dropped in one :func:`match` call, for the driver to read.

    Pass a new one as ``match(..., on_cap="truncate", cap_report=report)`` and read it after
    the action that ran the matching (``write``, ``collect``, ``count``, ...)::

        report = CapReport()
        out = match(df, q, time_col="ts", type_col="type", max_matches_per_call=10_000,
                    on_cap="truncate", cap_report=report)
        out.write.parquet("matches/")
        report.truncated_matches, report.truncated_runs, report.groups

    The tasks add to a Spark accumulator (classic Spark; Spark Connect has none, so there
    ``on_cap="truncate"`` is refused). Each group reports its own numbers under its key, so a
    task that Spark runs twice (a retry, speculation, a second action on the same result) is
    counted once: the numbers are exact, not "at least".
    """

    def __init__(self) -> None:
        self._acc: Any = None

    def _bind(self, spark: Any) -> Any:
        if self._acc is not None:
            raise InputError("this CapReport already belongs to another match() call; pass a "
                             "new CapReport() to each call")
        sc = _spark_context(spark)
        if sc is None:
            raise InputError("cap_report needs a Spark accumulator, which Spark Connect does "
                             "not have")
        self._acc = sc.accumulator({}, CapCounts())
        return self._acc

    @property
    def groups(self) -> dict[tuple[Any, ...], tuple[int, int]]:
        """Per group that dropped anything: its key (the PARTITION BY values; ``(range,)`` for
        a time range of the unkeyed split; ``()`` for the single task) -> (runs, matches)."""
        return {} if self._acc is None else dict(self._acc.value)

    @property
    def truncated_runs(self) -> int:
        """Partial matches (runs) dropped by ``max_runs_per_partition``."""
        return sum(r for r, _ in self.groups.values())

    @property
    def truncated_matches(self) -> int:
        """Complete matches dropped by ``max_matches_per_event`` / ``max_matches_per_call``."""
        return sum(m for _, m in self.groups.values())

    def __repr__(self) -> str:
        return (f"CapReport(truncated_runs={self.truncated_runs}, "
                f"truncated_matches={self.truncated_matches})")


def _spark_context(spark: Any) -> Any:
    """The session's SparkContext, or ``None`` on Spark Connect (which has none)."""
    try:
        from pyspark.sql.utils import is_remote

        if is_remote():
            return None
    except ImportError:  # pragma: no cover - older PySpark
        pass
    try:
        return spark.sparkContext
    except Exception:  # noqa: BLE001 - Connect raises a not-implemented error here
        return None


def check_caps(engine: str, caps: Caps, cap_report: Any) -> None:
    """Validate :func:`match`'s cap options up front (on the driver), naming the option."""
    for opt in ("max_runs_per_partition", "max_matches_per_event", "max_matches_per_call"):
        val = getattr(caps, opt)
        if val is not None and (isinstance(val, bool) or not isinstance(val, Integral)
                                or val < 1):
            raise InputError(f"{opt} must be a positive integer or None (no cap), not {val!r}")
    if caps.on_cap not in ("error", "truncate"):
        raise InputError(f"on_cap must be 'error' or 'truncate', not {caps.on_cap!r}")
    if cap_report is not None and not isinstance(cap_report, CapReport):
        raise InputError(f"cap_report must be a kleene.spark.batch.CapReport, not "
                         f"{type(cap_report).__name__}")
    changed = caps.changed()
    from ..backends import BACKENDS

    entry = BACKENDS.get(engine)
    if (entry is None or not entry.options) and changed:
        raise InputError(f"{', '.join(changed)}: the caps are options of the automaton engine, "
                         f"not {engine!r}")


def match(df: Any, query: Any, *, time_col: str, type_col: str | None = None,
          event_type: str | None = None, id_col: str | None = None,
          order_col: str | None = None, time_unit: str = "s", engine: str = "automaton",
          output: OutputMode = "map", partitions: int | None = None,
          ranges: int | None = None, order_columns: bool = True,
          row_index_col: str | None = None,
          udfs: Mapping[str, Callable[..., Any]] | None = None,
          name: str | None = None,
          max_runs_per_partition: int | None = MAX_RUNS_PER_PARTITION,
          max_matches_per_event: int | None = MAX_MATCHES_PER_EVENT,
          max_matches_per_call: int | None = MAX_MATCHES_PER_CALL,
          on_cap: str = "error", cap_report: CapReport | None = None,
          epoch_times: bool = False, check: bool = True,
          csv_fields: Sequence[str] | None = None) -> Any:
    """Run a kleene query over a Spark DataFrame of events; returns a DataFrame of matches.

    ``epoch_times``: numeric times are epoch times in ``time_unit`` (the CLI's explicit
    ``--time-unit``), so ``start``/``end`` come out as UTC timestamps, as in the embedded CLI.
    ``check``: the query is checked against the DataFrame's columns first (:func:`check_schema`:
    an unknown attribute is an error with a did-you-mean); ``False`` lets a missing column be
    NULL, as the semantics define it.

    Columns: ``query``; ``match`` (map variable -> array of ids) or, with
    ``output="columns"``, one column per variable (an id, or an array for Kleene variables);
    ``start``, ``end`` (the input's time type); one column per RETURN field; and, unless
    ``order_columns=False``, ``__end_us``, ``__last_pos``, ``__seq``: sort by them for
    kleene's documented output order (:func:`kleene.spark.in_output_order`).
    ``output="json"`` gives one ``record`` column, the embedded JSON Lines line of each match;
    ``output="csv"`` gives ``record`` (the embedded CSV writer's data line) and ``header``
    (its header line), with the order columns; ``csv_fields``: the RETURN fields of that
    header when it is shared (a query set's file: :func:`match_set` passes every query's),
    else each match's own.

    Caps (automaton engine only; the meaning and defaults of
    :class:`kleene.runtime.engine.Runtime`, ``None`` for no cap): ``max_runs_per_partition``,
    ``max_matches_per_event``, ``max_matches_per_call`` and ``on_cap`` (``"error"``: the job
    fails with the engine's :class:`~kleene.errors.CapacityError` message; ``"truncate"``: the
    excess is dropped and counted in ``cap_report``, a :class:`CapReport`, which truncation
    needs and classic Spark only provides, not Spark Connect). Each group (a key in keyed
    mode, a time range in split mode, the whole input in one task) is one engine call, so
    ``max_matches_per_call`` bounds the matches of one group, not of the whole input.

    Example:
        >>> m = match(df, "PATTERN SEQ(A a, B b) WITHIN 10 seconds", time_col="ts",
        ...           type_col="type")  # doctest: +SKIP
    """
    require_pyspark()
    from pyspark.sql.pandas.types import from_arrow_schema

    if output not in ("map", "columns", "json", "csv"):
        raise InputError(f"output {output!r}: use 'map', 'columns', 'json' or 'csv'")
    from ..backends import BACKENDS

    if engine not in BACKENDS and ":" not in engine:
        raise QueryValidationError(f"unknown engine {engine!r}; available: "
                                   f"{', '.join(sorted(BACKENDS))}")
    caps = Caps(max_runs_per_partition, max_matches_per_event, max_matches_per_call, on_cap)
    check_caps(engine, caps, cap_report)
    if caps.on_cap == "truncate":
        if _spark_context(df.sparkSession) is None:
            raise InputError("on_cap='truncate' is not available on Spark Connect: kleene "
                             "reports the dropped runs and matches through a Spark "
                             "accumulator, which Connect does not have; use on_cap='error' "
                             "(and raise the caps if needed)")
        if cap_report is None:
            raise InputError("on_cap='truncate' needs cap_report=CapReport() (from "
                             "kleene.spark.batch) so the dropped runs and matches are "
                             "reported, not lost silently")
    acc = None if cap_report is None else cap_report._bind(df.sparkSession)
    q = analyzed_of(query, udfs=udfs, name=name)
    if check:
        check_schema(q, df, time_col=time_col, event_type=event_type,
                     hidden=(row_index_col, order_col if order_col != time_col else None))
    if q.query.timeouts and output == "csv":
        raise QueryValidationError("EMIT TIMEOUTS: timed-out partial matches have no CSV "
                                   "form; use output='json', 'map' or 'columns' (they have "
                                   "an 'expired' field)")
    plan = plan_query(q)
    prep = prepare(df, time_col=time_col, type_col=type_col, event_type=event_type,
                   id_col=id_col, order_col=order_col, time_unit=time_unit,
                   row_index_col=row_index_col)
    attr_types = arrow_types(df.schema)
    # move only what the task needs through the shuffle and Arrow: the attributes the query
    # reads (a custom evaluator may read any), no constant type column, one column for both
    # id and tie-break order when the ids are the row index
    attrs = prep.attr_cols
    check_keys(plan.keys, prep.df.columns, shown=df.columns)
    if ":" not in engine:
        used = referenced_attributes(q)
        attrs = tuple(c for c in attrs if c in used)
    same_order = id_col is None and (order_col is None or order_col == row_index_col)
    order_of = ID if same_order else ORD
    const_type = event_type if type_col is None else None
    keep = [ID, TS, *([] if const_type is not None else [TYPE]),
            *([] if same_order else [ORD]), *attrs]
    lean = prep.df.select(*[f"`{c}`" for c in keep])
    sorted_df, group_cols, bounds = distribute(lean, plan, partitions=partitions,
                                               ranges=ranges, order_col=order_of)
    out_time, out_type = prep.time, prep.time_out
    if epoch_times and prep.time.kind == "numeric":
        out_time, out_type = TimeInfo("datetime", prep.time.unit, "UTC"), "timestamp"
    spec = TaskSpec(analyzed=q, engine=engine, time=out_time, group_cols=group_cols,
                    attr_cols=attrs, id_type=prep.id_type, output=output,
                    event_type=const_type, order_col=order_of,
                    time_out=out_type, returns=return_fields(q, attr_types, prep.id_type),
                    range_bounds=bounds if plan.mode == "split" else None,
                    include_internal=order_columns or output in ("json", "csv"),
                    caps=caps, cap_report=acc,
                    csv_fields=None if csv_fields is None else tuple(csv_fields))
    _check_output_names(spec)
    schema = from_arrow_schema(output_schema(spec))
    from .ship import ship_udfs

    ship_udfs(df.sparkSession, q.udfs)  # a UDF's module to the workers, before the job
    return sorted_df.mapInArrow(TaskRunner(spec), schema)


def check_schema(q: AnalyzedQuery, df: Any, *, time_col: str, event_type: str | None = None,
                 hidden: Sequence[str | None] = (), query_types: Sequence[str] = ()) -> None:
    """Check the query against the DataFrame's columns, as the embedded engine checks it
    against its input: an unknown attribute or PARTITION BY column, a string column compared
    with a number, or (with ``event_type``, every row's type) an other event type raises
    :class:`~kleene.errors.QueryValidationError` with a did-you-mean. Without ``event_type``
    the types are in the data, which is not read here: they are not checked.
    ``query_types``: the set's query names, event types too (nested queries,
    docs/semantics.md §17).

    Example:
        >>> check_schema(analyzed_of("PATTERN SEQ(T a) WHERE a.avgspeed > 1"), df,
        ...              time_col="ts")  # doctest: +SKIP
        QueryValidationError: ... has no column 'avgspeed' (did you mean 'avgSpeed'?) ...
    """
    from ..semantic.schema import InputSchema, check_against

    skip = {*INTERNAL, *(h for h in hidden if h is not None)}
    types = arrow_types(df.schema)
    columns: dict[str, Any] = {c: types.get(c) for c in df.columns if c not in skip}
    if time_col in columns and types.get(time_col) == pa.string():
        columns[time_col] = "timestamp"  # ISO-8601 text: parsed into the time
    schema = InputSchema(columns, None if event_type is None else
                         frozenset({event_type, *query_types}), source="the DataFrame")
    check_against(q, schema)


def referenced_attributes(q: AnalyzedQuery) -> frozenset[str]:
    """Every attribute name the query reads (``v.attr`` anywhere, PARTITION BY, ``[attr]``)."""
    import dataclasses

    found: set[str] = set(q.partition_by) | set(q.equivalence)
    stack: list[Any] = [q.query, *q.conjuncts]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.AttrRef):
            found.add(node.attr)
        elif isinstance(node, ast.Equivalence):
            found.update(node.attrs)
        if dataclasses.is_dataclass(node) and not isinstance(node, type):
            stack.extend(getattr(node, f.name) for f in dataclasses.fields(node))
        elif isinstance(node, tuple | list):
            stack.extend(node)
    return frozenset(found)


def _check_output_names(spec: TaskSpec) -> None:
    names = [f.name for f in output_schema(spec)]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise QueryValidationError(f"output column names clash: {', '.join(dup)}; give the "
                                   "RETURN fields different aliases (AS name) or use "
                                   "output='map'")




def order_columns_of(matches: Any) -> list[str]:
    """The columns that sort ``matches`` into kleene's order (a query set's have the query's
    place between the completing event and the query's own order)."""
    return [END_US, LAST_POS, *([SET_POS] if SET_POS in matches.columns else []), SEQ]


def in_output_order(matches: Any) -> Any:
    """Sort a match DataFrame into kleene's documented order and drop the order columns."""
    cols = order_columns_of(matches)
    return matches.orderBy(*cols).drop(*cols)


def spark_query_set(queries: Any, *, udfs: Mapping[str, Callable[..., Any]] | None = None,
                    dialect: str | None = None, nested: str | None = None) -> Any:
    """``queries`` as a :class:`kleene.QuerySet` (compiled unless it is one). ``nested``: a
    set with nested queries (a query reading another's matches) is refused, the message
    saying why (``None``: accepted)."""
    from ..queryset import QuerySet, compile_many, nested_reads

    qs = queries if isinstance(queries, QuerySet) else compile_many(
        queries, udfs=udfs, dialect=dialect)
    reads = {n: r for n, r in nested_reads(list(qs.queries)).items() if r}
    if reads and nested is not None:
        n, r = next(iter(reads.items()))
        raise QueryValidationError(f"query set on Spark: {n!r} reads the matches of {r[0]!r}; "
                                   f"{nested}")
    return qs


def match_set(df: Any, queries: Any, *, time_col: str,
              udfs: Mapping[str, Callable[..., Any]] | None = None,
              dialect: str | None = None, row_index_col: str | None = None,
              output: OutputMode = "map", order_columns: bool = True,
              on_cap: str = "error", **options: Any) -> Any:
    """A query set over a DataFrame in one Spark job: each query as :func:`match` runs it
    (its own plan: keyed by its PARTITION BY / ``[attr]``, split along time or in one task),
    over the same prepared input (one row index for all), the outputs united by name.

    ``queries``: a :class:`kleene.QuerySet`, a list of queries or a mapping name -> query (as
    :func:`kleene.compile_many`). Each query's matches are those of the query alone (and of the
    embedded set); the ``query`` column names it. With ``order_columns`` the result also has
    ``__set_pos`` (the query's place): :func:`in_output_order` then gives the set's documented
    order. Nested queries (docs/semantics.md §17): each nested group (producers and the
    consumers reading their matches) runs through the embedded set engine, per key when its
    queries share one, else in one task (:func:`match_group`); with ``output="map"`` or ``"columns"`` the ids are then text (a
    derived event's id is its label ``P#k``). Not supported: ``on_cap="truncate"`` and CSV
    records.
    """
    require_pyspark()
    from functools import reduce

    from pyspark.sql import functions as F

    from .nested import nested_groups

    qs = spark_query_set(queries, udfs=udfs, dialect=dialect)
    if on_cap == "truncate" or options.pop("cap_report", None) is not None:
        raise InputError("on_cap='truncate' for a query set on Spark is not supported (one "
                         "CapReport per match() call); use on_cap='error', raise the caps, or "
                         "run the queries one by one")
    # CSV: one header for the whole set, every query's RETURN fields (as the embedded CLI)
    fields = (list(dict.fromkeys(f for c in qs.queries for f in c.analyzed.output_fields()))
              if output == "csv" else None)
    if row_index_col is None:  # one row index for every query: the same ids and tie-breaks
        row_index_col = "__set_row"
        df = with_row_index(df, row_index_col)
    groups = nested_groups(qs)
    grouped = {p for g in groups for p in g}
    parts = []
    for place, c in enumerate(qs.queries):
        if place in grouped:  # a nested group: below, its queries together
            continue
        part = match(df, c.analyzed, time_col=time_col, row_index_col=row_index_col,
                     output=output, order_columns=order_columns, on_cap=on_cap,
                     csv_fields=fields, **options)
        if order_columns or output in ("json", "csv"):
            part = part.withColumn(SET_POS, F.lit(place).cast("long"))
        parts.append(part)
    for g in groups:
        parts.append(match_group(df, qs, g, time_col=time_col, row_index_col=row_index_col,
                                 output=output, order_columns=order_columns,
                                 csv_fields=fields, **options))
    if groups and output in ("map", "columns"):
        id_cols = {"match", *(v for c in qs.queries for v in c.analyzed.variables)}
        parts = _ids_as_text(parts, id_cols)
    return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), parts)


def _ids_as_text(parts: list[Any], id_cols: set[str]) -> list[Any]:
    """A set with nested queries writes ids as text (a derived event's id is its label):
    the id columns (``id_cols``: ``match`` or the variables) of the other queries' parts are
    cast to match (the group's parts have them as text already)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    text: dict[str, Any] = {}
    for part in parts:
        for f in part.schema.fields:
            if f.name not in id_cols:
                continue
            dt = f.dataType
            inner = dt.valueType if isinstance(dt, T.MapType) else dt
            inner = inner.elementType if isinstance(inner, T.ArrayType) else inner
            if isinstance(inner, T.StringType):  # text ids: map, list or one id
                text[f.name] = dt
    out = []
    for part in parts:
        for f in part.schema.fields:
            want = text.get(f.name)
            if want is not None and f.dataType != want:
                part = part.withColumn(f.name, F.col(f"`{f.name}`").cast(want))
        out.append(part)
    return out


def match_group(df: Any, qs: Any, places: tuple[int, ...], *, time_col: str,
                row_index_col: str, type_col: str | None = None,
                event_type: str | None = None, id_col: str | None = None,
                order_col: str | None = None, time_unit: str = "s",
                engine: str = "automaton", output: OutputMode = "map",
                partitions: int | None = None, ranges: int | None = None,
                order_columns: bool = True, epoch_times: bool = False, check: bool = True,
                max_runs_per_partition: int | None = MAX_RUNS_PER_PARTITION,
                max_matches_per_event: int | None = MAX_MATCHES_PER_EVENT,
                max_matches_per_call: int | None = MAX_MATCHES_PER_CALL,
                on_cap: str = "error", csv_fields: Sequence[str] | None = None) -> Any:
    """A nested group of the set ``qs`` (the queries at ``places``: producers and the
    consumers reading their matches) through the embedded set engine
    (:mod:`kleene.spark.nested`): per key when its queries share one (:func:`group_key`;
    ``partitions`` as for a keyed query), else in one task. ``ranges`` does not apply."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from .nested import GroupRunner, group_spec
    from .ship import ship_udfs

    names = [qs.queries[p].name for p in places]
    if engine != "automaton":
        raise QueryValidationError(f"query set on Spark: the nested queries {', '.join(names)} "
                                   f"run on the automaton engine, not {engine!r}")
    caps = Caps(max_runs_per_partition, max_matches_per_event, max_matches_per_call, on_cap)
    check_caps(engine, caps, None)
    analyzed = [qs.queries[p].analyzed for p in places]
    if check:
        for q in analyzed:
            check_schema(q, df, time_col=time_col, event_type=event_type,
                         hidden=(row_index_col, order_col if order_col != time_col else None),
                         query_types=qs.names)
    prep = prepare(df, time_col=time_col, type_col=type_col, event_type=event_type,
                   id_col=id_col, order_col=order_col, time_unit=time_unit,
                   row_index_col=row_index_col)
    used = {a for q in analyzed for a in referenced_attributes(q)}
    attrs = tuple(c for c in prep.attr_cols if c in used)
    same_order = id_col is None and (order_col is None or order_col == row_index_col)
    order_of = ID if same_order else ORD
    keep = [ID, TS, TYPE, *([] if same_order else [ORD]), *attrs]
    lean = prep.df.select(*[f"`{c}`" for c in keep])
    keys = group_key(analyzed)
    if keys:
        # per key (each key's state fresh), with the producers' global match numbers
        check_keys(keys, prep.df.columns, shown=df.columns)
        ranks = _rank_rows(df, qs, places, lean, keys, time_col=time_col,
                           row_index_col=row_index_col, type_col=type_col,
                           event_type=event_type, id_col=id_col, order_col=order_col,
                           time_unit=time_unit, partitions=partitions, caps=caps)
        rows = lean.unionByName(ranks, allowMissingColumns=True)
        cols = [f"`{k}`" for k in keys]
        rows = rows.repartition(*cols) if partitions is None else \
            rows.repartition(partitions, *cols)
        one = rows.sortWithinPartitions(*cols, TS, order_of)
    else:
        one = lean.repartition(1).sortWithinPartitions(TS, order_of)
    out_time, out_type = prep.time, prep.time_out
    if epoch_times and prep.time.kind == "numeric":
        out_time, out_type = TimeInfo("datetime", prep.time.unit, "UTC"), "timestamp"
    attr_types = arrow_types(df.schema)
    specs = [TaskSpec(analyzed=q, engine=engine, time=out_time, group_cols=(), attr_cols=attrs,
                      id_type=prep.id_type, output=output, order_col=order_of,
                      time_out=out_type, returns=return_fields(q, attr_types, prep.id_type),
                      include_internal=order_columns or output in ("json", "csv"), caps=caps,
                      csv_fields=None if csv_fields is None else tuple(csv_fields))
             for q in analyzed]
    for s in specs:
        _check_output_names(s)
    big = 1 << 62  # None: no cap (the set runtime takes numbers)
    options = {k: (big if v is None else v) for k, v in caps.options().items()}
    spec = group_spec(qs, places, specs, attr_cols=attrs, time=out_time, order_col=order_of,
                      options=options, keys=keys)
    for q in analyzed:
        ship_udfs(df.sparkSession, q.udfs)
    return one.mapInArrow(GroupRunner(spec), from_arrow_schema(spec.schema))


def group_key(analyzed: Sequence[AnalyzedQuery]) -> tuple[str, ...]:
    """The key attributes every query of a nested group is keyed by on Spark (each one's
    :func:`plan_query` is keyed, and these are among the keys of each), in the first query's
    order; ``()``: none (the group then runs in one task)."""
    plans = [plan_query(q) for q in analyzed]
    if any(p.mode != "keyed" for p in plans):
        return ()
    return tuple(k for k in plans[0].keys if all(k in p.keys for p in plans[1:]))


def _rank_rows(df: Any, qs: Any, places: tuple[int, ...], lean: Any, keys: tuple[str, ...],
               *, time_col: str, row_index_col: str, type_col: str | None,
               event_type: str | None, id_col: str | None, order_col: str | None,
               time_unit: str, partitions: int | None, caps: Caps) -> Any:
    """Per producer match of a keyed nested group: its key, its global number ``k`` among the
    producer's matches in the producer's order (sorted by the order columns of the producer
    run alone, which are its matches in the set) and the producer's index in the group."""
    from functools import reduce

    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from ..queryset import nested_reads
    from .nested import RANK, RANK_OF

    group = [qs.queries[p] for p in places]
    read = {p for r in nested_reads(list(qs.queries)).values() for p in r}
    ids = lean.select(F.col(ID).alias("__rid"), *[F.col(f"`{k}`") for k in keys])
    parts = []
    for i, c in enumerate(group):
        if c.name not in read:
            continue
        alone = match(df, c.analyzed, time_col=time_col, row_index_col=row_index_col,
                      type_col=type_col, event_type=event_type, id_col=id_col,
                      order_col=order_col, time_unit=time_unit, output="map",
                      partitions=partitions, check=False,
                      max_runs_per_partition=caps.max_runs_per_partition,
                      max_matches_per_event=caps.max_matches_per_event,
                      max_matches_per_call=caps.max_matches_per_call, on_cap=caps.on_cap)
        order = Window.partitionBy(F.lit(i)).orderBy(END_US, LAST_POS, SEQ)
        ranked = alone.select(F.map_values("match")[0][0].alias("__rid"),
                              F.row_number().over(order).cast("long").alias(RANK))
        parts.append(ranked.join(ids, "__rid").select(
            *[F.col(f"`{k}`") for k in keys], RANK, F.lit(i).cast("long").alias(RANK_OF)))
    return reduce(lambda a, b: a.unionByName(b), parts)


__all__ = ["SET_POS", "CapReport", "Prepared", "analyzed_of", "arrow_types", "check_keys",
           "check_schema", "distribute", "in_output_order", "inside_bounds", "match",
           "match_group", "match_set",
           "order_columns_of", "prepare", "referenced_attributes", "return_fields",
           "spark_query_set", "with_row_index"]
