"""Writers: matches -> JSON Lines (the contract), CSV or Parquet, to a file or stdout.

The JSON Lines record is :meth:`Match.to_record`, one line per match, in the order the engine
produced them::

    {"query": "q", "match": {"a": 3, "b": [4, 5]}, "start": ..., "end": ..., "values": {...}}

CSV and Parquet flatten it: columns ``query``, ``start``, ``end``, ``match`` (the bindings as a
JSON object string, since variables differ between queries) and one column per RETURN field.
Parquet keeps ``start``/``end`` as ``timestamp[us]`` for datetime input.
CSV's header is the fixed columns and the RETURN fields the writer is given (``fields``: the
CLI passes every query's, in the set's order, so a query set whose queries return different
fields writes one header of all of them, and a file without matches has the same header), or
else the first match's; a match with a RETURN field the header lacks is an
:class:`InputError` (the value is not dropped). A Parquet file has one schema that fits
every row group: a column first seen later is null before it, a null column takes the later
type, int widens to float (in lists too), values without a common type are JSON text (as
within one row group); when the schema changes, the row groups written so far are copied into
the new one (``ParquetWriter._rewrite``), so the file reads as one row group of all matches.

Writers are incremental (``write`` many times, then ``close``) so a streaming run can write
matches as they come; JSON Lines and CSV hold no matches in memory, Parquet buffers up to
``row_group_size`` matches per row group.

Example:
    >>> import io
    >>> from kleene.events import Match, TimeInfo
    >>> out = io.StringIO()
    >>> with open_writer(out, "jsonl", TimeInfo()) as w:
    ...     w.write([Match("q", {"a": 0, "b": (1, 2)}, 1_000_000, 3_000_000, {"n": 2})])
    >>> out.getvalue()
    '{"query": "q", "match": {"a": 0, "b": [1, 2]}, "start": 1, "end": 3, "values": {"n": 2}}\\n'
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import math
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import IO, Any

import numpy as np
import pyarrow as pa

from ..codegen import build
from ..errors import InputError
from .match import Match
from .matchtable import MatchBlocks, MatchColumns, MatchTable
from .model import TimeInfo, int64_array

OUTPUT_FORMATS = ("jsonl", "csv", "parquet")

_BLOCK_CHUNK = 16_384
"""Matches of a :class:`MatchBlocks` part generated (and written) per step."""


def _json_default(value: Any) -> Any:
    """JSON for values engines may return: numpy scalars, datetimes, tuples, Arrow scalars."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, pa.Scalar):
        return value.as_py()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


NONFINITE_JSON = {math.inf: "Infinity", -math.inf: "-Infinity"}
"""How JSON writes the floats JSON has no number for (README, ``--format``): the
strings ``"Infinity"``, ``"-Infinity"`` and ``"NaN"`` (the names JavaScript's ``Number()``,
Python's ``float()`` and Spark's JSON reader understand). CSV writes ``inf``, ``-inf`` and
``nan`` (Python's and Arrow's float texts); Parquet keeps the float itself."""


def nonfinite_json(x: float) -> str:
    """The JSON string standing for a non-finite float (see :data:`NONFINITE_JSON`)."""
    return NONFINITE_JSON.get(x, "NaN")


def _clean(value: Any) -> Any:
    """NaN and infinities are not JSON numbers: the strings of :data:`NONFINITE_JSON`."""
    if isinstance(value, float) and not math.isfinite(value):
        return nonfinite_json(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _generic_json(value: Any) -> str:
    """``json.dumps`` of one value exactly as it appears inside a match record."""
    return json.dumps(_clean(value), default=_json_default, allow_nan=False)


_EPOCH = _dt.datetime(1970, 1, 1)


class _LineFormatter:
    """Formats matches as JSON Lines lines, byte for byte what
    ``json.dumps(_clean(match.to_record(time)), ...)`` gives, without building the record.

    Why: the generic path costs ~20 us per match (record dicts, ``_clean`` recursion, the
    encoder); this one is a few f-strings. Event ids that are plain ``int`` or ``str``, ints
    and the output timestamps are formatted directly (``str(int)`` is JSON's text for an int,
    ``json.dumps`` for strings); anything else (RETURN values, other id types) goes through
    the generic encoder, so the text never differs. Datetime output caches the ISO text of
    the whole second, like ``datetime.isoformat`` (``.ffffff`` only when microseconds != 0).
    """

    __slots__ = ("time", "_names", "_keys", "_seconds", "_days", "_fracs", "_suffix",
                 "_datetime", "_unit", "_shape")

    def __init__(self, time: TimeInfo) -> None:
        self.time = time
        self._names: dict[str, str] = {}
        self._keys: dict[str, str] = {}
        self._seconds: dict[int, str] = {}
        self._days: dict[int, str] = {}
        self._fracs: dict[int, str] = {}
        self._shape: Any = None
        """The bindings formatter generated for the first match's shape (see
        :func:`_shape_formatter`); other shapes take the general loop."""
        """The text after the whole second: ``.ffffff`` (omitted at 0), zone, closing quote."""
        self._datetime = time.kind == "datetime"
        self._suffix = "+00:00" if time.tz is not None else ""
        self._unit = time.unit_us

    def ts(self, ts_us: int) -> str:
        """The JSON text of an output timestamp."""
        if self._datetime:
            sec, us = divmod(int(ts_us), 1_000_000)
            base = self._seconds.get(sec)
            if base is None:
                if len(self._seconds) > 1 << 16:
                    self._seconds.clear()
                day, sod = divmod(sec, 86_400)
                date = self._days.get(day)
                if date is None:
                    date = self._days[day] = (_EPOCH + _dt.timedelta(days=day)).date().isoformat()
                hh, rest = divmod(sod, 3600)
                base = self._seconds[sec] = f"{date}T{hh:02d}:{rest // 60:02d}:{rest % 60:02d}"
            frac = self._fracs.get(us)
            if frac is None:
                if len(self._fracs) > 1 << 16:
                    self._fracs.clear()
                frac = self._fracs[us] = (f".{us:06d}" if us else "") + self._suffix + '"'
            return '"' + base + frac
        q, r = divmod(int(ts_us), self._unit)
        if r == 0:
            return str(q)
        return repr(int(ts_us) / self._unit)

    def key(self, name: str) -> str:
        k = self._keys.get(name)
        if k is None:
            k = self._keys[name] = json.dumps(name)
        return k

    def line(self, m: Match) -> str:
        """One match as its line (without the newline)."""
        if self._datetime:
            return self.line_with(m, self._cached_ts(m.start), self._cached_ts(m.end))
        return self.line_with(m, self.ts(m.start), self.ts(m.end))

    def _cached_ts(self, t: Any) -> str:
        """A datetime timestamp from the per-second and per-microsecond text caches."""
        if type(t) is int:
            sec, us = divmod(t, 1_000_000)
            base = self._seconds.get(sec)
            frac = self._fracs.get(us)
            if base is not None and frac is not None:
                return '"' + base + frac
        return self.ts(t)

    def line_with(self, m: Match, start: str, end: str) -> str:
        """The line of ``m`` with its start and end already formatted (JSON texts)."""
        q = self._names.get(m.query)
        if q is None:
            q = self._names[m.query] = json.dumps(m.query)
        text = self.bindings_text(m.bindings)
        vals = m.values
        vtext = _generic_json(dict(vals)) if vals else "{}"
        return (f'{{"query": {q}, "match": {{{text}}}, "start": {start}, '
                f'"end": {end}, "values": {vtext}}}')

    def bindings_text(self, b: Mapping[str, Any]) -> str:
        """The JSON text of the bindings object, without its braces."""
        shape = self._shape
        if shape is None and type(b) is dict:
            shape = self._shape = _shape_formatter(b)
        if shape is not None:
            text: str | None = shape(b)
            if text is not None:
                return text
        parts = []
        keys = self._keys
        v: Any
        for k, v in b.items():
            kt = keys.get(k)
            if kt is None:
                kt = keys[k] = json.dumps(k)
            tv = type(v)
            if tv is int:
                parts.append(f"{kt}: {v}")
            elif tv is tuple:
                if len(v) == 1 and type(v[0]) is int:
                    parts.append(f"{kt}: [{v[0]}]")
                elif all(type(x) is int for x in v):
                    parts.append(f"{kt}: [{', '.join(map(str, v))}]")
                else:
                    parts.append(f"{kt}: {_generic_json(list(v))}")
            elif tv is str:
                parts.append(f"{kt}: {json.dumps(v)}")
            else:
                parts.append(f"{kt}: {_generic_json(v)}")
        return ", ".join(parts)


def _shape_formatter(bindings: dict[str, Any]) -> Any:
    """A generated ``f(bindings) -> str | None`` for bindings with the same variables, in the
    same order, each an ``int`` id or a tuple of ``int`` ids as in ``bindings``: it returns
    the text between the braces of ``"match"`` (what ``json.dumps`` writes), or None when a
    match does not have that shape (then the general loop formats it).

    The source holds only positions and type tests; the variable names' JSON texts are
    passed in as constants (never as source text)."""
    kinds = []
    for v in bindings.values():
        if type(v) is int:
            kinds.append("i")
        elif type(v) is tuple and all(type(x) is int for x in v):
            kinds.append("t")
        else:
            return None
    n = len(kinds)
    if n == 0:
        return None
    env: dict[str, Any] = {"NAMES": tuple(bindings)}
    xs = [f"x{j}" for j in range(n)]
    lines = ["def shape(b):",
             "    if tuple(b) != NAMES:",
             "        return None",
             f"    {', '.join(xs)}{',' if n == 1 else ''} = b.values()"]
    pieces = []
    for j, kind in enumerate(kinds):
        env[f"P{j}"] = ("" if j == 0 else ", ") + json.dumps(list(bindings)[j]) + ": "
        if kind == "i":
            lines.append(f"    if type(x{j}) is not int:")
            lines.append("        return None")
            pieces.append(f"{{P{j}}}{{x{j}}}")
        else:
            lines.append(f"    if type(x{j}) is not tuple:")
            lines.append("        return None")
            lines.append(f"    for y in x{j}:")
            lines.append("        if type(y) is not int:")
            lines.append("            return None")
            pieces.append(f"{{P{j}}}[{{', '.join(map(str, x{j}))}}]")
    lines.append("    return f\"" + "".join(pieces) + "\"")
    return build("\n".join(lines) + "\n", env, label="jsonl shape", entry="shape")


_FORMATTERS: dict[TimeInfo, _LineFormatter] = {}


def match_line(match: Match, time: TimeInfo) -> str:
    """One match as its JSON Lines line (without the newline)."""
    if match.expired is not None:  # a timed-out partial match (EMIT TIMEOUTS)
        return _match_line_generic(match, time)
    f = _FORMATTERS.get(time)
    if f is None:
        if len(_FORMATTERS) > 64:
            _FORMATTERS.clear()
        f = _FORMATTERS[time] = _LineFormatter(time)
    return f.line(match)


def _match_line_generic(match: Match, time: TimeInfo) -> str:
    """The reference form of :func:`match_line` (the record through ``json.dumps``)."""
    return json.dumps(_clean(match.to_record(time)), default=_json_default, allow_nan=False)


class MatchWriter:
    """Base class: ``write(matches)`` any number of times, then ``close()``; counts matches."""

    def __init__(self, time: TimeInfo) -> None:
        self.time = time
        self.count = 0

    def write(self, matches: Iterable[Match]) -> None:
        """Write matches in the given order."""
        raise NotImplementedError

    def _write_columns(self, mc: MatchColumns) -> None:
        """Write one column part (no ``Match`` objects); the default reads its matches."""
        self.write(mc.matches())

    def _write_table(self, table: MatchTable) -> None:
        """Write a :class:`MatchTable` part by part, in order: column parts through
        :meth:`_write_columns` (formatted or buffered from their columns), the chain plan's
        blocks expanded a bounded chunk at a time (pieces of columns, or of ``Match`` objects
        when they carry RETURN values), lists of ``Match`` through :meth:`write`. The same
        rows in the same order as ``write(list(table))``."""
        for part in table.parts:
            if isinstance(part, MatchColumns):
                self._write_columns(part)
            elif isinstance(part, MatchBlocks):
                for piece in part.columns(_BLOCK_CHUNK):
                    if isinstance(piece, list):
                        self.write(piece)
                    else:
                        self._write_columns(piece)
            else:
                self.write(part)

    def close(self) -> None:
        """Flush and release the destination (stdout is flushed, never closed)."""

    def __enter__(self) -> MatchWriter:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class _TextWriter(MatchWriter):
    def __init__(self, dest: str | IO[str] | None, time: TimeInfo) -> None:
        super().__init__(time)
        self._own = isinstance(dest, str)
        if isinstance(dest, str):
            try:
                self.out: IO[str] = open(dest, "w", encoding="utf-8", newline="")  # noqa: SIM115
            except OSError as e:
                raise InputError(f"cannot write the output file: {e.strerror}",
                                 path=dest) from None
        else:
            self.out = dest if dest is not None else sys.stdout

    def close(self) -> None:
        if self._own:
            self.out.close()
        else:
            self.out.flush()


class JsonLinesWriter(_TextWriter):
    """The default: one JSON object per line (the contract).

    Matches are formatted a chunk at a time, column-wise (:func:`kleene.events.textcols.
    jsonl_lines`); a chunk whose matches differ in shape is split by shape, and what the
    column-wise path cannot format exactly is formatted one match at a time
    (:class:`_LineFormatter`), with the same text."""

    def __init__(self, dest: str | IO[str] | None, time: TimeInfo) -> None:
        super().__init__(dest, time)
        self._fmt: _LineFormatter | None = None
        enc = (getattr(self.out, "encoding", None) or "").lower().replace("-", "").replace("_", "")
        raw = getattr(self.out, "buffer", None) if enc in _ASCII_SAFE else None
        self._raw: Any = raw if isinstance(raw, io.BufferedIOBase) else None
        """The buffered byte stream under ``out`` (lines are ASCII, so any of these encodings
        takes their bytes as they are; a buffered stream writes all of them or raises), or
        None: then text is decoded and written to ``out``."""

    _CHUNK = 8_192
    """Matches formatted per chunk: large writes, and Arrow buffers small enough to be
    reused from chunk to chunk (larger chunks cost more in page faults than they save)."""

    timeouts = False
    """Set when the matches may include timed-out partial matches (EMIT TIMEOUTS): those are
    written with their ``"expired"`` field, one at a time, in place."""

    def write(self, matches: Iterable[Match]) -> None:
        if isinstance(matches, MatchTable):
            self._write_table(matches)
            return
        ms = matches if isinstance(matches, list) else list(matches)
        if self.timeouts and any(m.expired is not None for m in ms):
            run: list[Match] = []
            for m in ms:
                if m.expired is None:
                    run.append(m)
                    continue
                if run:
                    self.write(run)
                    run = []
                self.out.write(_match_line_generic(m, self.time) + "\n")
                self.count += 1
            if run:
                self.write(run)
            return
        step = self._CHUNK
        for i in range(0, len(ms), step):
            self._write_chunk(ms[i:i + step])
        self.count += len(ms)

    def write_rows(self, matches: Iterable[Match]) -> None:
        """:meth:`write`, one match at a time (the reference of the column-wise path)."""
        ms = matches if isinstance(matches, list) else list(matches)
        if self._fmt is None:
            self._fmt = _LineFormatter(self.time)
        line = self._fmt.line
        for i in range(0, len(ms), 8192):
            self.out.write("".join([line(m) + "\n" for m in ms[i:i + 8192]]))
        self.count += len(ms)

    _COLUMN_CHUNK = 65_536
    """Matches of a column part formatted per step (no ``Match`` objects: larger steps)."""

    def _write_columns(self, mc: MatchColumns) -> None:
        from .textcols import Unformattable, jsonl_column_lines, utf8_bytes

        n = len(mc)
        step = self._COLUMN_CHUNK
        for i in range(0, n, step):
            part = mc.slice(i, min(i + step, n))
            try:
                data = utf8_bytes(jsonl_column_lines(part, self.time))
            except (Unformattable, pa.ArrowCapacityError):
                self._write_chunk(part.matches())
                continue
            if self._raw is not None:
                self.out.flush()
                self._raw.write(data)
            else:
                self.out.write(bytes(data).decode("ascii"))
        self.count += n

    def _write_chunk(self, ms: list[Match]) -> None:
        from .textcols import Unformattable, jsonl_lines, utf8_bytes

        try:
            data = utf8_bytes(jsonl_lines(ms, self.time))
        except (Unformattable, pa.ArrowCapacityError):
            self.out.write("".join(self._lines_by_shape(ms)))
            return
        self._write_bytes(data)

    def _write_bytes(self, data: memoryview) -> None:
        if self._raw is not None:
            self.out.flush()
            self._raw.write(data)
        else:
            self.out.write(bytes(data).decode("utf-8"))

    def texts(self, matches: list[Match]) -> list[pa.Array]:
        """The lines :meth:`write` would write for ``matches`` (newline included), as Arrow
        string arrays in order, without writing them: keyed parallel workers format their own
        matches, and the caller writes the merged lines with :meth:`write_texts`."""
        from .textcols import Unformattable, jsonl_column_lines, jsonl_lines

        out: list[pa.Array] = []
        if isinstance(matches, MatchTable):  # column parts formatted from their columns
            for part in matches.parts:
                if not isinstance(part, MatchColumns):
                    out += self.texts(part)
                    continue
                n = len(part)
                for i in range(0, n, self._COLUMN_CHUNK):
                    piece = part.slice(i, min(i + self._COLUMN_CHUNK, n))
                    try:
                        out.append(jsonl_column_lines(piece, self.time))
                    except (Unformattable, pa.ArrowCapacityError):
                        out += self.texts(piece.matches())
            return out
        for i in range(0, len(matches), self._CHUNK):
            ms = matches[i:i + self._CHUNK]
            try:
                out.append(jsonl_lines(ms, self.time))
            except (Unformattable, pa.ArrowCapacityError):
                out.append(pa.array(self._lines_by_shape(ms), pa.string()))
        return out

    def write_texts(self, texts: Iterable[pa.Array]) -> None:
        """Write lines made by :meth:`texts` (each array's strings, in order); each line is
        one match."""
        from .textcols import utf8_bytes

        for t in texts:
            self._write_bytes(utf8_bytes(t))
            self.count += len(t)

    def _lines_by_shape(self, ms: list[Match]) -> list[str]:
        """The lines (newline included) of matches of several shapes: column-wise per shape
        when the shapes are few, else (and for a shape that cannot be) one match at a time."""
        from .textcols import Unformattable, jsonl_lines

        if self._fmt is None:
            self._fmt = _LineFormatter(self.time)
        line = self._fmt.line
        groups: dict[tuple[Any, ...], list[int]] = {}
        try:
            for i, m in enumerate(ms):
                groups.setdefault((tuple(m.bindings), tuple(m.values)), []).append(i)
        except TypeError:
            groups = {}
        if not groups or len(groups) * 16 > len(ms):
            return [line(m) + "\n" for m in ms]
        lines: list[str] = [""] * len(ms)
        for rows in groups.values():
            part = [ms[i] for i in rows]
            try:
                texts = jsonl_lines(part, self.time).to_pylist()
            except (Unformattable, pa.ArrowCapacityError):
                texts = [line(m) + "\n" for m in part]
            for i, t in zip(rows, texts, strict=True):
                lines[i] = t
        return lines


_ASCII_SAFE = frozenset({"utf8", "ascii", "usascii", "latin1", "iso88591", "cp1252"})
"""Encodings in which an ASCII text's bytes are its ASCII bytes (``encoding`` normalized)."""


def _flat(match: Match, time: TimeInfo, fmt: _LineFormatter | None = None) -> dict[str, Any]:
    """One CSV / Parquet row: query, start, end, match (the bindings' JSON), RETURN fields."""
    if fmt is not None:
        row: dict[str, Any] = {
            "query": match.query, "start": time.to_output(match.start),
            "end": time.to_output(match.end),
            "match": "{" + fmt.bindings_text(match.bindings) + "}",
        }
        for k, v in match.values.items():
            # a float stays a float (CSV: inf, nan; Parquet: the value); lists and dicts are
            # JSON text in CSV (csv_cells) and Parquet (_column)
            row[k if k not in row else f"values.{k}"] = v
        return row
    return _flat_generic(match, time)


def _flat_generic(match: Match, time: TimeInfo) -> dict[str, Any]:
    """The reference form of :func:`_flat` (through the JSON Lines record)."""
    rec = match.to_record(time)
    row = {
        "query": rec["query"], "start": rec["start"], "end": rec["end"],
        "match": json.dumps(_clean(rec["match"]), default=_json_default),
    }
    for k, v in rec["values"].items():
        row[k if k not in row else f"values.{k}"] = v
    return row


CSV_FIXED_COLUMNS = ("query", "start", "end", "match")
"""The CSV columns every match has (the header of a file without matches)."""


def csv_cells(row: dict[str, Any]) -> dict[str, Any]:
    """A flat match row as CSV cells: lists and dicts (the bindings, list values) as JSON."""
    return {k: (json.dumps(_clean(v), default=_json_default) if isinstance(v, (list, dict))
                else v) for k, v in row.items()}


class CsvWriter(_TextWriter):
    """CSV: query, start, end, match (JSON), then the RETURN fields: ``fields`` when given
    (every query's, the order of first appearance), else the first match's.

    Chunks of matches with the same RETURN fields are formatted column-wise
    (:func:`kleene.events.textcols.csv_lines`); others one match at a time, the same text."""

    _CHUNK = 8_192

    def __init__(self, dest: str | IO[str] | None, time: TimeInfo,
                 fields: Sequence[str] | None = None) -> None:
        super().__init__(dest, time)
        self._writer: Any = None
        self._header: list[str] | None = None
        self._fields = None if fields is None else tuple(dict.fromkeys(fields))
        """The RETURN fields of the header, when known before the first match."""
        self._fmt = _LineFormatter(time)
        self._path = dest if isinstance(dest, str) else None
        self._fits: set[tuple[str, ...]] = set()
        """RETURN field tuples checked against the header (:meth:`_check`)."""

    def _check(self, m: Match) -> None:
        """A match whose RETURN field has no column in the header (written from the first
        match) stops the run with a one-line error rather than losing the value."""
        fields = tuple(m.values)
        if fields in self._fits:
            return
        from .textcols import row_keys

        assert self._header is not None
        missing = [c for c in row_keys(fields) if c not in self._header]
        if missing:
            raise InputError(
                f"CSV output: query {m.query!r} returns {', '.join(missing)}, which the CSV "
                f"header ({', '.join(self._header)}) has no column for; "
                f"write JSON Lines or Parquet (--format), or RETURN the same fields in every "
                f"query of the set", path=self._path)
        self._fits.add(fields)

    def write(self, matches: Iterable[Match]) -> None:
        from .textcols import Unformattable, csv_lines, utf8_bytes

        if isinstance(matches, MatchTable):
            self._write_table(matches)
            return
        ms = matches if isinstance(matches, list) else list(matches)
        if not ms:
            return
        if self._writer is None:
            self._start(tuple(ms[0].values))
        assert self._header is not None
        for i in range(0, len(ms), self._CHUNK):
            part = ms[i:i + self._CHUNK]
            try:
                text = csv_lines(part, self.time, self._header, self._fmt.bindings_text)
            except (Unformattable, pa.ArrowCapacityError):
                self._rows(part)
                continue
            self._check(part[0])  # (csv_lines: the part's matches return the same fields)
            self.out.write(bytes(utf8_bytes(text)).decode("utf-8"))
            self.count += len(part)

    def _write_columns(self, mc: MatchColumns) -> None:
        from .textcols import Unformattable, csv_column_lines, utf8_bytes

        n = len(mc)
        if not n:
            return
        if self._writer is None:
            self._start(())
        assert self._header is not None
        step = JsonLinesWriter._COLUMN_CHUNK
        for i in range(0, n, step):
            part = mc.slice(i, min(i + step, n))
            try:
                text = csv_column_lines(part, self.time, self._header)
            except (Unformattable, pa.ArrowCapacityError):
                self._rows(part.matches())
                continue
            self.out.write(bytes(utf8_bytes(text)).decode("utf-8"))
            self.count += len(part)

    def _start(self, first: tuple[str, ...]) -> None:
        """Write the header: the fixed columns and the declared RETURN fields, or ``first``
        (the first match's) when none were declared."""
        from .textcols import row_keys

        self._header = [*CSV_FIXED_COLUMNS,
                        *row_keys(first if self._fields is None else self._fields)]
        self._writer = self._dict_writer(self._header)
        self._writer.writeheader()

    def _dict_writer(self, header: list[str]) -> Any:
        return csv.DictWriter(self.out, fieldnames=header, extrasaction="ignore",
                              lineterminator="\n")

    def write_rows(self, matches: Iterable[Match]) -> None:
        """:meth:`write`, one match at a time (the reference of the column-wise path)."""
        for m in matches:
            if self._writer is None:
                self._start(tuple(m.values))
            self._rows([m])

    def _rows(self, matches: Iterable[Match]) -> None:
        for m in matches:
            self._check(m)
            self._writer.writerow(csv_cells(_flat(m, self.time, self._fmt)))
            self.count += 1

    def close(self) -> None:
        if self._writer is None:  # no matches: still write the header
            self._start(())
        super().close()


_Segment = tuple[int, dict[str, Any]]
"""Matches waiting for their row group: how many, and their columns (name -> a list of
Python values, or an Arrow array for ``start``, ``end`` and ``match``)."""


class ParquetWriter(MatchWriter):
    """Parquet, one row per match; row groups of ``row_group_size`` matches.

    Matches are buffered as columns (a chunk's times and bindings texts as Arrow arrays, its
    RETURN fields as lists); a row group's columns are converted as a whole, exactly as rows
    were (the same values in, the same file out). A :class:`MatchTable`'s column parts (and
    the chain plan's blocks, expanded a chunk at a time) are buffered from their columns, with
    no ``Match`` object: the same rows in the same order, so the same row groups.

    The file's schema is the first row group's until a later one does not fit it (a new
    column, a null column, int then float, no common type): then it widens (:meth:`_fit`) and
    the row groups written so far are copied into ``path.kleene-N`` in the wider schema, the
    rest is written there and :meth:`close` renames it to ``path``."""

    def __init__(self, path: str, time: TimeInfo, row_group_size: int = 65_536) -> None:
        super().__init__(time)
        self.path = path
        self.row_group_size = row_group_size
        self._segments: list[_Segment] = []
        self._buffered = 0
        self._writer: Any = None
        self._fmt = _LineFormatter(time)
        self._json: set[str] = set()
        """The file's columns written as JSON text."""
        self._written: str | None = None
        """The file being written when the schema had to change (:meth:`_rewrite`)."""
        self._rewrites = 0
        self._failed = False

    def _ts_type(self) -> pa.DataType:
        if self.time.kind == "datetime":
            return pa.timestamp("us", "UTC" if self.time.tz else None)
        return pa.int64() if self.time.unit == "us" else pa.float64()

    def write(self, matches: Iterable[Match]) -> None:
        from .textcols import match_texts, row_keys

        if isinstance(matches, MatchTable):
            self._write_table(matches)
            return
        ms = matches if isinstance(matches, list) else list(matches)
        if not ms:
            return
        vals = [m.values for m in ms]
        fields = tuple(vals[0])
        if not all(tuple(v) == fields for v in vals):
            self.write_rows(ms)
            return
        cols: dict[str, Any] = {
            "query": [m.query for m in ms],
            "start": self._times([m.start for m in ms]),
            "end": self._times([m.end for m in ms]),
            "match": match_texts(ms, self._fmt.bindings_text),
        }
        for col, k in row_keys(fields).items():
            # as the per-row path (_flat): values as they are, floats NaN / inf included
            cols[col] = [v[k] for v in vals]
        self._add((len(ms), cols))

    _COLUMN_CHUNK = 65_536
    """Matches of a column part buffered per step (a bounded ``match`` text array each)."""

    def _write_columns(self, mc: MatchColumns) -> None:
        """Buffer a column part as one segment per step: ``query`` repeated, ``start`` and
        ``end`` from the time arrays, ``match`` from the ids (:func:`kleene.events.textcols.
        column_match_texts`); no RETURN columns (a column part has no RETURN values). What
        cannot be formatted from columns goes through its ``Match`` objects (same rows)."""
        from .textcols import Unformattable, column_match_texts

        n = len(mc)
        step = self._COLUMN_CHUNK
        for i in range(0, n, step):
            part = mc.slice(i, min(i + step, n)) if n > step else mc
            try:
                texts = column_match_texts(part)
            except (Unformattable, pa.ArrowCapacityError):
                self.write(part.matches())
                continue
            k = len(part)
            query = (pa.repeat(pa.scalar(mc.query, pa.string()), k) if type(mc.query) is str
                     else [mc.query] * k)
            self._add((k, {"query": query, "start": self._times(part.start),
                           "end": self._times(part.end), "match": texts}))

    def _times(self, ts: list[Any] | np.ndarray[Any, Any]) -> Any:
        """Start or end times as the column's Arrow array (a list when it cannot be); ``ts``
        a list of Python values or a column part's array (read as the ``Match`` objects would
        hold it: ``tolist``)."""
        if isinstance(ts, np.ndarray) and ts.dtype == np.int64:
            us = int64_array(ts)
        else:
            if isinstance(ts, np.ndarray):
                ts = ts.tolist()
            try:
                us = pa.array(ts, pa.int64())
            except (OverflowError, pa.ArrowException, TypeError):
                return ts if self.time.kind == "datetime" else [self.time.to_output(t)
                                                                 for t in ts]
        if self.time.kind == "datetime":
            return us.cast(self._ts_type())
        if self.time.unit == "us":
            return us
        a = us.to_numpy(zero_copy_only=False)
        if us.null_count or (len(a) and np.abs(a).max() >= 1 << 53):
            return [self.time.to_output(t) for t in (ts.tolist() if isinstance(ts, np.ndarray)
                                                     else ts)]
        return pa.array(a / self.time.unit_us, pa.float64())

    def write_rows(self, matches: Iterable[Match]) -> None:
        """:meth:`write`, one match at a time (the reference of the column-wise path)."""
        keys: tuple[str, ...] | None = None
        cols: dict[str, list[Any]] = {}
        n = 0
        for m in matches:
            row = _flat(m, self.time, self._fmt)
            if self.time.kind == "datetime":
                row["start"], row["end"] = m.start, m.end
            if tuple(row) != keys:  # consecutive rows of one shape make one segment
                if n:
                    self._add((n, cols))
                keys, cols, n = tuple(row), {k: [] for k in row}, 0
            for k, v in row.items():
                cols[k].append(v)
            n += 1
        if n:
            self._add((n, cols))

    def _add(self, segment: _Segment) -> None:
        self._segments.append(segment)
        self._buffered += segment[0]
        self.count += segment[0]
        size = self.row_group_size
        while self._buffered >= size:
            group: list[_Segment] = []
            taken = 0
            while taken < size:
                n, cols = self._segments.pop(0)
                if taken + n > size:
                    k = size - taken
                    self._segments.insert(0, (n - k, {c: v[k:] for c, v in cols.items()}))
                    n, cols = k, {c: v[:k] for c, v in cols.items()}
                group.append((n, cols))
                taken += n
            self._buffered -= taken
            self._flush(group)

    def _column(self, group: list[_Segment], name: str,
                kind: pa.DataType | None) -> tuple[pa.Array, bool]:
        """One column of a row group: typed (``kind``) or as ``pa.array`` infers it; and
        whether it is JSON text (values that have no common Arrow type, each as JSON)."""
        if kind is not None:
            return pa.concat_arrays([
                v if isinstance(v, pa.Array) else pa.array(v, pa.int64()).cast(kind)
                if name in ("start", "end") and self.time.kind == "datetime"
                else pa.array(v, kind)
                for n, cols in group for v in [cols.get(name, [None] * n)]]), False
        values: list[Any] = []
        for n, cols in group:
            values += cols.get(name, [None] * n)
        try:
            return pa.array(values), False
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            return pa.array([json.dumps(_clean(v), default=_json_default) for v in values],
                            pa.string()), True

    def _flush(self, group: list[_Segment]) -> None:
        import pyarrow.parquet as pq

        # every column of every segment, in the order they first appear (a column part has
        # no RETURN columns; a query set's queries may return different fields)
        names: dict[str, None] = dict.fromkeys(("query", "start", "end", "match"))
        for _, seg in group:
            names.update(dict.fromkeys(seg))
        kinds = {"start": self._ts_type(), "end": self._ts_type(), "query": pa.string(),
                 "match": pa.string()}
        cols: dict[str, pa.Array] = {}
        as_json: set[str] = set()
        for name in names:
            if group:
                cols[name], is_json = self._column(group, name, kinds.get(name))
                if is_json:
                    as_json.add(name)
            else:
                cols[name] = pa.array([], kinds[name])
        table = pa.table(cols)
        if self._writer is None:
            try:
                self._writer = pq.ParquetWriter(self.path, table.schema)
            except OSError as e:
                raise InputError(f"cannot write the output file: {e}", path=self.path) from None
            self._json = as_json
        elif not (table.schema.equals(self._writer.schema)
                  and as_json == self._json & set(names)):
            table = self._fit(table, as_json)
        self._writer.write_table(table)

    def _fit(self, table: pa.Table, as_json: set[str]) -> pa.Table:
        """A row group whose columns differ from the file's, in a schema that holds both:
        a new column is added (null in the rows before), a null column takes the other's
        type, int widens to float (also in lists), and values with no common type become
        JSON text (see :func:`_common_type`). When the file's schema must change, the row
        groups written so far are rewritten in the new one (:meth:`_rewrite`)."""
        schema: pa.Schema = self._writer.schema
        fields: list[pa.Field] = []
        to_json: set[str] = set()
        for f in schema:
            if f.name not in table.column_names:
                fields.append(f)
                if f.name in self._json:
                    to_json.add(f.name)
                continue
            other = table.schema.field(f.name).type
            if f.name in self._json or f.name in as_json:
                kind: pa.DataType | None = None
            else:
                kind = _common_type(f.type, other)
            if kind is None:
                fields.append(pa.field(f.name, pa.string()))
                to_json.add(f.name)
            else:
                fields.append(pa.field(f.name, kind))
        for name in table.column_names:
            if name not in schema.names:
                fields.append(table.schema.field(name))
                if name in as_json:
                    to_json.add(name)
        target = pa.schema(fields)
        while True:
            try:
                if not (target.equals(schema) and to_json == self._json):
                    self._rewrite(target, to_json)
                return _convert(table, as_json, target, to_json)
            except _NoFit as e:  # an int too large for a float: the column is JSON text
                to_json.add(e.column)
                target = target.set(target.get_field_index(e.column),
                                    pa.field(e.column, pa.string()))

    def _rewrite(self, target: pa.Schema, as_json: set[str]) -> None:
        """Copy the row groups written so far into a file of schema ``target`` (one row
        group at a time, the same groups); the rest is written there, and :meth:`close`
        puts it in place of ``path``. Raises :class:`_NoFit` (nothing changed but the
        writer closed) when a column's values do not fit its type in ``target``."""
        import pyarrow.parquet as pq

        self._writer.close()
        done = self._written or self.path
        fresh = f"{self.path}.kleene-{self._rewrites}"
        self._rewrites += 1
        writer: Any = None
        try:
            old = pq.ParquetFile(done)
            writer = pq.ParquetWriter(fresh, target)
            for i in range(old.num_row_groups):
                writer.write_table(_convert(old.read_row_group(i), self._json, target,
                                            as_json))
            old.close()
        except (OSError, _NoFit) as e:
            if writer is not None:
                writer.close()
            if os.path.exists(fresh):
                os.remove(fresh)
            if isinstance(e, _NoFit):
                raise
            self._failed = True  # (close: nothing more to write)
            raise InputError(f"cannot write the output file: {e}", path=self.path) from None
        if self._written is not None:
            os.remove(self._written)
        self._writer, self._written, self._json = writer, fresh, as_json

    def close(self) -> None:
        if self._failed:
            return
        try:
            if self._segments or self._writer is None:
                group, self._segments, self._buffered = self._segments, [], 0
                self._flush(group)
        except BaseException:
            if self._writer is not None:
                self._writer.close()
                self._writer = None
            if self._written is not None:  # the copy is not left beside the output
                os.remove(self._written)
                self._written = None
            raise
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            if self._written is not None:
                os.replace(self._written, self.path)
                self._written = None


class _NoFit(Exception):
    """A column's values do not fit the type it was to be widened to (``column``)."""

    def __init__(self, column: str) -> None:
        super().__init__(column)
        self.column = column


def _common_type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The type both ``a`` and ``b`` values fit in, as ``pa.array`` would infer it for the
    two together: null takes the other type, an int and a float make a float, lists of
    such; None when there is none (the column is then JSON text)."""
    if a.equals(b):
        return a
    if pa.types.is_null(a):
        return b
    if pa.types.is_null(b):
        return a
    if {a, b} == {pa.int64(), pa.float64()}:
        return pa.float64()
    if pa.types.is_list(a) and pa.types.is_list(b):
        inner = _common_type(a.value_type, b.value_type)
        return None if inner is None else pa.list_(inner)
    return None


def _convert(table: pa.Table, as_json: set[str], target: pa.Schema,
             to_json: set[str]) -> pa.Table:
    """``table`` (columns in ``as_json`` are JSON text) in schema ``target`` (columns in
    ``to_json`` are JSON text): missing columns are null (``"null"`` as JSON text, as a
    row group of mixed values writes a missing value), others cast or written as JSON."""
    n = table.num_rows
    columns: list[Any] = []
    for f in target:
        if f.name not in table.column_names:
            columns.append(pa.array(["null"] * n, pa.string()) if f.name in to_json
                           else pa.nulls(n, f.type))
            continue
        col = table.column(f.name)
        if f.name in to_json and f.name not in as_json:
            col = pa.array([json.dumps(_clean(v), default=_json_default)
                            for v in col.to_pylist()], pa.string())
        elif not col.type.equals(f.type):
            try:
                col = col.cast(f.type)
            except pa.ArrowInvalid:  # an int beyond 2**53 for a float
                raise _NoFit(f.name) from None
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=target)


def open_writer(dest: str | IO[str] | None, fmt: str, time: TimeInfo,
                fields: Sequence[str] | None = None) -> MatchWriter:
    """A writer for ``fmt`` (jsonl, csv, parquet) to a path, a text stream, or stdout (None).
    ``fields``: the RETURN fields of every query written, when known (CSV's header)."""
    fmt = fmt.lower()
    if fmt == "jsonl":
        return JsonLinesWriter(dest, time)
    if fmt == "csv":
        return CsvWriter(dest, time, fields)
    if fmt == "parquet":
        if not isinstance(dest, str):
            raise InputError("Parquet output needs a file: pass --output PATH")
        return ParquetWriter(dest, time)
    raise InputError(f"unknown output format {fmt!r}; use one of: {', '.join(OUTPUT_FORMATS)}")


def write_matches(matches: Iterable[Match], dest: str | IO[str] | None = None,
                  fmt: str = "jsonl", time: TimeInfo | None = None) -> int:
    """Write all matches at once; returns how many were written."""
    with open_writer(dest, fmt, time or TimeInfo()) as w:
        w.write(matches)
        return w.count


__all__ = [
    "CSV_FIXED_COLUMNS", "CsvWriter", "JsonLinesWriter", "MatchWriter", "OUTPUT_FORMATS",
    "ParquetWriter", "csv_cells", "match_line", "open_writer", "write_matches",
]
