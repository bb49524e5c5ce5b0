"""Column conversion for the readers: raw input columns -> typed attribute columns and ``__ts``.

Every conversion is a vectorised Arrow cast. Only when a cast fails does the slow path run: it
bisects the failing array (casting halves, then single values) to find exactly which rows are
bad, so a clean batch never creates a Python object per row and a dirty batch costs
O(bad rows x log n) casts.

Raw text columns (CSV, or values a JSON/dict fallback had to stringify) are typed by inference on
the first batch: a column is ``int64`` / ``float64`` when most of its values are numbers, ``bool``
when all are true/false, ``string`` otherwise. Values that do not fit the inferred type are bad
rows ("'abc' is not a number"), never silently nulled. ``--column-type`` overrides inference.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InputError
from ..frozen import dataclass

_CAST_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError)

INT_RE = r"^[+-]?[0-9]+$"
FLOAT_RE = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$|^[+-]?(inf|Inf|INF|nan|NaN|NAN|infinity|Infinity)$"
BOOL_RE = r"^(true|false|True|False|TRUE|FALSE)$"
_BOOL = re.compile(r"(true|false|True|False|TRUE|FALSE)\Z")
INFER_ROWS = 20_000
ZONE_RE = r"[T ][0-9:.,]+\s*([zZ]|[+-][0-9]{2}(:?[0-9]{2})?)$"
"""A zone after a time of day (a date alone, `2020-01-01`, has none: its `-01` is the day)."""

TYPE_NAMES: dict[str, pa.DataType] = {
    "int": pa.int64(), "int64": pa.int64(), "integer": pa.int64(),
    "float": pa.float64(), "float64": pa.float64(), "double": pa.float64(),
    "str": pa.string(), "string": pa.string(), "text": pa.string(),
    "bool": pa.bool_(), "boolean": pa.bool_(),
    "timestamp": pa.timestamp("us", "UTC"), "datetime": pa.timestamp("us", "UTC"),
}
"""Names accepted by ``column_types`` / ``--column-type COL=TYPE``."""


def parse_type_name(name: str, column: str) -> pa.DataType:
    """Resolve a user type name (``int``, ``float``, ``string``, ``bool``, ``timestamp``)."""
    try:
        return TYPE_NAMES[name.strip().lower()]
    except KeyError:
        raise InputError(f"unknown type {name!r} for column {column!r}; use one of: "
                         "int, float, string, bool, timestamp") from None


@dataclass(frozen=True, slots=True)
class CellError:
    """A bad value found while converting one column: position in the batch and why."""

    position: int
    column: str
    reason: str


def describe_type(t: pa.DataType) -> str:
    """A short human name for an Arrow type, as used in messages."""
    if pa.types.is_integer(t):
        return "an integer"
    if pa.types.is_floating(t):
        return "a number"
    if pa.types.is_boolean(t):
        return "true or false"
    if pa.types.is_timestamp(t):
        return "a timestamp"
    return str(t)


def _count(mask: Any) -> int:
    value = pc.sum(mask).as_py()
    return int(value) if value is not None else 0


def infer_text_type(arr: pa.Array) -> pa.DataType:
    """Infer the type of a raw text column from its values (see the module docstring).

    Looks at the first ``INFER_ROWS`` values; every value is still checked when cast.
    """
    arr = arr.slice(0, INFER_ROWS)
    non_null = len(arr) - arr.null_count
    if non_null == 0:
        return pa.string()
    # one regex pass per question, and only the questions the answer needs: the integers
    # are counted only in a column of numbers, and a column is all true/false only if its
    # first value is (the same regex, on one value, in Python)
    n_float = _count(pc.match_substring_regex(arr, FLOAT_RE))
    if n_float * 2 > non_null:
        n_int = _count(pc.match_substring_regex(arr, INT_RE))
        return pa.int64() if n_int == n_float else pa.float64()
    first = arr.drop_null()[0].as_py() if arr.null_count else arr[0].as_py()
    if (isinstance(first, str) and _BOOL.match(first)
            and _count(pc.match_substring_regex(arr, BOOL_RE)) == non_null):
        return pa.bool_()
    return pa.string()


def _value_text(arr: pa.Array, i: int) -> str:
    v = arr[i].as_py()
    return repr(v) if isinstance(v, str) else str(v)


def find_bad(arr: pa.Array, convert: Callable[[pa.Array], pa.Array]) -> list[int]:
    """Positions where ``convert`` fails, found by bisection (the slow path, errors only)."""
    bad: list[int] = []

    def walk(offset: int, length: int) -> None:
        piece = arr.slice(offset, length)
        try:
            convert(piece)
            return
        except _CAST_ERRORS:
            pass
        if length == 1:
            bad.append(offset)
            return
        half = length // 2
        walk(offset, half)
        walk(offset + half, length - half)

    if len(arr):
        walk(0, len(arr))
    return bad


def convert_checked(arr: pa.Array, convert: Callable[[pa.Array], pa.Array], column: str,
                    reason: Callable[[int], str]) -> tuple[pa.Array, list[CellError]]:
    """Apply ``convert``; on failure locate the bad positions, null them and convert the rest."""
    try:
        return convert(arr), []
    except _CAST_ERRORS:
        pass
    bad = find_bad(arr, convert)
    mask = np.zeros(len(arr), dtype=bool)
    mask[bad] = True
    cleaned = pc.if_else(pa.array(mask), pa.scalar(None, arr.type), arr)
    return convert(cleaned), [CellError(i, column, reason(i)) for i in bad]


def cast_to(target: pa.DataType, *, trim: bool = True) -> Callable[[pa.Array], pa.Array]:
    """A checked cast to ``target`` (whitespace-trimmed text; true/false for bool)."""

    def run(a: pa.Array) -> pa.Array:
        if trim and pa.types.is_string(a.type) and not pa.types.is_string(target):
            a = pc.utf8_trim_whitespace(a)
        if pa.types.is_boolean(target) and pa.types.is_string(a.type):
            low = pc.utf8_lower(a)
            ok = pc.or_kleene(pc.is_null(low), pc.is_in(low, pa.array(["true", "false"])))
            if not pc.all(ok).as_py():
                raise pa.ArrowInvalid("not a boolean")
            return pc.equal(low, "true")
        return pc.cast(a, target, safe=True)
    return run


def convert_column(arr: pa.Array, target: pa.DataType, column: str,
                   inferred: bool) -> tuple[pa.Array, list[CellError]]:
    """Cast one attribute column to ``target``; bad values become :class:`CellError` s."""
    if arr.type == target:
        return arr, []
    if pa.types.is_timestamp(target) and pa.types.is_string(arr.type):
        return parse_timestamps(arr, column, with_zone=target.tz is not None)

    def reason(i: int) -> str:
        why = f"{_value_text(arr, i)} is not {describe_type(target)}"
        if inferred:
            why += (f" (the column was read as {target} from its first rows; pass "
                    f"--column-type {column}=string to keep it as text, or --null-values to read "
                        "such values as NULL)")
        return why

    if pa.types.is_timestamp(target) and pa.types.is_timestamp(arr.type):
        return pc.cast(arr, target, safe=False), []
    return convert_checked(arr, cast_to(target), column, reason)


def has_zone(arr: pa.Array) -> pa.Array:
    """Boolean mask: the timestamp string ends with a zone (``Z``, ``+01:00``, ``-0500``)."""
    return pc.match_substring_regex(pc.utf8_trim_whitespace(arr), ZONE_RE)


def parse_timestamps(arr: pa.Array, column: str, *,
                     with_zone: bool) -> tuple[pa.Array, list[CellError]]:
    """Parse ISO-8601 strings to ``timestamp[us, UTC]`` (zoned) or ``timestamp[us]`` (naive)."""
    target = pa.timestamp("us", "UTC") if with_zone else pa.timestamp("us")

    def convert(a: pa.Array) -> pa.Array:
        # Arrow's ISO-8601 parser: a zoned target rejects naive values and vice versa
        return pc.cast(pc.utf8_trim_whitespace(a), target)

    def reason(i: int) -> str:
        text = _value_text(arr, i)
        zoned = bool(has_zone(arr.slice(i, 1))[0].as_py())
        if with_zone and not zoned:
            return (f"timestamp {text} has no time zone, but the column's first timestamps "
                    "do; write it with Z or an offset like +01:00")
        if not with_zone and zoned:
            return (f"timestamp {text} has a time zone, but the column's first timestamps "
                    "do not; use one form for the whole column")
        return (f"cannot parse {text} as an ISO-8601 timestamp "
                "(like 2013-01-01T10:00:00Z or 2013-01-01 10:00:00)")

    return convert_checked(arr, convert, column, reason)


def parse_formatted(arr: pa.Array, column: str,
                    fmt: str) -> tuple[pa.Array, list[CellError]]:
    """Parse strings with a strptime ``fmt`` (``--time-format``); ``%z`` makes them UTC."""
    zoned = "%z" in fmt

    def convert(a: pa.Array) -> pa.Array:
        ts = pc.strptime(pc.utf8_trim_whitespace(a), format=fmt, unit="us")
        return ts if zoned else pc.cast(ts, pa.timestamp("us"))

    def reason(i: int) -> str:
        return f"timestamp {_value_text(arr, i)} does not match --time-format {fmt!r}"

    return convert_checked(arr, convert, column, reason)


__all__ = [
    "CellError", "TYPE_NAMES", "cast_to", "convert_checked", "convert_column", "describe_type",
    "find_bad", "has_zone", "infer_text_type", "parse_formatted", "parse_timestamps",
    "parse_type_name",
]
