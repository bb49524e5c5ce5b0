"""Readers: files and in-memory tables -> :class:`EventBatch` es, plus a :class:`ReadReport`.

Sources: CSV (plain or compressed, e.g. ``.csv.gz``), JSON Lines, Parquet, a pandas DataFrame,
a pyarrow ``Table`` / ``RecordBatch`` / ``RecordBatchReader`` / iterable of record batches, and
a Python iterable of dicts.

Two forms:

* :func:`iter_events` streams: it reads the input in chunks (``batch_size`` rows, or about
  ``block_bytes`` of text), converts each chunk with vectorised Arrow casts, and yields one
  :class:`EventBatch` per chunk. Memory stays bounded by the chunk size. Chunks come in input
  order and each chunk is sorted stably by time; an event earlier than one already seen is
  counted in ``report.out_of_order`` and left where it is (ordering an unbounded stream is the
  runtime's job: watermarks and lateness).
* :func:`read_events` reads a bounded input completely and returns ONE batch ordered by
  (timestamp, input row) with a stable sort over all events: this is the full sort a bounded
  input needs, so its memory is the size of the events.

A row is *out of order* when some earlier row (in input order) has a later timestamp: it is
the row a streaming engine with no allowed lateness would call late.

Columns are typed as in :mod:`kleene.events.convert` (CSV and JSON Lines text by inference
on the first block read, about ``block_bytes`` whatever ``batch_size`` is, so the types and
the bad rows do not depend on the batch size; records on the first chunk; ``column_types``
overrides). A column of integers that later holds fractions is widened
to float64 rather than rejected.

Every event gets a stable id: its 0-based row index in the input (bad rows keep their index,
so ids do not shift when rows are skipped; in CSV an empty line is no row but takes an index
too, so the id is the index of the event's line after the header), or the value of ``id_col``.

``null_values`` (``--null-values nil,NA,``) lists text values that are read as NULL in every
column, before types are inferred, and are counted (``report.nulled``). A CSV value that is
empty or one of :data:`~kleene.events.options.CSV_NULLS` is NULL in any case.

Bad rows (a ragged CSV row, an unparsable timestamp, ``'abc'`` in a numeric column, a missing
time or type, a line that is not JSON) follow ``on_bad_row``: ``fail`` (the default) raises an
:class:`~kleene.errors.InputError` naming file, row, column and the problem; ``skip`` drops the
row and counts it; ``dead-letter=PATH`` drops it, counts it and writes it with its reason to PATH
as JSON Lines. Nothing is dropped silently. Rows in messages are 1-based data rows (the header
is not a row; row N of a CSV file with a header is on line N + 1).

Example:
    >>> batch, report = read_events([{"ts": 2, "type": "B", "x": 1},
    ...                              {"ts": 1, "type": "A", "x": 2}])
    >>> batch.types.tolist(), batch.ids.to_pylist(), report.out_of_order
    (['A', 'B'], [1, 0], 1)
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InputError
from ..frozen import dataclass
from .badrows import BadRow, BadRowPolicy, BadRows
from .convert import CellError, convert_column, infer_text_type, parse_type_name
from .decisions import UNIT_US, Decisions, decide, normalise_type, time_micros
from .model import ID, TS, TYPE, EventBatch, TimeInfo, int64_array
from .options import ReadOptions, TimeUnit
from .ordering import Disorder, check_unique_ids, concat, sort_by_time
from .sources import (
    FILE_SOURCES,
    STDIN,
    Source,
    TypedSource,
    detect_format,
    list_files,
    open_source,
)
from .sources.base import Raw
from .sources.csvfile import count_csv_rows

FORMATS = tuple(FILE_SOURCES)
LOOK_AHEAD_BYTES = 64 << 20
"""How much text the reader reads past the deciding chunk for a column with no value in it
(:meth:`EventStream._look_ahead`)."""
"""The file formats at import time (the registry is :data:`kleene.events.sources.FILE_SOURCES`)."""


@dataclass(frozen=True, slots=True)
class ReadReport:
    """What reading did: rows seen, events kept, rows skipped / dead-lettered, disorder."""

    source: str
    format: str
    rows_read: int = 0
    events: int = 0
    skipped: int = 0
    dead_lettered: int = 0
    out_of_order: int = 0
    time: TimeInfo = TimeInfo()
    bad_examples: tuple[str, ...] = ()
    """The messages of the first few bad rows (for the run summary)."""
    blank_lines: int = 0
    """Empty lines of a CSV input: no rows and no events, but each takes an id."""
    nulled: int = 0
    """Values read as NULL because they are one of ``null_values``."""

    @property
    def bad_rows(self) -> int:
        """Rows that did not become events."""
        return self.skipped + self.dead_lettered


class EventStream(Iterator[EventBatch]):
    """Iterates :class:`EventBatch` chunks of an input; ``report`` is kept up to date.

    Any :class:`~kleene.events.sources.Source` gives the raw chunks; this class applies what
    every source shares: type decisions, the bad-row policy and dead letters, ordering.

    Example:
        >>> s = iter_events([{"ts": i, "type": "A"} for i in range(5)], batch_size=2)
        >>> [len(b) for b in s], s.report.events
        ([2, 2, 1], 5)
    """

    def __init__(self, source: Any, options: ReadOptions, *, sort_chunks: bool = True,
                 decisions: Decisions | None = None) -> None:
        self.options = options
        self.sort_chunks = sort_chunks
        self.policy = BadRowPolicy.parse(options.on_bad_row)
        if options.time_unit not in UNIT_US:
            raise InputError(f"unknown time unit {options.time_unit!r}; use s, ms or us")
        self.overrides = {c: parse_type_name(t, c) for c, t in options.column_types.items()}
        self._files: list[IO[bytes]] = []
        self._size = (os.path.getsize(source) if isinstance(source, (str, os.PathLike))
                      and os.path.isfile(source) else None)
        self.source: Source = open_source(source, options, self._files)
        self.name, self.format = self.source.name, self.source.format
        self._chunks = self.source.chunks()
        self._decisions: Decisions | None = (
            None if decisions is None else replace(decisions, types=dict(decisions.types),
                                                   inferred=set(decisions.inferred)))
        self._rows = 0
        self._blank = 0
        self._nulled = 0
        self._nulls = (pa.array(options.null_values, pa.string()) if options.null_values
                       else None)
        self._events = 0
        self._disorder = Disorder()
        self._done = False
        self._bad = BadRows(self.policy)
        self._one_type: pa.Array | None = None
        self._use_types()

    # -- public ----------------------------------------------------------------------------
    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def report(self) -> ReadReport:
        """What has been read so far (final once the stream is exhausted)."""
        return ReadReport(
            source=self.name, format=self.format, rows_read=self._rows, events=self._events,
            skipped=self._bad.skipped, dead_lettered=self._bad.dead_lettered,
            out_of_order=self._disorder.out_of_order, time=self.time,
            bad_examples=tuple(self._bad.examples), blank_lines=self._blank,
            nulled=self._nulled)

    @property
    def fraction_read(self) -> float | None:
        """How far into the input file reading is (0..1, by file bytes; ``None`` when not
        reading a CSV or JSON Lines file). Arrow reads ahead, so it can lead the events."""
        if self._size is None or not self._files:
            return None
        if self._done:
            return 1.0
        try:
            pos = self._files[-1].tell()
        except (ValueError, OSError):
            return 1.0
        return min(1.0, pos / self._size) if self._size else 1.0

    @property
    def decisions(self) -> Decisions | None:
        """The column types and time reading fixed by the first chunk (``None`` before it)."""
        return self._decisions

    @property
    def time(self) -> TimeInfo:
        """How timestamps print back (known after the first chunk)."""
        return self._decisions.time if self._decisions else TimeInfo()

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> EventBatch:
        while not self._done:
            try:
                raw = next(self._chunks)
            except StopIteration:
                self.close()
                break
            except BaseException:
                self.close()
                raise
            try:
                batch = self._convert(raw)
            except BaseException:
                self.close()
                raise
            if batch is not None:
                return batch
        raise StopIteration

    def close(self) -> None:
        """Release the input and the dead-letter file."""
        self._done = True
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()
        self._bad.close()

    # -- every chunk -----------------------------------------------------------------------
    def _convert(self, raw: Raw) -> EventBatch | None:
        self._rows += raw.rows
        self._blank += raw.blank
        if self._nulls is not None:
            raw.table = self._null_values(raw.table)
        source = raw.source or self.name
        if self._decisions is None:
            if raw.table.num_rows == 0 and not raw.bad and raw.sample is None:
                return None
            if raw.table.num_columns == 0:
                self._bad.apply(raw, [], source)
                return None
            # a text format's whole first block decides, not its first batch_size rows (or a
            # sample of its first lines that decides alike: a chunk of no rows, CSV)
            sample = raw.table if raw.sample is None else (
                raw.sample if self._nulls is None else self._null_values(raw.sample, count=False))
            self._decisions = decide(sample, raw.text_cols, self.options, self.overrides,
                                     source)
            empty = [c for c in sample.column_names if c in self._decisions.inferred
                     and c != self._decisions.time_col
                     and sample.column(c).null_count == sample.num_rows]
            if empty and sample.num_rows:
                self._look_ahead(empty)
            self._use_types()
        widths = dict(self._decisions.types)
        result, errors = self._build(raw, source)
        if (errors or raw.bad) and raw.text is not None:
            # parsed straight to types: find and report the bad rows from the text, as ever
            raw.table, raw.text = raw.text(), None
            result, errors = self._build(raw, source)
        if self._decisions.types != widths:
            self._use_types()  # a column widened (ints, then fractions): parse it as floats
        if errors or raw.bad:
            result = self._bad.apply(raw, errors, source, result)
        if result is None or result.num_rows == 0:
            return None
        result = self._disorder.order(result, sort=self.sort_chunks)
        self._events += result.num_rows
        return EventBatch(result, self.time)

    def _look_ahead(self, empty: list[str]) -> None:
        """Columns inferred from text with no value in the chunk that decides the types (a
        sensor that reports only later) would be read as text, and a query comparing them
        with numbers refused: read on, up to :data:`LOOK_AHEAD_BYTES` of text, to the first
        chunk in which each has values, and infer its type from those. The chunks read are
        put back, in order, and converted as usual (so nothing is read twice, and every
        value is still checked against the type). A column still empty after that stays
        text, as before."""
        import itertools

        d = self._decisions
        assert d is not None
        ahead: list[Raw] = []
        seen = 0
        todo = set(empty)
        while todo and seen < LOOK_AHEAD_BYTES:
            nxt = next(self._chunks, None)
            if nxt is None:
                break
            ahead.append(nxt)
            table = nxt.table if self._nulls is None else self._null_values(nxt.table,
                                                                            count=False)
            seen += table.nbytes
            for c in sorted(todo):
                if c in table.column_names and c in nxt.text_cols:
                    col = table.column(c)
                    if col.null_count < len(col):
                        d.types[c] = infer_text_type(col.drop_null().combine_chunks())
                        todo.discard(c)
        if ahead:
            self._chunks = itertools.chain(ahead, self._chunks)

    def _use_types(self) -> None:
        """Tell a source that can parse text straight to types (CSV) the decided ones."""
        d = self._decisions
        if (d is None or self._nulls is not None
                or not isinstance(self.source, TypedSource)):
            return  # (--null-values works on text: it must see every value as text)
        types = {c: t for c, t in d.types.items() if c != d.time_col}
        if d.time_mode in ("iso-naive", "iso-zoned"):
            types[d.time_col] = pa.timestamp("us", d.time.tz)
        elif d.time_mode == "numeric":
            types[d.time_col] = d.types[d.time_col]
        self.source.use_types(types)

    def _build(self, raw: Raw, source: str) -> tuple[pa.Table | None, list[CellError]]:
        """The events of ``raw`` (its bad rows included) and the cells that are not values."""
        d = self._decisions
        assert d is not None
        table = raw.table
        n = table.num_rows
        errors: list[CellError] = []
        out: dict[str, pa.Array] = {}
        if d.time_col not in table.column_names:
            raise InputError(f"time column {d.time_col!r} is missing from a later part of the "
                             "input", path=source,
                             row=int(raw.ids[0]) - raw.offset + 1 if n else None)
        ts, terrs = time_micros(_array(table.column(d.time_col)), d, self.options,
                                self.overrides)
        for c in table.column_names:
            if c == d.time_col and d.time_mode != "numeric":
                # the attribute is the parsed time itself (errors are reported once, below)
                out[c] = ts.view(pa.timestamp("us", d.time.tz))  # (the cast, without a copy)
                continue
            arr = _array(table.column(c))
            target = d.types.get(c)
            if target is None:  # a column first seen in a later chunk (JSON / dicts)
                target = self.overrides.get(c) or (
                    infer_text_type(arr) if c in raw.text_cols else normalise_type(arr.type))
                d.types[c] = target
            conv, errs = convert_column(arr, target, c, c in d.inferred)
            if errs and pa.types.is_integer(target) and c not in self.overrides:
                # integers in the first chunk, fractions later: widen the column to float64
                # (earlier chunks are promoted when concatenated) rather than reject rows
                wide, wide_errs = convert_column(arr, pa.float64(), c, c in d.inferred)
                if len(wide_errs) < len(errs):
                    d.types[c] = pa.float64()
                    conv, errs = wide, wide_errs
            out[c] = conv
            errors.extend(errs)
        errors = terrs + [e for e in errors if e.column != d.time_col]
        unparsable = {e.position for e in terrs}
        errors.extend(CellError(int(i), d.time_col, "missing timestamp")
                      for i in _nulls(ts) if int(i) not in unparsable)
        opts = self.options
        if opts.event_type is not None:
            if self._one_type is None or len(self._one_type) < n:
                self._one_type = pa.repeat(pa.scalar(opts.event_type, pa.string()), n)
            types = self._one_type.slice(0, n)  # (one array for every chunk: no new memory)
        else:
            tcol = opts.type_col or "type"
            types = table.column(tcol).combine_chunks().cast(pa.string())
            empty = pc.fill_null(pc.equal(types, ""), True)
            if pc.any(empty).as_py():
                errors.extend(CellError(int(i), tcol, "missing event type")
                              for i in np.flatnonzero(empty.to_numpy(zero_copy_only=False)))
        if opts.id_col is not None:
            ids = out[opts.id_col]
            if not (pa.types.is_integer(ids.type) or pa.types.is_string(ids.type)):
                ids = ids.cast(pa.string())
            errors.extend(CellError(int(i), opts.id_col, "missing id") for i in _nulls(ids))
        else:
            ids = int64_array(raw.ids)
        cols = {ID: ids, TS: ts, TYPE: types, **out}
        return pa.table(cols), errors

    def _null_values(self, table: pa.Table, *, count: bool = True) -> pa.Table:
        """``table`` with the text values listed in ``null_values`` made NULL (before types
        are inferred, so ``'nil'`` in a number column neither decides its type nor is bad);
        ``count=False`` for a type-deciding sample (its rows are counted as they are read)."""
        assert self._nulls is not None
        for i, field in enumerate(table.schema):
            if not (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)):
                continue
            col = table.column(i)
            hit = pc.fill_null(pc.is_in(col, value_set=self._nulls.cast(field.type)), False)
            n = pc.sum(hit).as_py() or 0
            if n:
                self._nulled += int(n) if count else 0
                table = table.set_column(i, field, pc.if_else(hit, pa.scalar(None, field.type),
                                                              col))
        return table


def _array(col: pa.ChunkedArray) -> pa.Array:
    """The column as one array: its one chunk as it is (no copy), else the chunks joined."""
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()


def _nulls(arr: pa.Array) -> Any:
    """The positions of the NULLs of ``arr`` (none without a look when it counts none)."""
    if not arr.null_count:
        return ()
    return np.flatnonzero(pc.is_null(arr).to_numpy(zero_copy_only=False))


def _options(options: ReadOptions | None, overrides: Mapping[str, Any]) -> ReadOptions:
    base = options or ReadOptions()
    unknown = set(overrides) - set(ReadOptions.__dataclass_fields__)
    if unknown:
        raise TypeError(f"unknown read option(s): {', '.join(sorted(unknown))}")
    return replace(base, **overrides)


def iter_events(source: Any, options: ReadOptions | None = None, *, sort_chunks: bool = True,
                **kw: Any) -> EventStream:
    """Stream ``source`` as :class:`EventBatch` chunks (bounded memory; see module docstring).

    Keyword arguments are :class:`ReadOptions` fields. ``sort_chunks=False`` leaves each chunk
    in input order (for :func:`collect`, which sorts everything once).
    """
    return EventStream(source, _options(options, kw), sort_chunks=sort_chunks)


def read_events(source: Any, options: ReadOptions | None = None,
                **kw: Any) -> tuple[EventBatch, ReadReport]:
    """Read a bounded input into one batch ordered by (timestamp, input row), and a report.

    Raises :class:`~kleene.errors.InputError` for bad input (see ``on_bad_row``) and for an
    input with no rows at all.
    """
    stream = iter_events(source, options, sort_chunks=False, **kw)
    return collect(stream, list(stream))


def collect(stream: EventStream, batches: list[EventBatch]) -> tuple[EventBatch, ReadReport]:
    """Merge the chunks of an exhausted stream into one batch with a full stable time sort.

    Chunks are concatenated in input order, so a stable sort on ``__ts`` orders by
    (timestamp, input row).
    """
    report = stream.report
    if report.rows_read == 0:
        raise InputError("no events: the input has no data rows", path=report.source)
    if not batches:
        empty = pa.table({ID: pa.array([], pa.int64()), TS: pa.array([], pa.int64()),
                          TYPE: pa.array([], pa.string())})
        return EventBatch(empty, stream.time), report
    table = batches[0].table if len(batches) == 1 else concat([b.table for b in batches])
    if stream.options.id_col is not None:
        check_unique_ids(table, stream.options.id_col, report.source)
    # no row behind an earlier timestamp: the chunks, in input order, are in time order
    ordered = table if report.out_of_order == 0 else sort_by_time(table)
    return EventBatch(ordered, stream.time), report


def describe_source(source: Any) -> str:
    """A short name for a source, for messages."""
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return f"<{type(source).__name__}>"


__all__ = [
    "BadRow", "BadRowPolicy", "Decisions", "EventStream", "STDIN", "collect", "count_csv_rows",
    "list_files", "FORMATS", "ReadOptions", "ReadReport", "TimeUnit", "describe_source",
    "detect_format", "iter_events", "normalise_type", "read_events",
]
