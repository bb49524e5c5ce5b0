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

Columns are typed as in :mod:`kleene.events.convert` (CSV text by inference on the first
chunk; ``column_types`` overrides). A column of integers that later holds fractions is widened
to float64 rather than rejected.

Every event gets a stable id: its 0-based row index in the input (bad rows keep their index,
so ids do not shift when rows are skipped), or the value of ``id_col``.

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

import csv
import glob
import io
import itertools
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InputError
from .convert import (
    CellError,
    cast_to,
    convert_checked,
    convert_column,
    has_zone,
    infer_text_type,
    parse_formatted,
    parse_timestamps,
    parse_type_name,
)
from .model import ID, RESERVED, TS, TYPE, EventBatch, TimeInfo

TimeUnit = Literal["s", "ms", "us"]
FORMATS = ("csv", "jsonl", "parquet")
_TIME_CANDIDATES = ("ts", "timestamp", "time", "event_time")
_UNIT_US = {"s": 1_000_000, "ms": 1_000, "us": 1}


# --------------------------------------------------------------------------------------------
# Options and reports
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BadRowPolicy:
    """What to do with a bad row: ``fail``, ``skip`` or ``dead-letter`` to ``path``."""

    action: Literal["fail", "skip", "dead-letter"] = "fail"
    path: str | None = None

    @staticmethod
    def parse(text: str | BadRowPolicy) -> BadRowPolicy:
        """Parse ``fail``, ``skip`` or ``dead-letter=PATH``."""
        if isinstance(text, BadRowPolicy):
            return text
        t = text.strip()
        if t in ("fail", "skip"):
            return BadRowPolicy(t)  # type: ignore[arg-type]
        if t.startswith("dead-letter="):
            path = t.partition("=")[2].strip()
            if path:
                return BadRowPolicy("dead-letter", path)
        raise InputError(f"unknown bad-row policy {text!r}; use fail, skip or dead-letter=PATH")


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


@dataclass(frozen=True, slots=True)
class BadRow:
    """A row that did not become an event. ``row`` is its 0-based index in the input."""

    row: int
    reason: str
    column: str | None = None
    line: int | None = None
    record: Mapping[str, Any] | None = None
    text: str | None = None

    def error(self, source: str | None) -> InputError:
        """The user-facing error for this row (file, 1-based row, column, reason)."""
        reason = self.reason if self.line is None else f"{self.reason} (line {self.line})"
        return InputError(reason, path=source, row=self.row + 1, column=self.column)


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

    @property
    def bad_rows(self) -> int:
        """Rows that did not become events."""
        return self.skipped + self.dead_lettered


# --------------------------------------------------------------------------------------------
# Sources: each yields raw chunks (untyped or typed columns) in input order
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Raw:
    """A chunk before conversion. ``ids`` are input row indices of ``table``'s rows."""

    table: pa.Table
    ids: np.ndarray[Any, np.dtype[np.int64]]
    text_cols: frozenset[str]
    bad: list[BadRow]
    rows: int
    """Input rows this chunk covers (table rows + rows lost before conversion)."""
    offset: int = 0
    """Added to ids when several files are read as one input (ids continue across files);
    rows in messages stay per file."""
    source: str | None = None
    """The file this chunk came from, when the input is several files."""


def detect_format(path: str) -> str:
    """The input format from a file name (``.csv``, ``.csv.gz``, ``.tsv``, ``.jsonl``, ...)."""
    name = os.path.basename(path).lower()
    for comp in (".gz", ".bz2", ".zst", ".lz4"):
        if name.endswith(comp):
            name = name[: -len(comp)]
            break
    ext = os.path.splitext(name)[1]
    if ext in (".csv", ".tsv", ".txt"):
        return "csv"
    if ext in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if ext in (".parquet", ".pq"):
        return "parquet"
    shown = ext or "(no extension)"
    raise InputError(f"unknown file format {shown}; kleene reads .csv, .tsv, .jsonl, .ndjson, "
                     ".json, .parquet (optionally .gz); pass --input-format csv|jsonl|parquet",
                     path=path)


_CODECS = {".gz": "gzip", ".bz2": "bz2", ".zst": "zstd", ".lz4": "lz4"}


def _open_stream(path: str, tracker: list[IO[bytes]] | None = None) -> Any:
    """An Arrow input stream over the file, decompressing by extension. The raw file is
    appended to ``tracker`` so progress can be read from its position (compressed bytes)."""
    if not os.path.exists(path):
        raise InputError("no such file", path=path)
    if os.path.isdir(path):
        raise InputError("is a directory, not a file", path=path)
    try:
        raw = open(path, "rb")  # noqa: SIM115 (closed with the Arrow stream)
    except OSError as e:
        raise InputError(f"cannot open: {e.strerror}", path=path) from None
    try:
        stream = pa.PythonFile(raw, mode="r")
        codec = _CODECS.get(os.path.splitext(path)[1].lower())
        if codec is not None:
            stream = pa.CompressedInputStream(stream, codec)
    except (pa.ArrowException, OSError) as e:
        raw.close()
        raise InputError(f"cannot open: {e}", path=path) from None
    if tracker is not None:
        tracker.append(raw)
    return stream


STDIN = "-"
"""The path that means standard input (``--input -``)."""


class _Replay(io.RawIOBase):
    """Standard input with its first bytes kept: the CSV header is peeked, then read again."""

    def __init__(self, raw: IO[bytes]) -> None:
        super().__init__()
        self.raw = raw
        self.head = b""
        self.pos = 0

    def peek_head(self, n: int) -> bytes:
        if not self.head:
            self.head = self.raw.read(n) or b""
        return self.head

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self.pos < len(self.head):
            n = min(len(b), len(self.head) - self.pos)
            b[:n] = self.head[self.pos:self.pos + n]
            self.pos += n
            return n
        data = self.raw.read(len(b)) or b""
        b[:len(data)] = data
        return len(data)


def _peek(path: str) -> bytes:
    with _open_stream(path) as f:
        try:
            head: bytes = f.read(1 << 16)
        except (pa.ArrowException, OSError, EOFError) as e:
            raise InputError(f"cannot read: {e}", path=path) from None
    return head


def _csv_header(head: bytes, path: str, delimiter: str) -> list[str]:
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    first = text.split("\n", 1)[0].rstrip("\r")
    if not text.strip():
        raise InputError("the file is empty (expected a header line and rows)", path=path)
    names = next(csv.reader([first], delimiter=delimiter))
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise InputError(f"duplicate column name {n!r} in the header", path=path, row=None)
        seen.add(n)
    return names


def count_csv_rows(path: str, options: ReadOptions) -> int:
    """The rows of a CSV file as the reader numbers them: every row after the header, ragged
    ones included, empty lines not (the ids of the next file of an input start there).
    Parses like :func:`_csv_chunks` but converts only the first column."""
    import pyarrow.csv as pcsv

    delimiter = options.delimiter or ("\t" if ".tsv" in path.lower() else ",")
    names = _csv_header(_peek(path), path, delimiter)
    ragged = 0

    def on_invalid(row: Any) -> str:
        nonlocal ragged
        ragged += 1
        return "skip"

    stream = _open_stream(path)
    try:
        reader = pcsv.open_csv(
            stream, read_options=pcsv.ReadOptions(block_size=options.block_bytes),
            parse_options=pcsv.ParseOptions(delimiter=delimiter, invalid_row_handler=on_invalid),
            convert_options=pcsv.ConvertOptions(include_columns=names[:1],
                                                column_types={names[0]: pa.string()}))
        return int(sum(b.num_rows for b in reader)) + ragged
    except (pa.ArrowException, OSError) as e:
        if "Empty CSV" in str(e):
            raise InputError("the file is empty (expected a header line and rows)",
                             path=path) from None
        raise InputError(f"cannot parse CSV: {e}", path=path) from None
    finally:
        stream.close()


def _csv_chunks(path: str, opts: ReadOptions, tracker: list[IO[bytes]]) -> Iterator[_Raw]:
    """CSV as text columns. Parsing is multi-threaded; Arrow reports the line of a ragged row
    only when single-threaded, so at the first ragged row the rest of the file is re-read
    single-threaded from the first row not yet yielded (the slow path, only with bad rows)."""
    import pyarrow.csv as pcsv

    delimiter = opts.delimiter or ("\t" if ".tsv" in path.lower() else ",")
    if path == STDIN:  # one pass only: no multi-threaded first try
        replay = _Replay(sys.stdin.buffer)
        names = _csv_header(replay.peek_head(1 << 16), path, delimiter)

        def open_input() -> Any:
            return pa.PythonFile(replay, mode="r")
    else:
        names = _csv_header(_peek(path), path, delimiter)

        def open_input() -> Any:
            return _open_stream(path, tracker)
    ragged: list[tuple[int | None, str, int, int]] = []

    def on_invalid(row: Any) -> str:
        ragged.append((row.number, row.text, row.expected_columns, row.actual_columns))
        return "skip"

    parse_opts = pcsv.ParseOptions(delimiter=delimiter, invalid_row_handler=on_invalid)
    convert_opts = pcsv.ConvertOptions(column_types={n: pa.string() for n in names},
                                       strings_can_be_null=True)
    text_cols = frozenset(names)
    start = 0
    threaded = path != STDIN
    while True:
        ragged.clear()
        reader_opts = pcsv.ReadOptions(use_threads=threaded, block_size=opts.block_bytes,
                                       skip_rows_after_names=start)
        stream = open_input()
        try:
            try:
                reader = pcsv.open_csv(stream, read_options=reader_opts,
                                       parse_options=parse_opts, convert_options=convert_opts)
            except (pa.ArrowException, OSError) as e:
                if "Empty CSV" in str(e):
                    raise InputError("the file is empty (expected a header line and rows)",
                                     path=path) from None
                raise InputError(f"cannot parse CSV: {e}", path=path) from None
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    batch = None
                except (pa.ArrowException, OSError) as e:
                    raise InputError(f"cannot read CSV near row {start + 1}: {e}",
                                     path=path) from None
                if ragged and threaded:
                    break  # re-read from `start` single-threaded to learn the lines
                if batch is None and not ragged:
                    return
                n = 0 if batch is None else batch.num_rows
                # Arrow may parse ahead: a ragged row belongs to this batch only if its row
                # index falls inside the rows this batch spans (its good rows + ragged ones)
                ragged.sort(key=lambda r: r[0] or 0)
                k = 0
                while k < len(ragged) and (batch is None
                                           or (ragged[k][0] or 0) - 2 < start + n + k):
                    k += 1
                bad = [BadRow(row=(num - 2) if num is not None else start,
                              reason=f"has {actual} fields but the header has {expected}",
                              line=num, text=text)
                       for num, text, expected, actual in ragged[:k]]
                del ragged[:k]
                total = n + len(bad)
                removed = [b.row - start for b in bad if 0 <= b.row - start < total]
                all_ids = np.arange(start, start + total, dtype=np.int64)
                ids = (np.delete(all_ids, removed) if len(removed) == len(bad)
                       else all_ids[:n])
                table = (pa.Table.from_batches([batch]) if batch is not None
                         else pa.table({c: pa.array([], pa.string()) for c in names}))
                yield _Raw(table, ids, text_cols, bad, total)
                start += total
                if batch is None:
                    return
        finally:
            stream.close()
        threaded = False


def _json_fallback(chunk: bytes, first_line: int, start: int,
                   ) -> tuple[pa.Table, np.ndarray[Any, np.dtype[np.int64]], frozenset[str],
                              list[BadRow], int]:
    """Parse a JSON Lines chunk line by line (the slow path: only when Arrow's parser failed)."""
    records: list[dict[str, Any]] = []
    ids: list[int] = []
    bad: list[BadRow] = []
    row = start
    for k, raw_line in enumerate(chunk.split(b"\n")):
        text = raw_line.decode("utf-8", errors="replace").strip()
        if not text:
            continue
        line = first_line + k
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            bad.append(BadRow(row, f"not valid JSON: {e.msg} at character {e.pos + 1}",
                              line=line, text=text[:200]))
        else:
            if isinstance(value, dict):
                records.append(value)
                ids.append(row)
            else:
                bad.append(BadRow(row, "not a JSON object (JSON Lines needs one {...} per line)",
                                  line=line, text=text[:200]))
        row += 1
    table, text_cols = _columns(records, _json_text)
    return table, np.array(ids, dtype=np.int64), text_cols, bad, row - start


def _json_text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def _columns(records: Sequence[Mapping[str, Any]],
             as_text: Callable[[Any], str]) -> tuple[pa.Table, frozenset[str]]:
    """Columns from dict records (keys in first-seen order). A column Arrow cannot type from
    its values (mixed kinds, nested values) becomes text via ``as_text``; its name is returned
    so the reader can report it. The table keeps one row per record even with no columns."""
    names: list[str] = []
    for r in records:
        for key in r:
            if key not in names:
                names.append(key)
    cols: dict[str, pa.Array] = {}
    text_cols: set[str] = set()
    for name in names:
        values = [r.get(name) for r in records]
        try:
            cols[name] = pa.array(values)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            cols[name] = pa.array([None if v is None else as_text(v) for v in values],
                                  pa.string())
            text_cols.add(name)
    table = pa.table(cols) if cols else pa.table({"__empty": pa.nulls(len(records))})
    if not cols:
        table = table.drop_columns(["__empty"])
    return table, frozenset(text_cols)


def _read_json_block(pj: Any, chunk: bytes, schema: pa.Schema | None) -> pa.Table:
    parse = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer")
    return pj.read_json(pa.BufferReader(chunk),
                        read_options=pj.ReadOptions(use_threads=False, block_size=len(chunk) + 1),
                        parse_options=parse)


def _jsonl_chunks(path: str, opts: ReadOptions, tracker: list[IO[bytes]]) -> Iterator[_Raw]:
    import pyarrow.json as pj

    stream = (pa.PythonFile(sys.stdin.buffer, mode="r") if path == STDIN
              else _open_stream(path, tracker))
    schema: pa.Schema | None = None
    leftover = b""
    start = 0
    line = 1
    seen_any = False
    try:
        while True:
            try:
                data = stream.read(opts.block_bytes)
            except (pa.ArrowException, OSError, EOFError) as e:
                raise InputError(f"cannot read: {e}", path=path) from None
            buf = leftover + data
            if not data:
                chunk, leftover = buf, b""
            else:
                cut = buf.rfind(b"\n")
                if cut < 0:
                    leftover = buf
                    continue
                chunk, leftover = buf[: cut + 1], buf[cut + 1:]
            if chunk.strip():
                seen_any = True
                try:
                    table = _read_json_block(pj, chunk, schema)
                    if schema is None and any(pa.types.is_timestamp(f.type)
                                              for f in table.schema):
                        # Arrow turns ISO strings into timestamps and forgets whether they had
                        # a zone; keep them as text so the time column is read like CSV's
                        as_text = pa.schema([(f.name, pa.string()) for f in table.schema
                                             if pa.types.is_timestamp(f.type)])
                        table = _read_json_block(pj, chunk, as_text)
                    n = table.num_rows
                    ids = np.arange(start, start + n, dtype=np.int64)
                    raw = _Raw(table, ids, frozenset(), [], n)
                except pa.ArrowException:
                    table, ids, text_cols, bad, n = _json_fallback(chunk, line, start)
                    raw = _Raw(table, ids, text_cols, bad, n)
                if schema is None and raw.table.num_columns:
                    schema = pa.schema([f for f in raw.table.schema
                                        if f.name not in raw.text_cols])
                yield raw
                start += raw.rows
            line += chunk.count(b"\n")
            if not data:
                break
    finally:
        stream.close()
    if not seen_any:
        raise InputError("the file is empty (expected one JSON object per line)", path=path)


def _parquet_chunks(path: str, opts: ReadOptions, tracker: list[IO[bytes]]) -> Iterator[_Raw]:
    import pyarrow.parquet as pq

    if path != STDIN and not os.path.exists(path):
        raise InputError("no such file", path=path)
    try:
        pf = pq.ParquetFile(pa.BufferReader(sys.stdin.buffer.read()) if path == STDIN else path)
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"not a readable Parquet file ({e})", path=path) from None
    start = 0
    try:
        for batch in pf.iter_batches(batch_size=opts.batch_size):
            n = batch.num_rows
            yield _Raw(pa.Table.from_batches([batch]), np.arange(start, start + n, dtype=np.int64),
                       frozenset(), [], n)
            start += n
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"cannot read Parquet near row {start + 1}: {e}", path=path) from None
    finally:
        pf.close()


_READERS = {"csv": _csv_chunks, "jsonl": _jsonl_chunks, "parquet": _parquet_chunks}


def _table_chunks(tables: Iterable[Any], batch_size: int) -> Iterator[_Raw]:
    start = 0
    for t in tables:
        table = pa.Table.from_batches([t]) if isinstance(t, pa.RecordBatch) else t
        for b in table.to_batches(max_chunksize=batch_size):
            n = b.num_rows
            yield _Raw(pa.Table.from_batches([b]), np.arange(start, start + n, dtype=np.int64),
                       frozenset(), [], n)
            start += n


def _dict_chunks(records: Iterable[Mapping[str, Any]], batch_size: int) -> Iterator[_Raw]:
    it = iter(records)
    start = 0
    while True:
        chunk = list(itertools.islice(it, batch_size))
        if not chunk:
            return
        bad: list[BadRow] = []
        good: list[Mapping[str, Any]] = []
        ids: list[int] = []
        for k, r in enumerate(chunk):
            if isinstance(r, Mapping):
                good.append(r)
                ids.append(start + k)
            else:
                bad.append(BadRow(start + k, f"not a mapping: {type(r).__name__}"))
        table, text_cols = _columns(good, str)
        yield _Raw(table, np.array(ids, dtype=np.int64), text_cols, bad, len(chunk))
        start += len(chunk)


def _split(chunks: Iterator[_Raw], batch_size: int) -> Iterator[_Raw]:
    """Cut text-format chunks (sized in bytes) to at most ``batch_size`` rows."""
    for raw in chunks:
        n = raw.table.num_rows
        if n <= batch_size:
            yield raw
            continue
        for k, off in enumerate(range(0, n, batch_size)):
            m = min(batch_size, n - off)
            bad = raw.bad if k == 0 else []
            extra = raw.rows - n if k == 0 else 0
            yield _Raw(raw.table.slice(off, m), raw.ids[off:off + m], raw.text_cols, bad,
                       m + extra)


def _renamed(chunks: Iterator[_Raw], name: str) -> Iterator[_Raw]:
    """Re-raise input errors of ``chunks`` under a display name (``-`` -> ``<stdin>``)."""
    try:
        yield from chunks
    except InputError as e:
        raise InputError(e.reason, path=name, row=e.row, column=e.column) from None


def list_files(path: str) -> list[str]:
    """The files of an input path: a file, a directory (recursively, skipping names that start
    with ``.`` or ``_``) or a glob (``data/*.csv.gz``, ``**`` allowed), in sorted order."""
    if os.path.isdir(path):
        files = sorted(str(p) for p in Path(path).rglob("*")
                       if p.is_file() and not p.name.startswith((".", "_")))
    elif any(ch in path for ch in "*?["):
        files = sorted(f for f in glob.glob(path, recursive=True) if os.path.isfile(f))
    elif not os.path.exists(path):
        raise InputError("no such file", path=path)
    else:
        return [path]
    if not files:
        raise InputError("no input files found", path=path)
    return files


def _multi_chunks(files: list[str], fmt: str, opts: ReadOptions,
                  tracker: list[IO[bytes]]) -> Iterator[_Raw]:
    """Several files as one input, in order; ids continue from one file to the next."""
    reader = _READERS[fmt]
    offset = 0
    for f in files:
        for raw in _split(reader(f, opts, tracker), opts.batch_size):
            raw.ids = raw.ids + offset
            raw.offset, raw.source = offset, f
            yield raw
            offset += raw.rows


def _source_chunks(source: Any, opts: ReadOptions,
                   tracker: list[IO[bytes]]) -> tuple[str, str, Iterator[_Raw]]:
    """(display name, format, raw chunks) for any supported source."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if path == STDIN and opts.format is None:
            raise InputError("reading standard input (--input -) needs --input-format "
                             "csv|jsonl|parquet", path="<stdin>")
        files = [path] if path == STDIN else list_files(path)
        fmt = (opts.format or detect_format(files[0])).lower()
        if fmt == "json":
            fmt = "jsonl"
        if fmt not in FORMATS:
            raise InputError(f"unknown input format {fmt!r}; use csv, jsonl or parquet",
                             path=path)
        if opts.format is None:
            for f in files[1:]:
                if detect_format(f) != fmt:
                    raise InputError(f"the input mixes formats: {files[0]} is {fmt}, {f} is "
                                     f"{detect_format(f)}; pass one format", path=path)
        if files != [path]:
            return path, fmt, _multi_chunks(files, fmt, opts, tracker)
        chunks = _split(_READERS[fmt](path, opts, tracker), opts.batch_size)
        if path == STDIN:
            return "<stdin>", fmt, _renamed(chunks, "<stdin>")
        return path, fmt, chunks
    if isinstance(source, pa.Table | pa.RecordBatch):
        return "<arrow table>", "arrow", _table_chunks([source], opts.batch_size)
    if isinstance(source, pa.RecordBatchReader):
        return "<arrow stream>", "arrow", _table_chunks(source, opts.batch_size)
    if type(source).__name__ == "DataFrame" and hasattr(source, "to_records"):
        try:
            table = pa.Table.from_pandas(source, preserve_index=False)
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise InputError(f"cannot convert the DataFrame to Arrow: {e}",
                             path="<DataFrame>") from None
        return "<DataFrame>", "pandas", _table_chunks([table], opts.batch_size)
    if isinstance(source, Iterable) and not isinstance(source, (bytes, Mapping)):
        it = iter(source)
        first = next(it, None)
        if first is None:
            raise InputError("no events: the input is empty", path="<records>")
        rest = itertools.chain([first], it)
        if isinstance(first, pa.RecordBatch | pa.Table):
            return "<arrow batches>", "arrow", _table_chunks(rest, opts.batch_size)
        return "<records>", "records", _dict_chunks(rest, opts.batch_size)
    raise InputError(f"cannot read events from a {type(source).__name__}; pass a file path, "
                     "a pandas DataFrame, a pyarrow Table or batches, or an iterable of dicts")


# --------------------------------------------------------------------------------------------
# Conversion of raw chunks to event batches
# --------------------------------------------------------------------------------------------


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
    time_mode: Literal["timestamp", "numeric", "iso-zoned", "iso-naive", "formatted"]
    time: TimeInfo


class EventStream(Iterator[EventBatch]):
    """Iterates :class:`EventBatch` chunks of an input; ``report`` is kept up to date.

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
        if options.time_unit not in _UNIT_US:
            raise InputError(f"unknown time unit {options.time_unit!r}; use s, ms or us")
        self.overrides = {c: parse_type_name(t, c) for c, t in options.column_types.items()}
        self._files: list[IO[bytes]] = []
        self._size = (os.path.getsize(source) if isinstance(source, (str, os.PathLike))
                      and os.path.isfile(source) else None)
        self.name, self.format, self._chunks = _source_chunks(source, options, self._files)
        self._decisions: Decisions | None = (
            None if decisions is None else replace(decisions, types=dict(decisions.types),
                                                   inferred=set(decisions.inferred)))
        self._rows = 0
        self._events = 0
        self._skipped = 0
        self._dead = 0
        self._ooo = 0
        self._max_ts: int | None = None
        self._examples: list[str] = []
        self._dead_file: IO[str] | None = None
        self._done = False
        if self.policy.action == "dead-letter":
            self._open_dead_letter()  # early: an unwritable path fails before any reading

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
            skipped=self._skipped, dead_lettered=self._dead, out_of_order=self._ooo,
            time=self.time, bad_examples=tuple(self._examples))

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
        if self._dead_file is not None:
            self._dead_file.close()
            self._dead_file = None

    # -- first chunk: resolve columns ------------------------------------------------------
    def _decide(self, raw: _Raw) -> Decisions:
        cols = raw.table.column_names
        src = raw.source or self.name
        for c in cols:
            if c in RESERVED:
                raise InputError(f"column name {c!r} is reserved by kleene; rename it", path=src)
        opts = self.options
        if opts.time_col is not None:
            time_col = opts.time_col
            if time_col not in cols:
                raise InputError(f"time column {time_col!r} not found; the columns are: "
                                 f"{', '.join(cols)}", path=src)
        else:
            found = [c for c in _TIME_CANDIDATES if c in cols]
            if not found:
                raise InputError(f"no time column: pass --time-col (time_col=); the columns "
                                 f"are: {', '.join(cols)}", path=src)
            time_col = found[0]
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
        for c in self.overrides:
            if c not in cols:
                raise InputError(f"--column-type names column {c!r}, which is not in the input; "
                                 f"the columns are: {', '.join(cols)}", path=src)
        types: dict[str, pa.DataType] = {}
        inferred: set[str] = set()
        for c in cols:
            arr = raw.table.column(c).combine_chunks()
            if c in self.overrides:
                types[c] = self.overrides[c]
            elif c in raw.text_cols:
                types[c] = infer_text_type(arr)
                inferred.add(c)
            else:
                types[c] = normalise_type(arr.type)
        tarr = raw.table.column(time_col).combine_chunks()
        ttype = types[time_col]
        mode: Literal["timestamp", "numeric", "iso-zoned", "iso-naive", "formatted"]
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
            valid = tarr.drop_null()
            zoned = bool(len(valid)) and bool(has_zone(valid.cast(pa.string()).slice(0, 1))[0]
                                              .as_py())
            if time_col in self.overrides and not pa.types.is_timestamp(ttype):
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

    # -- every chunk -----------------------------------------------------------------------
    def _time_micros(self, arr: pa.Array, d: Decisions) -> tuple[pa.Array, list[CellError]]:
        col = d.time_col
        unit_us = _UNIT_US[self.options.time_unit]
        if d.time_mode == "formatted":
            assert self.options.time_format is not None
            ts, errs = parse_formatted(arr.cast(pa.string()), col, self.options.time_format)
            return pc.cast(ts, pa.int64()), errs
        if d.time_mode in ("iso-zoned", "iso-naive") or (
                d.time_mode == "timestamp" and pa.types.is_string(arr.type)):
            if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
                ts, errs = parse_timestamps(arr.cast(pa.string()), col,
                                            with_zone=d.time.tz is not None)
            else:
                ts, errs = pc.cast(arr, pa.timestamp("us", d.time.tz), safe=False), []
            return pc.cast(ts, pa.int64()), errs
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
                        f"numbers in {self.options.time_unit}; ISO-8601 text must be "
                        "the whole column)")
            num, errs = convert_checked(arr, cast_to(target), col, not_epoch)
            if errs and pa.types.is_integer(target) and col not in self.overrides:
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
            return f"{num[i].as_py()!r} is not a valid epoch time in {self.options.time_unit}"

        ts, errs2 = convert_checked(num, scale, col, why)
        return ts, errs + errs2

    def _convert(self, raw: _Raw) -> EventBatch | None:
        self._rows += raw.rows
        if self._decisions is None:
            if raw.table.num_rows == 0 and not raw.bad:
                return None
            if raw.table.num_columns == 0:
                self._apply_policy(raw, [])
                return None
            self._decisions = self._decide(raw)
        d = self._decisions
        table = raw.table
        n = table.num_rows
        errors: list[CellError] = []
        out: dict[str, pa.Array] = {}
        if d.time_col not in table.column_names:
            raise InputError(f"time column {d.time_col!r} is missing from a later part of the "
                             "input", path=raw.source or self.name,
                             row=int(raw.ids[0]) - raw.offset + 1 if n else None)
        ts, terrs = self._time_micros(table.column(d.time_col).combine_chunks(), d)
        for c in table.column_names:
            if c == d.time_col and d.time_mode != "numeric":
                # the attribute is the parsed time itself (errors are reported once, below)
                out[c] = pc.cast(ts, pa.timestamp("us", d.time.tz))
                continue
            arr = table.column(c).combine_chunks()
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
                      for i in np.flatnonzero(pc.is_null(ts).to_numpy(zero_copy_only=False))
                      if int(i) not in unparsable)
        opts = self.options
        if opts.event_type is not None:
            types = pa.repeat(pa.scalar(opts.event_type, pa.string()), n)
        else:
            tcol = opts.type_col or "type"
            types = table.column(tcol).combine_chunks().cast(pa.string())
            empty = pc.or_kleene(pc.is_null(types), pc.equal(types, ""))
            errors.extend(CellError(int(i), tcol, "missing event type")
                          for i in np.flatnonzero(empty.to_numpy(zero_copy_only=False)))
        if opts.id_col is not None:
            ids = out[opts.id_col]
            if not (pa.types.is_integer(ids.type) or pa.types.is_string(ids.type)):
                ids = ids.cast(pa.string())
            errors.extend(CellError(int(i), opts.id_col, "missing id")
                          for i in np.flatnonzero(pc.is_null(ids).to_numpy(zero_copy_only=False)))
        else:
            ids = pa.array(raw.ids, pa.int64())
        cols = {ID: ids, TS: ts, TYPE: types, **out}
        result = pa.table(cols)
        if errors or raw.bad:
            result = self._apply_policy(raw, errors, result)
        return self._order(result, d)

    def _apply_policy(self, raw: _Raw, errors: list[CellError],
                      result: pa.Table | None = None) -> pa.Table | None:
        first: dict[int, CellError] = {}
        for e in errors:
            first.setdefault(e.position, e)
        bad = list(raw.bad) + [
            BadRow(int(raw.ids[p]) - raw.offset, e.reason, column=e.column,
                   record=_jsonable(raw.table.slice(p, 1).to_pylist()[0]))
            for p, e in sorted(first.items())]
        bad.sort(key=lambda b: b.row)
        if not bad:
            return result
        source = raw.source or self.name
        if self.policy.action == "fail":
            raise bad[0].error(source)
        for b in bad[: max(0, 3 - len(self._examples))]:
            self._examples.append(str(b.error(source)))
        if self.policy.action == "skip":
            self._skipped += len(bad)
        else:
            self._dead_letter(bad, source)
            self._dead += len(bad)
        if result is None or not first:
            return result
        keep = np.ones(result.num_rows, dtype=bool)
        keep[list(first)] = False
        return result.filter(pa.array(keep))

    def _open_dead_letter(self) -> IO[str]:
        if self._dead_file is None:
            assert self.policy.path is not None
            try:
                self._dead_file = open(self.policy.path, "w", encoding="utf-8")  # noqa: SIM115
            except OSError as e:
                raise InputError(f"cannot write the dead-letter file: {e.strerror}",
                                 path=self.policy.path) from None
        return self._dead_file

    def _dead_letter(self, bad: list[BadRow], source: str) -> None:
        out = self._open_dead_letter()
        for b in bad:
            rec: dict[str, Any] = {"source": source, "row": b.row + 1}
            if b.line is not None:
                rec["line"] = b.line
            if b.column is not None:
                rec["column"] = b.column
            rec["reason"] = b.reason
            if b.record is not None:
                rec["record"] = b.record
            if b.text is not None:
                rec["text"] = b.text
            out.write(json.dumps(rec, default=str) + "\n")

    def _order(self, table: pa.Table | None, d: Decisions) -> EventBatch | None:
        if table is None or table.num_rows == 0:
            return None
        # a row is out of order when an earlier row (in input order) has a later timestamp
        ts = table.column(TS).to_numpy()
        running = np.maximum.accumulate(ts)
        before = np.empty_like(ts)
        before[0] = self._max_ts if self._max_ts is not None else np.iinfo(np.int64).min
        before[1:] = running[:-1]
        if self._max_ts is not None:
            np.maximum(before, self._max_ts, out=before)
        ooo = int(np.count_nonzero(ts < before))
        self._max_ts = int(max(running[-1], before[0]))
        self._ooo += ooo
        if ooo and self.sort_chunks:
            order = np.argsort(ts, kind="stable")
            table = table.take(pa.array(order))
        self._events += table.num_rows
        return EventBatch(table, d.time)


def _jsonable(record: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (v if isinstance(v, (str, int, float, bool)) or v is None else str(v))
            for k, v in record.items()}


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
    table = batches[0].table if len(batches) == 1 else _concat([b.table for b in batches])
    if stream.options.id_col is not None:
        _check_unique_ids(table, stream.options.id_col, report.source)
    ts = table.column(TS).to_numpy()
    if np.any(ts[1:] < ts[:-1]):
        table = table.take(pa.array(np.argsort(ts, kind="stable")))
    return EventBatch(table, stream.time), report


def _check_unique_ids(table: pa.Table, id_col: str, source: str) -> None:
    """Ids name events in matches, so an id column must not repeat a value."""
    ids = table.column(ID)
    if pa.types.is_integer(ids.type) and ids.null_count == 0 and len(ids) > 1:
        arr = ids.to_numpy()
        if bool(np.all(arr[1:] > arr[:-1])):  # strictly increasing (the usual row ids)
            return
    if pc.count_distinct(ids).as_py() == len(ids):
        return
    ordered = ids.take(pc.sort_indices(ids))
    same = pc.equal(ordered.slice(1), ordered.slice(0, len(ordered) - 1))
    k = int(np.flatnonzero(same.to_numpy(zero_copy_only=False))[0])
    raise InputError(f"the id column repeats the value {ordered[k].as_py()!r}; ids must be "
                     "unique (omit --id-col to use row numbers)", path=source, column=id_col)


def _concat(tables: list[pa.Table]) -> pa.Table:
    try:
        return pa.concat_tables(tables, promote_options="permissive").combine_chunks()
    except pa.ArrowException as e:
        raise InputError(f"chunks of the input disagree on column types: {e}") from None


def describe_source(source: Any) -> str:
    """A short name for a source, for messages."""
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return f"<{type(source).__name__}>"


__all__ = [
    "BadRow", "BadRowPolicy", "Decisions", "EventStream", "STDIN", "collect", "count_csv_rows",
    "list_files", "FORMATS", "ReadOptions", "ReadReport", "describe_source", "detect_format",
    "iter_events", "normalise_type", "read_events",
]
