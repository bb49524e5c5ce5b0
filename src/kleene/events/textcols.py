"""Match output formatted a column at a time: the JSON (and CSV) text of many matches at once.

The writers' per-match formatters (:class:`kleene.events.writers._LineFormatter`) cost about
1.5 us a match, one f-string and a few dict look-ups each. Here a chunk of matches is taken
apart into columns (the query names, the start and end times, one column per pattern variable,
one per RETURN field), each column is turned into its JSON texts in bulk (Arrow casts for ids
and times, one C-level ``map`` for strings and floats) and the lines are joined by Arrow
(``binary_join_element_wise``), so no Python code runs per match but the attribute reads.

The text is exactly what the per-match path writes (which is exactly ``json.dumps`` of
:meth:`Match.to_record` after ``_clean``): where a column holds something these routines do not
format themselves (an id that is neither ``int`` nor ``str``, an ``int`` beyond int64, a time
outside years 1..9999, a RETURN value that is a list, a datetime, a numpy scalar...), each of
its values goes through the reference encoder, or the caller formats those matches one by one.
``tests/events/test_writer_golden.py`` holds the proof: random matches of every shape, written
by both paths, compared byte for byte.

Example:
    >>> from kleene.events import Match, TimeInfo
    >>> ms = [Match("q", {"a": 0, "b": (1, 2)}, 1_000_000, 3_500_000, {"n": 2, "s": 'x"'})]
    >>> jsonl_lines(ms, TimeInfo()).to_pylist()
    ['{"query": "q", "match": {"a": 0, "b": [1, 2]}, "start": 1, "end": 3.5, "values": {"n": 2, "s": "x\\\\""}}\\n']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from itertools import chain
from json.encoder import encode_basestring_ascii
from operator import attrgetter, itemgetter
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .match import Match
from .matchtable import MatchColumns
from .model import TimeInfo, bool_array, int64_array

_MIN_US = -62_135_596_800_000_000
"""0001-01-01T00:00:00 in microseconds since the epoch (``datetime``'s first instant)."""
_MAX_US = 253_402_300_799_999_999
"""9999-12-31T23:59:59.999999 (``datetime``'s last)."""

Piece: TypeAlias = "pa.Array | str"
"""One column of a line: an Arrow string array (a text per match) or a constant text."""


class Unformattable(Exception):
    """A column this module cannot format exactly: the caller formats those matches itself."""


def json_value(value: Any) -> str:
    """The reference JSON text of one value as it appears inside a match record."""
    from .writers import _generic_json

    return _generic_json(value)


def _json_float(x: float) -> str:
    if math.isfinite(x):
        return float.__repr__(x)
    from .writers import nonfinite_json

    return '"' + nonfinite_json(x) + '"'  # README: "Infinity", "-Infinity", "NaN"


def _json_bool(x: bool) -> str:
    return "true" if x else "false"


def _json_none(_: None) -> str:
    return "null"


_JSON_TEXT: dict[type, Callable[[Any], str]] = {
    int: int.__repr__, str: encode_basestring_ascii, float: _json_float, bool: _json_bool,
    type(None): _json_none,
}
"""Exact types whose JSON text is known without the encoder (``json.dumps`` writes ints with
``int.__repr__``, strings with ``encode_basestring_ascii``, floats with ``float.__repr__``, and
non-finite floats as the strings of ``writers.NONFINITE_JSON``)."""


def _json_id(v: Any) -> str:
    """An event id as the per-match path writes it (a tuple of ids is a list)."""
    if type(v) is tuple:
        return json_value(list(v))
    return _JSON_TEXT.get(type(v), json_value)(v)


def _ints(values: Sequence[Any]) -> pa.Array | None:
    """Decimal texts of Python ints as an Arrow string array (None when one exceeds int64)."""
    try:
        return pa.array(values, pa.int64()).cast(pa.string())
    except (OverflowError, pa.ArrowException):
        return None


def json_texts(values: Sequence[Any], fn: Callable[[Any], str] | None = None) -> pa.Array:
    """The JSON text of each value (``fn`` for types without a bulk form; default: the
    reference encoder)."""
    kinds = set(map(type, values))
    if kinds == {int}:
        arr = _ints(values)
        if arr is not None:
            return arr
    if len(kinds) == 1:
        (kind,) = kinds
        known = _JSON_TEXT.get(kind)
        if known is not None:
            return pa.array(list(map(known, values)), pa.string())
    other = fn or json_value
    texts = _JSON_TEXT
    return pa.array([texts.get(type(v), other)(v) for v in values], pa.string())


def id_list_pieces(values: Sequence[Any]) -> list[Piece]:
    """The JSON text of each Kleene binding (a tuple of ids: ``[1, 2]``, ``[]``), as pieces."""
    if set(map(type, values)) != {tuple}:
        return [json_texts(values, _json_id)]
    flat = list(chain.from_iterable(values))
    kinds = set(map(type, flat))
    inner = None
    if kinds <= {int}:
        inner = _ints(flat)
    elif kinds == {str}:
        inner = pa.array(list(map(encode_basestring_ascii, flat)), pa.string())
    if inner is None:
        return [json_texts(values, _json_id)]
    offsets = np.zeros(len(values) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, values), np.int64, len(values)), out=offsets[1:])
    return ["[", pc.binary_join(pa.LargeListArray.from_arrays(int64_array(offsets), inner), ", "),
            "]"]


def time_pieces(ts: Sequence[Any] | np.ndarray[Any, Any], time: TimeInfo, *, json: bool = True) -> list[Piece]:
    """The output text of each internal timestamp, as pieces: ``time.to_output`` as JSON (ISO
    text in quotes, or a number), or with ``json=False`` the bare text (what ``str`` gives, for
    CSV)."""
    try:
        us = int64_array(ts) if isinstance(ts, np.ndarray) and ts.dtype.kind == "i" \
            else pa.array(ts, pa.int64())
    except (OverflowError, pa.ArrowException, TypeError):
        raise Unformattable("a time is not an int64") from None
    if us.null_count:
        raise Unformattable("a time is missing")
    a = us.to_numpy()
    if time.kind == "datetime":
        if len(a) and (a.min() < _MIN_US or a.max() > _MAX_US):
            raise Unformattable("a time outside years 1..9999")
        # Arrow's text is "YYYY-MM-DD HH:MM:SS.ffffff"; isoformat has a T and drops a zero
        # fraction.
        text = pc.replace_substring(us.cast(pa.timestamp("us")).cast(pa.string()), " ", "T",
                                    max_replacements=1)
        whole = a % 1_000_000 == 0
        if whole.all():
            text = pc.utf8_slice_codeunits(text, 0, 19)
        elif whole.any():
            text = pc.if_else(bool_array(whole), pc.utf8_slice_codeunits(text, 0, 19), text)
        suffix = "+00:00" if time.tz is not None else ""
        return ['"', text, suffix + '"'] if json else [text, suffix]
    unit = time.unit_us
    q, r = np.divmod(a, unit)
    if not r.any():
        return [int64_array(q).cast(pa.string())]
    return [pa.array([str(int(t) // unit) if t % unit == 0 else repr(int(t) / unit)
                      for t in a.tolist()], pa.string())]


def _key_text(name: str) -> str:
    return encode_basestring_ascii(name)


def uniform_keys(maps: Sequence[Mapping[str, Any]]) -> tuple[str, ...] | None:
    """The keys, in order, shared by every mapping; None when they differ."""
    if not maps:
        return None
    first = tuple(maps[0])
    if not all(type(k) is str for k in first):
        return None
    return first if all(map(first.__eq__, map(tuple, maps))) else None


def bindings_pieces(bindings: Sequence[Mapping[str, Any]],
                    names: tuple[str, ...]) -> list[Piece]:
    """The text between the braces of ``"match"``, as pieces, for bindings that all have the
    variables ``names`` in that order."""
    pieces: list[Piece] = []
    for j, name in enumerate(names):
        col = list(map(itemgetter(name), bindings))
        pieces.append(("" if j == 0 else ", ") + _key_text(name) + ": ")
        if type(col[0]) is tuple:
            pieces += id_list_pieces(col)
        else:
            pieces.append(json_texts(col, _json_id))
    return pieces


def values_pieces(values: Sequence[Mapping[str, Any]], names: tuple[str, ...]) -> list[Piece]:
    """The ``"values"`` object, braces included, for RETURN values that all have the fields
    ``names`` in that order."""
    if not names:
        return ["{}"]
    pieces: list[Piece] = ["{"]
    for j, name in enumerate(names):
        pieces.append(("" if j == 0 else ", ") + _key_text(name) + ": ")
        pieces.append(json_texts(list(map(itemgetter(name), values))))
    pieces.append("}")
    return pieces


def join(pieces: list[Piece], n: int) -> pa.Array:
    """Concatenate the pieces element-wise (adjacent constants merged first)."""
    merged: list[Piece] = []
    for p in pieces:
        if isinstance(p, str) and merged and isinstance(merged[-1], str):
            merged[-1] += p
        else:
            merged.append(p)
    if not any(isinstance(p, pa.Array) for p in merged):
        return pa.array(["".join(p for p in merged if isinstance(p, str))] * n, pa.string())
    return pc.binary_join_element_wise(*merged, "")


def query_texts(matches: Sequence[Match]) -> Piece:
    """The JSON text of each match's query name (a constant when there is one name)."""
    names = set(map(attrgetter("query"), matches))
    if len(names) == 1:
        (name,) = names
        return encode_basestring_ascii(name) if type(name) is str else json_value(name)
    return json_texts(list(map(attrgetter("query"), matches)))


def jsonl_lines(matches: Sequence[Match], time: TimeInfo) -> pa.Array:
    """Each match's JSON Lines line, newline included, as one Arrow string array.

    Raises :class:`Unformattable` when the matches' variables or RETURN fields are not the same
    (in the same order) for all of them, or a time cannot be formatted here: the caller then
    formats them one by one."""
    n = len(matches)
    if n == 0:
        return pa.array([], pa.string())
    binds = list(map(attrgetter("bindings"), matches))
    names = uniform_keys(binds)
    if names is None:
        raise Unformattable("the matches bind different variables")
    vals: list[Mapping[str, Any]] = []
    fields: tuple[str, ...] | None = ()
    if any(map(attrgetter("values"), matches)):
        vals = list(map(attrgetter("values"), matches))
        fields = uniform_keys(vals)
        if fields is None:
            raise Unformattable("the matches return different fields")
    times = time_pieces(list(map(attrgetter("start"), matches))
                        + list(map(attrgetter("end"), matches)), time)
    starts = [p if isinstance(p, str) else p.slice(0, n) for p in times]
    ends = [p if isinstance(p, str) else p.slice(n) for p in times]
    pieces: list[Piece] = ['{"query": ', query_texts(matches), ', "match": {']
    pieces += bindings_pieces(binds, names)
    pieces += ['}, "start": ', *starts, ', "end": ', *ends, ', "values": ']
    pieces += values_pieces(vals, fields or ())
    pieces.append("}\n")
    return join(pieces, n)


def _column_texts(mc: MatchColumns) -> list[Piece]:
    """The text between the braces of ``"match"`` of column part ``mc``, as pieces; raises
    :class:`Unformattable` when its ids are not int64 (or not all ``str``)."""
    ids = mc.ids
    text: Any = None
    if isinstance(ids, np.ndarray) and ids.dtype == np.int64:
        pass  # each variable's ids taken first, then cast (only the rows a match binds)
    else:
        vals = list(ids)
        if not vals:
            raise Unformattable("no ids")
        kinds = set(map(type, vals))
        if kinds == {int}:
            arr = _ints(vals)
            if arr is None:
                raise Unformattable("an id beyond int64")
            text = arr
        elif kinds == {str}:
            text = pa.array(list(map(encode_basestring_ascii, vals)), pa.string())
        else:
            raise Unformattable("ids of another type")
    pieces: list[Piece] = []
    items = mc.items or (None,) * len(mc.lo)
    for j, (name, lo, hi, it) in enumerate(zip(mc.names, mc.lo, mc.hi, items, strict=True)):
        pieces.append(("" if j == 0 else ", ") + _key_text(name) + ": ")
        if hi is None:
            pieces.append(_take_text(ids, text, lo))
            continue
        counts = hi - lo
        offsets = np.zeros(len(lo) + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        total = int(offsets[-1])
        # the rows of every list, flattened: lo[k], lo[k]+1, ..., hi[k]-1 for each k
        flat = np.repeat(lo - offsets[:-1], counts) + np.arange(total, dtype=np.int64)
        if it is not None:  # list offsets into a flat array of rows
            flat = it[flat]
        inner = _take_text(ids, text, flat)
        pieces += ["[", pc.binary_join(pa.LargeListArray.from_arrays(int64_array(offsets), inner),
                                       ", "), "]"]
    return pieces


def _take_text(ids: Any, text: pa.Array | None, rows: np.ndarray[Any, Any]) -> pa.Array:
    """The JSON texts of ``ids[rows]`` (int64 ids: cast after the take)."""
    if text is None:
        taken = ids[rows]
        return (int64_array(taken) if taken.dtype == np.int64 else pa.array(taken)
                ).cast(pa.string())
    return text.take(int64_array(rows))


def jsonl_column_lines(mc: MatchColumns, time: TimeInfo) -> pa.Array:
    """:func:`jsonl_lines` of a column part (:class:`~kleene.events.matchtable.MatchColumns`,
    no RETURN values): the same text, without a ``Match`` object per match."""
    n = len(mc)
    if n == 0:
        return pa.array([], pa.string())
    times = time_pieces(np.concatenate([mc.start, mc.end]), time)
    starts = [p if isinstance(p, str) else p.slice(0, n) for p in times]
    ends = [p if isinstance(p, str) else p.slice(n) for p in times]
    q = encode_basestring_ascii(mc.query) if type(mc.query) is str else json_value(mc.query)
    pieces: list[Piece] = ['{"query": ', q, ', "match": {']
    pieces += _column_texts(mc)
    pieces += ['}, "start": ', *starts, ', "end": ', *ends, ', "values": {}}\n']
    return join(pieces, n)


def column_match_texts(mc: MatchColumns) -> pa.Array:
    """:func:`match_texts` of a column part (the CSV and Parquet ``match`` cell, braces
    included), from its ids; raises :class:`Unformattable` as :func:`jsonl_column_lines`."""
    return join(["{", *_column_texts(mc), "}"], len(mc))


def match_texts(matches: Sequence[Match], bindings_text: Callable[[Any], str]) -> pa.Array:
    """The bindings' JSON object of each match (the CSV and Parquet ``match`` cell);
    ``bindings_text`` formats one match's bindings when they differ in shape."""
    binds = list(map(attrgetter("bindings"), matches))
    names = uniform_keys(binds)
    if names is None:
        return pa.array(["{" + bindings_text(b) + "}" for b in binds], pa.string())
    return join(["{", *bindings_pieces(binds, names), "}"], len(binds))


def row_keys(value_keys: Sequence[str]) -> dict[str, str]:
    """The flat row's column of each RETURN field (``values.<name>`` when the name is taken),
    as :func:`kleene.events.writers._flat` names them: column -> field."""
    row: dict[str, str | None] = dict.fromkeys(("query", "start", "end", "match"))
    for k in value_keys:
        row[k if k not in row else f"values.{k}"] = k
    return {c: k for c, k in row.items() if k is not None}


def _csv_quote_chars() -> str:
    """The characters that make Python's csv module quote a cell (lineterminator "\n")."""
    import csv
    import io

    found = []
    for c in "\n\r,\"\t ;":
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow(["x" + c, "y"])
        if buf.getvalue().startswith('"'):
            found.append(c)
    return "".join(found)


_CSV_QUOTE: str | None = None


def csv_quote(texts: pa.Array) -> pa.Array:
    """Cells as Python's csv writer writes them (QUOTE_MINIMAL, doubled quotes)."""
    global _CSV_QUOTE
    if _CSV_QUOTE is None:
        _CSV_QUOTE = _csv_quote_chars()
    pattern = "[" + "".join("\\" + c if c in "\\]^-" else c for c in _CSV_QUOTE) + "]"
    need = pc.match_substring_regex(texts, pattern)
    if not pc.any(need).as_py():
        return texts
    quoted = pc.binary_join_element_wise('"', pc.replace_substring(texts, '"', '""'), '"', "")
    return pc.if_else(need, quoted, texts)


def _csv_float(x: float) -> str:
    return float.__repr__(x)  # inf, -inf, nan: what Python's csv writer writes


def _csv_none(_: None) -> str:
    return ""


_CSV_TEXT: dict[type, Callable[[Any], str]] = {
    int: int.__repr__, str: str.__str__, float: _csv_float, bool: bool.__repr__,
    type(None): _csv_none,
}
"""Exact types whose CSV cell is known (the csv module writes ``str(v)``, nothing for None;
non-finite floats as ``inf``, ``-inf``, ``nan``)."""


def csv_cell(value: Any) -> str:
    """The reference CSV cell of one RETURN value (before quoting)."""
    from .writers import csv_cells

    v = csv_cells({"v": value})["v"]
    return "" if v is None else str(v)


def csv_texts(values: Sequence[Any]) -> pa.Array:
    """The CSV cell of each value, before quoting."""
    kinds = set(map(type, values))
    if kinds == {int}:
        arr = _ints(values)
        if arr is not None:
            return arr
    if kinds == {str}:
        return pa.array(values, pa.string())
    if len(kinds) == 1:
        (kind,) = kinds
        known = _CSV_TEXT.get(kind)
        if known is not None:
            return pa.array(list(map(known, values)), pa.string())
    texts = _CSV_TEXT
    return pa.array([texts.get(type(v), csv_cell)(v) for v in values], pa.string())


def csv_lines(matches: Sequence[Match], time: TimeInfo, header: Sequence[str],
              bindings_text: Callable[[Any], str]) -> pa.Array:
    """Each match's CSV line under ``header`` (a match's cell of a column it lacks is empty,
    one of a column not in the header is left out here: :class:`kleene.events.writers.
    CsvWriter` refuses such a match first), newline included.

    Raises :class:`Unformattable` when the matches' RETURN fields differ, or a time cannot be
    formatted here."""
    n = len(matches)
    vals = list(map(attrgetter("values"), matches))
    fields: tuple[str, ...] | None = ()
    if any(vals):
        fields = uniform_keys(vals)
        if fields is None:
            raise Unformattable("the matches return different fields")
    columns = row_keys(fields or ())
    times = time_pieces(list(map(attrgetter("start"), matches))
                        + list(map(attrgetter("end"), matches)), time, json=False)
    pieces: list[Piece] = []
    for j, col in enumerate(header):
        if j:
            pieces.append(",")
        if col == "query":
            q = query_texts(matches)
            names = list(map(attrgetter("query"), matches))
            pieces.append(csv_quote(csv_texts(names)) if isinstance(q, pa.Array)
                          else csv_quote(pa.array([names[0]], pa.string()))[0].as_py())
        elif col in ("start", "end"):
            part = slice(0, n) if col == "start" else slice(n, 2 * n)
            pieces += [p if isinstance(p, str) else p[part] for p in times]
        elif col == "match":
            pieces.append(csv_quote(match_texts(matches, bindings_text)))
        elif col in columns:
            pieces.append(csv_quote(csv_texts(list(map(itemgetter(columns[col]), vals)))))
    pieces.append("\n")
    return join(pieces, n)


def csv_column_lines(mc: MatchColumns, time: TimeInfo, header: Sequence[str]) -> pa.Array:
    """:func:`csv_lines` of a column part (no RETURN values: a column other than query,
    start, end and match is empty)."""
    n = len(mc)
    if n == 0:
        return pa.array([], pa.string())
    times = time_pieces(np.concatenate([mc.start, mc.end]), time, json=False)
    pieces: list[Piece] = []
    for j, col in enumerate(header):
        if j:
            pieces.append(",")
        if col == "query":
            pieces.append(csv_quote(pa.array([mc.query], pa.string()))[0].as_py())
        elif col in ("start", "end"):
            part = slice(0, n) if col == "start" else slice(n, 2 * n)
            pieces += [p if isinstance(p, str) else p[part] for p in times]
        elif col == "match":
            pieces.append(csv_quote(column_match_texts(mc)))
    pieces.append("\n")
    return join(pieces, n)


def utf8_bytes(texts: pa.Array) -> memoryview:
    """The concatenated UTF-8 bytes of a string array (no copy)."""
    bufs = texts.buffers()
    width = np.int64 if pa.types.is_large_string(texts.type) else np.int32
    offsets = np.frombuffer(bufs[1], dtype=width)
    start = int(offsets[texts.offset])
    end = int(offsets[texts.offset + len(texts)])
    if bufs[2] is None:
        return memoryview(b"")
    return memoryview(bufs[2])[start:end]


__all__ = ["Unformattable", "column_match_texts", "csv_lines", "json_texts", "jsonl_lines",
           "match_texts", "row_keys", "time_pieces", "utf8_bytes"]
