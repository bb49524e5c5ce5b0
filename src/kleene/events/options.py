"""How to turn input rows into events: :class:`ReadOptions`, shared by every source."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import Literal

from ..frozen import dataclass
from .badrows import BadRowPolicy

TimeUnit = Literal["s", "ms", "us"]


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """How to turn input rows into events.

    ``time_col`` (default: the first of ts, timestamp, time, event_time present), ``type_col``
    (default ``type``) or ``event_type`` (every row is this type), ``id_col`` (default: the row
    index), ``time_unit`` for epoch numbers, ``time_format`` (a strptime format such as
    ``%m/%d/%Y %H:%M`` for text timestamps that are not ISO-8601), ``column_types`` overrides (``{"x": "float"}``),
    ``on_bad_row``, ``format`` (csv, jsonl, parquet; default from the file name),
    ``delimiter`` for CSV, ``batch_size`` rows per chunk, ``block_bytes`` of text per chunk,
    ``null_values``: text values read as NULL in every column (``("nil", "NA", "")``, or one
    comma-separated string ``"nil,NA,"`` as on the command line; see :func:`null_values`).
    """

    time_col: str | None = None
    type_col: str | None = None
    event_type: str | None = None
    id_col: str | None = None
    time_unit: TimeUnit = "s"
    time_format: str | None = None
    column_types: Mapping[str, str] = field(default_factory=dict)
    on_bad_row: BadRowPolicy | str = "fail"
    format: str | None = None
    delimiter: str | None = None
    batch_size: int = 65_536
    block_bytes: int = 1 << 22
    null_values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "null_values", null_values(self.null_values))


CSV_NULLS = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
             "1.#QNAN", "N/A", "NA", "NULL", "NaN", "n/a", "nan", "null")
"""The CSV values that are NULL without ``null_values`` (Arrow's CSV defaults; the empty
value among them)."""


def null_values(values: str | Iterable[str] | None) -> tuple[str, ...]:
    """``null_values`` as a tuple: a string is a comma-separated list (``"nil,NA,"`` is
    ``nil``, ``NA`` and the empty value), anything else an iterable of strings.

    Example:
        >>> null_values("nil,NA,"), null_values(["-", "?"]), null_values(None)
        (('nil', 'NA', ''), ('-', '?'), ())
    """
    if values is None:
        return ()
    if isinstance(values, str):
        return tuple(dict.fromkeys(values.split(",")))
    out = tuple(dict.fromkeys(values))
    if not all(isinstance(v, str) for v in out):
        raise TypeError(f"null_values must be strings, not {values!r}")
    return out


__all__ = ["CSV_NULLS", "ReadOptions", "TimeUnit", "null_values"]
