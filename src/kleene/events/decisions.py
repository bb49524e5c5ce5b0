"""Type decisions shared by every source: column types and how time is read, fixed by the
first chunk of an input (:class:`Decisions`), and the conversion of the time column to
microseconds under those decisions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InputError
from ..frozen import dataclass
from .convert import (
    INFER_ROWS,
    CellError,
    cast_to,
    convert_checked,
    has_zone,
    infer_text_type,
    parse_formatted,
    parse_timestamps,
)
from .model import RESERVED, TimeInfo
from .options import ReadOptions

TIME_CANDIDATES = ("ts", "timestamp", "time", "event_time")
"""The time column when none is named: the first of these the input has (any case)."""
UNIT_US = {"s": 1_000_000, "ms": 1_000, "us": 1}

TimeMode = Literal["timestamp", "numeric", "iso-zoned", "iso-naive", "formatted"]


def default_time_column(columns: list[str]) -> str | None:
    """The time column when none is named: the first of :data:`TIME_CANDIDATES` among
    ``columns``, compared without case (``TIMESTAMP``, ``Time``); an exact match wins over
    one that differs only in case.

    Example:
        >>> default_time_column(["REPORT_ID", "TIMESTAMP", "avgSpeed"])
        'TIMESTAMP'
        >>> default_time_column(["Time", "time"]), default_time_column(["x"])
        ('time', None)
    """
    for cand in TIME_CANDIDATES:
        if cand in columns:
            return cand
        folded = [c for c in columns if c.casefold() == cand]
        if folded:
            return folded[0]
    return None


def normalise_type(t: pa.DataType) -> pa.DataType:
    """The attribute type kleene keeps: int64, float64, string, bool, timestamp[us]."""
    if pa.types.is_integer(t):
        return pa.int64()
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return pa.float64()
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_dictionary(t):
        return pa.string()
    if pa.types.is_null(t):
        return pa.string()
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", "UTC" if t.tz else None)
    if pa.types.is_date(t):
        return pa.timestamp("us")
    return t


@dataclass(slots=True)
class Decisions:
    """Per-stream facts fixed by the first chunk: column types and how time is read.

    :attr:`EventStream.decisions` after the first batch; pass them to another
    :class:`EventStream` (``decisions=``) to read more files of the same input exactly as
    one stream over all of them would (the Spark CLI reads each file in its own task)."""

    types: dict[str, pa.DataType]
    inferred: set[str]
    time_col: str
    time_mode: TimeMode
    time: TimeInfo


def decide(table: pa.Table, text_cols: frozenset[str], opts: ReadOptions,
           overrides: Mapping[str, pa.DataType], src: str) -> Decisions:
    """The decisions for an input whose first chunk is ``table`` (``text_cols`` are the
    columns the source delivered as text, to be typed by inference)."""
    cols = table.column_names
    for c in cols:
        if c in RESERVED:
            raise InputError(f"column name {c!r} is reserved by kleene; rename it", path=src)
    if opts.time_col is not None:
        time_col = opts.time_col
        if time_col not in cols:
            raise InputError(f"time column {time_col!r} not found; the columns are: "
                             f"{', '.join(cols)}", path=src)
    else:
        found = default_time_column(cols)
        if found is None:
            raise InputError(f"no time column: pass --time-col (time_col=); the columns "
                             f"are: {', '.join(cols)}", path=src)
        time_col = found
    if opts.event_type is None:
        type_col = opts.type_col or "type"
        if type_col not in cols:
            what = (f"type column {type_col!r} not found" if opts.type_col
                    else "no event type column 'type'")
            raise InputError(f"{what}; pass --type-col COLUMN or --event-type NAME; "
                             f"the columns are: {', '.join(cols)}", path=src)
    if opts.id_col is not None and opts.id_col not in cols:
        raise InputError(f"id column {opts.id_col!r} not found; the columns are: "
                         f"{', '.join(cols)}", path=src)
    for c in overrides:
        if c not in cols:
            raise InputError(f"--column-type names column {c!r}, which is not in the input; "
                             f"the columns are: {', '.join(cols)}", path=src)
    types: dict[str, pa.DataType] = {}
    inferred: set[str] = set()
    for c in cols:
        if c in overrides:
            types[c] = overrides[c]
        elif c in text_cols:
            # (inference reads the first INFER_ROWS values: no copy of the whole column;
            # when they are all empty, the first values further on, as far as the chunk goes)
            col = table.column(c)
            head = col.slice(0, INFER_ROWS).combine_chunks()
            if head.null_count == len(head) and col.null_count < len(col):
                head = col.drop_null().slice(0, INFER_ROWS).combine_chunks()
            types[c] = infer_text_type(head)
            inferred.add(c)
        else:
            types[c] = normalise_type(table.column(c).type)
    tarr = _first_value(table.column(time_col))
    ttype = types[time_col]
    mode: TimeMode
    if opts.time_format is not None:
        if not (pa.types.is_string(tarr.type) or pa.types.is_large_string(tarr.type)):
            raise InputError(f"--time-format applies to text timestamps, but the time "
                             f"column has type {tarr.type}", path=src, column=time_col)
        mode = "formatted"
        zoned = "%z" in opts.time_format
        info = TimeInfo("datetime", opts.time_unit, "UTC" if zoned else None)
        types[time_col] = pa.timestamp("us", "UTC" if zoned else None)
        inferred.discard(time_col)
    elif pa.types.is_timestamp(ttype) and not pa.types.is_string(tarr.type):
        mode = "timestamp"
        info = TimeInfo("datetime", opts.time_unit, "UTC" if ttype.tz else None)
    elif pa.types.is_integer(ttype) or pa.types.is_floating(ttype):
        mode = "numeric"
        info = TimeInfo("numeric", opts.time_unit)
    elif pa.types.is_string(tarr.type) or pa.types.is_large_string(tarr.type):
        zoned = bool(len(tarr)) and bool(has_zone(tarr.cast(pa.string()))[0].as_py())
        if time_col in overrides and not pa.types.is_timestamp(ttype):
            zoned = False
        mode = "iso-zoned" if zoned else "iso-naive"
        info = TimeInfo("datetime", opts.time_unit, "UTC" if zoned else None)
        types[time_col] = pa.timestamp("us", "UTC" if zoned else None)
        inferred.discard(time_col)
    elif pa.types.is_date(tarr.type):
        mode = "timestamp"
        info = TimeInfo("datetime", opts.time_unit, None)
    else:
        raise InputError(f"time column has type {tarr.type}; expected timestamps, "
                         "ISO-8601 strings or epoch numbers (see --time-unit)",
                         path=src, column=time_col)
    return Decisions(types, inferred, time_col, mode, info)


def _first_value(col: pa.ChunkedArray) -> pa.Array:
    """The column's first value that is not NULL, as an array of one (none if there is
    none): what :func:`decide` reads of the time column besides its type, without a copy
    of the whole column."""
    for chunk in col.chunks:
        if chunk.null_count < len(chunk):
            return chunk.drop_null().slice(0, 1) if chunk.null_count else chunk.slice(0, 1)
    return pa.array([], col.type)


def _micros(ts: pa.Array) -> pa.Array:
    """``timestamp[us]`` as int64 microseconds: the same buffers seen as int64 (what the
    cast gives, without a copy)."""
    if pa.types.is_timestamp(ts.type) and ts.type.unit == "us":
        return ts.view(pa.int64())
    return pc.cast(ts, pa.int64())


def time_micros(arr: pa.Array, d: Decisions, opts: ReadOptions,
                overrides: Mapping[str, pa.DataType]) -> tuple[pa.Array, list[CellError]]:
    """The time column as int64 microseconds, and the cells that are not times. A numeric
    integer time column that holds fractions is widened to float64 in ``d``."""
    col = d.time_col
    unit_us = UNIT_US[opts.time_unit]
    if d.time_mode == "formatted":
        assert opts.time_format is not None
        ts, errs = parse_formatted(arr.cast(pa.string()), col, opts.time_format)
        return _micros(ts), errs
    if d.time_mode in ("iso-zoned", "iso-naive") or (
            d.time_mode == "timestamp" and pa.types.is_string(arr.type)):
        if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
            ts, errs = parse_timestamps(arr.cast(pa.string()), col,
                                        with_zone=d.time.tz is not None)
        else:  # parsed by the source (a typed CSV block): no cast when it has the type
            target = pa.timestamp("us", d.time.tz)
            ts, errs = (arr if arr.type == target else pc.cast(arr, target, safe=False)), []
        return _micros(ts), errs
    if d.time_mode == "timestamp":
        target = pa.timestamp("us", d.time.tz)
        return pc.cast(pc.cast(arr, target, safe=False), pa.int64()), []
    # numeric epoch
    target = d.types[col]
    if arr.type == target:
        num, errs = arr, []
    else:
        def not_epoch(i: int) -> str:
            return (f"{arr[i].as_py()!r} is not an epoch time (the time column holds "
                    f"numbers in {opts.time_unit}; ISO-8601 text must be "
                    "the whole column)")
        num, errs = convert_checked(arr, cast_to(target), col, not_epoch)
        if errs and pa.types.is_integer(target) and col not in overrides:
            wide, wide_errs = convert_checked(arr, cast_to(pa.float64()), col, not_epoch)
            if len(wide_errs) < len(errs):
                d.types[col] = pa.float64()
                num, errs = wide, wide_errs
    if pa.types.is_integer(num.type):
        def scale(a: pa.Array) -> pa.Array:
            return pc.multiply_checked(a, pa.scalar(unit_us, pa.int64()))
    else:
        def scale(a: pa.Array) -> pa.Array:
            return pc.cast(pc.round(pc.multiply(a, float(unit_us))), pa.int64())

    def why(i: int) -> str:
        return f"{num[i].as_py()!r} is not a valid epoch time in {opts.time_unit}"

    ts, errs2 = convert_checked(num, scale, col, why)
    return ts, errs + errs2


__all__ = ["Decisions", "TIME_CANDIDATES", "UNIT_US", "decide", "default_time_column",
           "normalise_type", "time_micros"]
