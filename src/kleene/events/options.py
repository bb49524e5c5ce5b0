"""How to turn input rows into events: :class:`ReadOptions`, shared by every source."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

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
    ``delimiter`` for CSV, ``batch_size`` rows per chunk, ``block_bytes`` of text per chunk.
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


__all__ = ["ReadOptions", "TimeUnit"]
