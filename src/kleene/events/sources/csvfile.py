"""CSV and TSV files (plain or compressed): every column as text, typed later by inference.

A CSV row is one line: the reader cuts the input into blocks of whole lines and parses each
block with Arrow (the fast path). A block Arrow cannot parse as it should (a ragged row, text
that is not UTF-8, an unterminated quote that would run into the next lines, a line longer
than a block) is read again line by line: each line is a row, a bad line is a bad row at its
line, and reading resumes at the next line. So every non-empty line after the header is
accounted for, as an event or a bad row; only the block with the bad line takes the slow path.

Once the first block has decided the column types, later blocks are parsed by Arrow straight
to them (int64, float64 and ISO-8601 timestamps by Arrow's own parsers, no text columns in
between), and so is a large first block, its types decided by a text sample of its first lines
(:meth:`_Parser.sample`); such a block also keeps its text, which the reader converts instead
when any of its rows is bad. A value Arrow's typed parse takes gets the value the text conversion gives it
(``tests/events/test_read_typed.py`` holds the proof); one it refuses sends its block down the
text path, so the typed parse changes speed only, never values, bad rows or messages.
A quoted value therefore cannot hold a line break. An empty line is no row, but it takes an id
(and is counted as a blank line), so an event's id is the index of its line after the header.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from ...errors import InputError
from ..badrows import BadRow
from ..convert import INFER_ROWS
from ..options import ReadOptions
from .base import FileSource, Raw, open_stream, read_after, read_block

_BOM = b"\xef\xbb\xbf"
_TEXT_LIMIT = 10_000
"""Characters of a bad line kept for its dead letter."""
_EMPTY = "the file is empty (expected a header line and rows)"
Text = bytes | bytearray
"""Lines of the input (a block is read into a ``bytearray``)."""
_TIMES = (pa.timestamp("us"), pa.timestamp("us", "UTC"))
_SAMPLE_MIN = 1 << 21
"""A first block from this size on is parsed straight to types, its types decided by its
first lines (:meth:`_Parser.sample`)."""


def delimiter_of(path: str, options: ReadOptions) -> str:
    """The delimiter: ``options.delimiter``, else a tab for ``.tsv`` files, else a comma."""
    d = options.delimiter
    if d is None:
        return "\t" if ".tsv" in path.lower() else ","
    if len(d) != 1 or not d.isascii() or d in "\r\n\"":
        raise InputError(f"the delimiter must be one ASCII character other than a quote or a "
                         f"line break, not {d!r} (--delimiter)")
    return d


def csv_header(line: bytes, rest: bytes, path: str, delimiter: str) -> list[str]:
    """The column names from the first line of a CSV file (``rest`` is what follows it)."""
    line = line.removeprefix(_BOM)
    if line.endswith(b"\r"):
        line = line[:-1]
    if not line.strip():
        if not rest.strip():
            raise InputError(_EMPTY, path=path)
        raise InputError("line 1 is empty; expected the header line (the column names)",
                         path=path)
    if b"\x00" in line:
        raise InputError("line 1 (the header) contains NUL bytes: not a text file", path=path)
    if b"\r" in line:
        raise InputError("line 1 (the header) has a carriage return (CR) inside it; lines "
                         "must end in LF or CRLF", path=path)
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("line 1 (the header) is not UTF-8 text: not a CSV file?",
                         path=path) from None
    try:
        names = next(csv.reader([text], delimiter=delimiter, strict=True))
    except csv.Error as e:
        raise InputError(f"cannot parse the header line: {e}", path=path) from None
    seen: set[str] = set()
    for n in names:
        if not n.isprintable():
            raise InputError(f"column name {n!r} in the header has a control character "
                             "(another delimiter? see --delimiter)", path=path)
        if n in seen:
            raise InputError(f"duplicate column name {n!r} in the header", path=path, row=None)
        seen.add(n)
    return names


def _line_breaks(chunk: Text) -> int:
    """Line breaks (LF, CRLF or a bare CR) in ``chunk``, with C-speed counts."""
    n = chunk.count(b"\n")
    if b"\r" not in chunk:  # (a memchr: much faster than counting)
        return n
    return n + chunk.count(b"\r") - chunk.count(b"\r\n")


class _Blocks:
    """The lines after the header in blocks of whole lines. (Every line after the header takes
    an id, so a block's first line is line ``2 + `` the ids taken before it.)"""

    def __init__(self, stream: Any, path: str, options: ReadOptions) -> None:
        self.stream = stream
        self.path = path
        self.size = options.block_bytes
        self.delimiter = delimiter_of(path, options)
        buf = b""
        while True:  # the header line, however long
            data = read_block(stream, self.size, path)
            buf += data
            nl = buf.find(b"\n")
            if nl >= 0 or not data:
                break
        self.short = len(data) < self.size
        """Whether the header's read ended short of a block: the input is (almost) read."""
        line, rest = (buf, b"") if nl < 0 else (buf[:nl], buf[nl + 1:])
        self.names = csv_header(line, rest, path, self.delimiter)
        self.leftover = rest
        self.first_read = max(1, self.size - len(line) - 1 - len(rest))

    def __iter__(self) -> Iterator[bytearray]:
        # each block is read into one buffer after the previous block's last partial line
        # (no copy to join them); the first block ends where a whole-file block would
        if self.short:  # a small file (the header's read ended short of a block): no thread
            data = read_after(self.stream, self.leftover, self.first_read, self.path)
            while True:
                ended = len(data) == len(self.leftover)
                chunk = self._whole_lines(data, ended)
                if chunk:
                    yield chunk
                if ended:
                    return
                data = read_after(self.stream, self.leftover, self._next_size(), self.path)
        from concurrent.futures import ThreadPoolExecutor

        # the next block is read (and decompressed) in a thread while this one is parsed
        with ThreadPoolExecutor(1) as ahead:
            data = read_after(self.stream, self.leftover, self.first_read, self.path)
            while True:
                ended = len(data) == len(self.leftover)
                chunk = self._whole_lines(data, ended)
                if not ended:
                    pending = ahead.submit(read_after, self.stream, self.leftover,
                                           self._next_size(), self.path)
                if chunk:
                    yield chunk
                if ended:
                    return
                data = pending.result()

    def _next_size(self) -> int:
        """A block, or more after a line longer than a block (so such a line is read in
        reads that double, not in copies that grow by a block)."""
        return max(self.size, len(self.leftover))

    def _whole_lines(self, data: bytearray, ended: bool) -> bytearray | None:
        """The whole lines of ``data`` (the last partial line kept in ``leftover`` to start
        the next read), all of them when the input ``ended``, or ``None`` when no line ends
        in ``data``."""
        if ended:
            self.leftover = b""
            return data
        cut = data.rfind(b"\n")
        if cut < 0:  # a line longer than a block: read on
            self.leftover = bytes(data)
            return None
        self.leftover = bytes(data[cut + 1:])
        del data[cut + 1:]
        return data


def _rows_in(chunk: Text, expected: int) -> int:
    """The non-empty lines of ``chunk`` (counted exactly only when the fast count, which
    takes every line break for a row, is not ``expected``)."""
    fast = _line_breaks(chunk) + (not chunk.endswith((b"\n", b"\r")))
    return fast if fast == expected else sum(1 for line in chunk.splitlines() if line)


def _empty_rows(table: pa.Table) -> bool:
    """Whether a row has no value at all: an empty line (or one of empty values) read with
    ``ignore_empty_lines=False``; the text path tells which."""
    if not table.num_columns or any(c.null_count == 0 for c in table.columns):
        return bool(table.num_columns == 0)
    import pyarrow.compute as pc

    empty = pc.is_null(table.column(0))
    for col in table.columns[1:]:
        empty = pc.and_(empty, pc.is_null(col))
    return bool(pc.any(empty).as_py())


def _has_line_break(table: pa.Table) -> bool:
    """Whether a value holds a line break: an open quote ran over into the next lines."""
    for col in table.columns:
        if not pa.types.is_string(col.type):
            continue
        for chunk in col.chunks:
            data = chunk.buffers()[2]
            if data is not None and len(data):
                b = data.to_pybytes()
                if b.find(b"\n") >= 0 or b.find(b"\r") >= 0:
                    return True
    return False


def _one_core() -> bool:
    """Whether this process may run on one processor only (``taskset -c 0``, a container), or
    Arrow's CPU pool has one thread (``pa.set_cpu_count(1)``: a keyed worker that shares the
    cores with the others, kleene.runtime.parallel)."""
    if pa.cpu_count() <= 1:
        return True
    try:
        return len(os.sched_getaffinity(0)) <= 1
    except AttributeError:  # (not Linux)
        return (os.cpu_count() or 1) <= 1


class _Parser:
    """One block of lines -> a :class:`Raw` chunk, by Arrow, or line by line when needed."""

    def __init__(self, names: list[str], delimiter: str) -> None:
        import pyarrow.csv as pcsv

        self.pcsv = pcsv
        self.names = names
        self.delimiter = delimiter
        self.sep = delimiter.encode()
        self.parse_opts = pcsv.ParseOptions(delimiter=delimiter)
        self.plain_opts = pcsv.ParseOptions(delimiter=delimiter, quote_char=False,
                                            ignore_empty_lines=False)
        self.convert_opts = pcsv.ConvertOptions(column_types={n: pa.string() for n in names},
                                                strings_can_be_null=True)
        self.text_cols = frozenset(names)
        self.types: dict[str, pa.DataType] = {}
        """The decided types (shared with the source; empty until the first chunk is typed)."""
        self._typed: tuple[tuple[Any, ...], Any, frozenset[str]] | None = None
        self.one_core = _one_core()
        self._misses = 0

    def arrow(self, data: Text, convert_opts: Any = None, parse_opts: Any = None) -> pa.Table:
        """``data`` (whole lines) parsed by Arrow (as text unless ``convert_opts`` say
        otherwise); raises ``pa.ArrowException``."""
        pcsv = self.pcsv
        # Arrow's threads parse parts of a block at once, each part a chunk of the table; on
        # one core they only cost, and a typed block of one chunk reaches the events uncopied
        threaded = len(data) > 1 << 20 and not (convert_opts is not None and self.one_core)
        opts = pcsv.ReadOptions(column_names=self.names, use_threads=threaded,
                                block_size=max(1 << 20, len(data) // 2 + 1) if threaded
                                else len(data) + 1)
        return pcsv.read_csv(pa.BufferReader(data), read_options=opts,
                             parse_options=parse_opts or self.parse_opts,
                             convert_options=convert_opts or self.convert_opts)

    def _typed_options(self) -> tuple[Any, frozenset[str]] | None:
        """Arrow's convert options for the decided types, and the columns left as text
        (``None`` before the types are decided, or when no column has a typed parse)."""
        types = self.types
        if not types:
            return None
        key = tuple(types.items())
        if self._typed is None or self._typed[0] != key:
            typed = {n: t for n in self.names if (t := types.get(n)) is not None
                     and (t in (pa.int64(), pa.float64()) or t in _TIMES)}
            column_types = {n: typed.get(n, pa.string()) for n in self.names}
            opts = ((self.pcsv.ConvertOptions(column_types=column_types,
                                              strings_can_be_null=True),
                     self.pcsv.ConvertOptions(column_types=column_types,
                                              strings_can_be_null=True, check_utf8=False))
                    if typed else None)
            self._typed = (key, opts, frozenset(n for n in self.names if n not in typed))
        return None if self._typed[1] is None else (self._typed[1], self._typed[2])

    def typed(self, chunk: Text, start: int) -> Raw | None:
        """The fastest path: the whole block by Arrow straight to the decided types (its own
        number and ISO-8601 parsers, which accept a value only if the text conversion gives
        it the same value), when that parses as one row per line; ``None`` otherwise (and
        after two blocks in a row that did not, for the rest of the input)."""
        if self._misses >= 2:
            return None
        found = self._typed_options()
        if found is None:
            return None
        convert, text_cols = found
        quoted = b'"' in chunk
        # no quote and no empty line skipped: a row is a line (checked below otherwise)
        parse = self.parse_opts if quoted else self.plain_opts
        if chunk.isascii():  # (no byte to check; a text column of a block that is not is)
            convert = convert[1]
        else:
            convert = convert[0]
        try:
            table = self.arrow(chunk, convert, parse)
        except pa.ArrowException:
            table = None
        if table is not None:
            n = table.num_rows
            if (not _empty_rows(table) if parse is self.plain_opts else
                    _line_breaks(chunk) + (not chunk.endswith((b"\n", b"\r"))) == n
                    and not _has_line_break(table)):
                self._misses = 0
                return Raw(table, np.arange(start, start + n, dtype=np.int64), text_cols, [],
                           n, text=lambda: self.arrow(chunk))
        self._misses += 1
        return None

    def sample(self, chunk: Text) -> Raw | None:
        """For a large first block: its first lines as text, in a chunk of no rows whose
        :attr:`Raw.sample` decides the column types, so that the block itself is parsed
        straight to them. ``None`` (the whole block decides, parsed as text) when the first
        lines might not decide as the whole block would: fewer than ``INFER_ROWS`` rows (type
        inference reads that many) or a column without a value (the time column's first
        value tells whether its timestamps have zones)."""
        if len(chunk) < _SAMPLE_MIN:
            return None
        scanned = min(len(chunk), 1 << 16)
        lines = chunk.count(b"\n", 0, scanned)
        if not lines:
            return None
        # enough lines for INFER_ROWS rows and a quarter more, by the first 64 KiB's lengths
        end = chunk.find(b"\n", scanned * (INFER_ROWS + INFER_ROWS // 4 + 1) // lines)
        if end < 0 or end > len(chunk) // 2:
            return None
        head = chunk[:end + 1]
        try:
            table = self.arrow(head)
        except pa.ArrowException:  # a bad line: the whole block as text finds it
            return None
        if table.num_rows < INFER_ROWS or any(c.null_count == len(c) for c in table.columns):
            return None
        if b'"' in head and (_has_line_break(table)
                             or table.num_rows != _rows_in(head, table.num_rows)):
            return None  # a quote left open: the text path reads such lines one by one
        return Raw(table.slice(0, 0), np.zeros(0, dtype=np.int64), self.text_cols, [], 0,
                   sample=table)

    def parse(self, chunk: Text, first_line: int, start: int) -> Raw:
        """One block: by Arrow straight to the decided types, else as text (:meth:`text`).
        A block is parsed one way as a whole, so its table has one schema (a typed half and
        a text half would not concatenate)."""
        fast = self.typed(chunk, start)
        return fast if fast is not None else self.text(chunk, first_line, start)

    def text(self, chunk: Text, first_line: int, start: int,
             breaks: int | None = None) -> Raw:
        """The text path: the whole block by Arrow, if it parses as one row per line; else
        each half of the block alike (as text), down to 64 KiB parts read line by line."""
        try:
            table = self.arrow(chunk)
        except pa.ArrowException:
            table = None
        if table is not None:
            n = table.num_rows
            # a quote left open: its value ran over the next lines, or (multi-threaded) Arrow
            # dropped the rest of a part of the block without a word; only a quote can do that
            if b'"' not in chunk or not (_has_line_break(table) or n != _rows_in(chunk, n)):
                if breaks is None:
                    breaks = _line_breaks(chunk)
                if breaks + (not chunk.endswith((b"\n", b"\r"))) == n:  # no empty line
                    return Raw(table, np.arange(start, start + n, dtype=np.int64),
                               self.text_cols, [], n)
                # Arrow skips empty lines: each still takes an id (its line's index)
                lengths = np.fromiter(map(len, chunk.splitlines()), dtype=np.int64)
                ids = np.flatnonzero(lengths).astype(np.int64) + start
                if len(ids) == n:
                    return Raw(table, ids, self.text_cols, [], n, blank=len(lengths) - n)
        mid = chunk.find(b"\n", len(chunk) // 2)
        if len(chunk) <= 1 << 16 or mid < 0 or mid == len(chunk) - 1:
            return self.by_line(chunk, first_line, start)
        left, right = chunk[: mid + 1], chunk[mid + 1:]
        a = self.text(left, first_line, start)
        b = self.text(right, first_line + _line_breaks(left), start + a.rows + a.blank)
        return Raw(pa.concat_tables([a.table, b.table]), np.concatenate([a.ids, b.ids]),
                   self.text_cols, a.bad + b.bad, a.rows + b.rows, blank=a.blank + b.blank)

    def problem(self, line: Text) -> str | None:
        """Why ``line`` (no line break, not empty) is not a row, or ``None``."""
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as e:
            return f"not UTF-8 text (byte {e.start + 1} is {line[e.start]:#04x})"
        if b'"' in line:
            n = _count_fields(text, self.delimiter)
            if n is None:
                return "unterminated quote (a quoted value must end on its line)"
            fields = n
        else:
            fields = line.count(self.sep) + 1
        if fields != len(self.names):
            return f"has {fields} fields but the header has {len(self.names)}"
        return None

    def by_line(self, chunk: Text, first_line: int, start: int) -> Raw:
        """The slow path: each non-empty line is a row or a bad row at its line (an empty
        line is no row, but takes an id)."""
        good: list[tuple[int, int, Text]] = []  # (row, line number, line)
        bad: list[BadRow] = []
        row = start
        blank = 0
        for k, line in enumerate(bytes(chunk).splitlines()):
            if not line:
                blank += 1
                row += 1
                continue
            why = self.problem(line)
            if why is None:
                good.append((row, first_line + k, line))
            else:
                bad.append(_bad(row, why, first_line + k, line))
            row += 1
        table, kept = self._table(good, bad)
        bad.sort(key=lambda b: b.row)
        return Raw(table, np.array(kept, dtype=np.int64), self.text_cols, bad,
                   row - start - blank, blank=blank)

    def _table(self, good: list[tuple[int, int, Text]],
               bad: list[BadRow]) -> tuple[pa.Table, list[int]]:
        """The good lines as one table (by Arrow) and their rows. Should Arrow still refuse a
        line the check passed, the lines are parsed one by one and the refused ones are bad."""
        empty = pa.table({n: pa.array([], pa.string()) for n in self.names})
        if not good:
            return empty, []
        try:
            return self.arrow(b"\n".join(g[2] for g in good) + b"\n"), [g[0] for g in good]
        except pa.ArrowException:
            pass
        tables: list[pa.Table] = []
        kept: list[int] = []
        for row, number, line in good:
            try:
                tables.append(self.arrow(line + b"\n"))
                kept.append(row)
            except pa.ArrowException as e:
                reason = str(e).splitlines()[0] if str(e) else "Arrow cannot parse it"
                bad.append(_bad(row, f"cannot parse: {reason}", number, line))
        return (pa.concat_tables(tables) if tables else empty), kept


def _count_fields(text: str, delimiter: str) -> int | None:
    """The fields of a line with quotes, as Arrow splits them, or ``None`` when a quote is
    left open. (The csv module's reader would do, but it refuses values over 128 KiB.)"""
    fields, i, n = 1, 0, len(text)
    while i <= n:
        if i < n and text[i] == '"':  # a quoted value: up to a quote not doubled
            i += 1
            while True:
                q = text.find('"', i)
                if q < 0:
                    return None
                if text.startswith('""', q):
                    i = q + 2
                    continue
                i = q + 1
                break
        d = text.find(delimiter, i)
        if d < 0:
            return fields
        fields += 1
        i = d + 1
    return fields


def _bad(row: int, reason: str, line: int | None, text: Text) -> BadRow:
    return BadRow(row, reason, line=line,
                  text=text[:_TEXT_LIMIT * 4].decode("utf-8", errors="replace")[:_TEXT_LIMIT])


class CsvSource(FileSource):
    """CSV as text columns, one row per line (see the module docstring)."""

    format = "csv"
    extensions = (".csv", ".tsv", ".txt")
    documented = (".csv", ".tsv")

    def chunks(self) -> Iterator[Raw]:
        return parse_csv(open_stream(self.path, self.tracker), self.path, self.options,
                         self.types)


def parse_csv(stream: Any, path: str, options: ReadOptions, types: dict[str, Any], *,
              sample: bool = True) -> Iterator[Raw]:
    """The rows of a CSV stream (its header line first) as :class:`Raw` chunks, parsed with
    the decided ``types`` (filled in by the reader once it has decided them); with
    ``sample``, and no types yet, a large first block is preceded by a typed sample chunk
    with no rows (the reader decides the types from it). Closes ``stream``."""
    blocks: Iterator[bytearray] | None = None
    try:
        lines = _Blocks(stream, path, options)
        parser = _Parser(lines.names, lines.delimiter)
        parser.types = types
        start = 0
        blocks = iter(lines)
        for chunk in blocks:
            if sample and start == 0 and not parser.types:
                first = parser.sample(chunk)
                if first is not None:  # the reader decides the types from it now
                    yield first
            raw = parser.parse(chunk, start + 2, start)
            start += raw.rows + raw.blank
            if raw.rows or raw.blank:
                yield raw
    finally:
        if blocks is not None:
            blocks.close()  # type: ignore[attr-defined]  # (waits for a read under way)
        stream.close()


class CsvSampleSource(CsvSource):
    """The first lines of a CSV file that decide its column types as its whole reader
    decides them (a large first block's sample, :meth:`_Parser.sample`), as one chunk of
    rows (its first ``_SAMPLE_ROWS``; the whole sample decides) -- no chunk when its whole
    first block decides. Keyed workers that each read a part
    of the file need only those types from the calling process (issue 15): the first block
    itself is not parsed here. The chunk's ids are its rows' indices (blank lines not
    counted): it is for its columns and types, not for its events."""

    def chunks(self) -> Iterator[Raw]:
        return _sample_chunks(open_stream(self.path, self.tracker), self.path, self.options)


_SAMPLE_ROWS = 64
"""Rows of :class:`CsvSampleSource`'s chunk (converted to the decided types)."""


def _sample_chunks(stream: Any, path: str, options: ReadOptions) -> Iterator[Raw]:
    blocks: Iterator[bytearray] | None = None
    try:
        lines = _Blocks(stream, path, options)
        parser = _Parser(lines.names, lines.delimiter)
        blocks = iter(lines)
        chunk = next(blocks, None)
        first = None if chunk is None else parser.sample(chunk)
        if first is not None and first.sample is not None:
            n = min(first.sample.num_rows, _SAMPLE_ROWS)  # (the sample decides the types)
            yield Raw(first.sample.slice(0, n), np.arange(n, dtype=np.int64), first.text_cols,
                      [], n, sample=first.sample)
    finally:
        if blocks is not None:
            blocks.close()  # type: ignore[attr-defined]  # (waits for a read under way)
        stream.close()


def count_csv_rows(path: str, options: ReadOptions) -> tuple[int, int]:
    """The ids a CSV file takes as the reader numbers them, and its empty lines: every line
    after the header takes an id (a row is one line; bad ones count, and so do empty lines,
    which are no row), so the ids of the next file start there."""
    stream = open_stream(path)
    ids = blank = 0
    try:
        for chunk in _Blocks(stream, path, options):
            lines = chunk.splitlines()
            ids += len(lines)
            blank += sum(1 for line in lines if not line)
        return ids, blank
    finally:
        stream.close()


__all__ = ["CsvSampleSource", "CsvSource", "count_csv_rows", "csv_header", "delimiter_of"]
