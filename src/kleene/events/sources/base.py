"""What every source shares: the raw chunk a source yields (:class:`Raw`), the
:class:`Source` protocol, the :class:`FileSource` base of file formats, and helpers to open
files and standard input."""

from __future__ import annotations

import io
import os
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, Any, ClassVar, Protocol, runtime_checkable

import numpy as np
import pyarrow as pa

from ...errors import InputError
from ...frozen import dataclass
from ..badrows import BadRow
from ..options import ReadOptions

STDIN = "-"
"""The path that means standard input (``--input -``)."""


@dataclass(slots=True)
class Raw:
    """A chunk before conversion. ``ids`` are input row indices of ``table``'s rows."""

    table: pa.Table
    ids: np.ndarray[Any, np.dtype[np.int64]]
    text_cols: frozenset[str]
    """Columns delivered as text, to be typed by inference (every CSV column)."""
    bad: list[BadRow]
    """Rows the source could not turn into a table row (they keep their index)."""
    rows: int
    """Input rows this chunk covers (table rows + rows lost before conversion)."""
    blank: int = 0
    """Empty lines this chunk covers (CSV): not rows, but each takes an id, so an event's id
    is its data line's index whatever blank lines come before it."""
    offset: int = 0
    """Added to ids when several files are read as one input (ids continue across files);
    rows in messages stay per file."""
    source: str | None = None
    """The file this chunk came from, when the input is several files."""
    sample: pa.Table | None = None
    """The whole block this chunk was cut from (on the first piece only): the rows that decide
    column types, so that the decisions do not depend on ``batch_size``."""
    text: Callable[[], pa.Table] | None = None
    """For a chunk whose columns the source parsed straight to their decided types (see
    :class:`TypedSource`): the same rows as text. The reader converts those instead when any
    row of the chunk is bad, so bad rows are found and reported exactly as from text."""


@runtime_checkable
class Source(Protocol):
    """An input as raw chunks in input order: what every format implements.

    ``name`` is shown in messages, ``format`` in the run summary. :meth:`chunks` yields
    :class:`Raw` chunks whose ids count input rows from 0 (bad rows keep their index). Type
    decisions, the bad-row policy, dead letters, ordering and id checks are not a source's
    business: :class:`kleene.events.readers.EventStream` applies them to every source.
    """

    @property
    def name(self) -> str: ...

    @property
    def format(self) -> str: ...

    def chunks(self) -> Iterator[Raw]: ...


@runtime_checkable
class TypedSource(Protocol):
    """A source of text columns that can parse them straight to their types once the first
    chunk has decided them (CSV: Arrow's own number and ISO-8601 parsers, in bulk).

    The reader calls :meth:`use_types` with the decided types of the columns a typed parse
    may produce (int64, float64, ``timestamp[us]`` and ``timestamp[us, UTC]``; the rest stay
    text). A chunk parsed so must hold exactly the values the text conversion gives, and set
    :attr:`Raw.text`; a part that does not parse so is delivered as text, as before."""

    def use_types(self, types: Mapping[str, pa.DataType]) -> None: ...


class FileSource(ABC):
    """A file format: one file (or standard input, ``-``) as raw chunks.

    A subclass sets ``format`` (its name for ``--input-format``) and ``extensions`` (file
    name endings it is chosen for, e.g. ``(".csv", ".tsv")``; a compression suffix such as
    ``.gz`` is removed first) and implements :meth:`chunks`. Register it in
    :data:`kleene.events.sources.FILE_SOURCES`.
    """

    format: ClassVar[str]
    extensions: ClassVar[tuple[str, ...]]
    documented: ClassVar[tuple[str, ...] | None] = None
    """The extensions named in the 'unknown file format' message (default: all)."""

    def __init__(self, path: str, options: ReadOptions,
                 tracker: list[IO[bytes]] | None = None) -> None:
        self.path = path
        self.options = options
        self.tracker: list[IO[bytes]] = [] if tracker is None else tracker
        """Raw files opened, so progress can be read from the last one's position."""
        self.types: dict[str, pa.DataType] = {}
        """Decided column types a source may parse straight to (see :class:`TypedSource`);
        shared by the files of one input, filled in by the reader after the first chunk."""

    @property
    def name(self) -> str:
        return self.path

    @abstractmethod
    def chunks(self) -> Iterator[Raw]:
        """The file's rows as raw chunks in input order."""


_CODECS = {".gz": "gzip", ".bz2": "bz2", ".zst": "zstd", ".lz4": "lz4"}
COMPRESSIONS = tuple(_CODECS)
"""File name endings of compressed files (removed before the format's extension)."""
_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bz2"), (b"\x28\xb5\x2f\xfd", "zstd"),
          (b"\x04\x22\x4d\x18", "lz4"))


def sniff_codec(head: bytes) -> str | None:
    r"""The compression of data that starts with ``head``, from its magic bytes.

    Example:
        >>> sniff_codec(b"\x1f\x8b\x08\x00"), sniff_codec(b"ts,type")
        ('gzip', None)
    """
    for magic, codec in _MAGIC:
        if head.startswith(magic):
            return codec
    return None


def open_stream(path: str, tracker: list[IO[bytes]] | None = None) -> Any:
    """An Arrow input stream over the file, decompressing by extension or, failing that, by
    content (magic bytes). The raw file is appended to ``tracker`` so progress can be read
    from its position (compressed bytes). ``-`` is standard input."""
    if path == STDIN:
        return open_stdin()
    if not os.path.exists(path):
        raise InputError("no such file", path=path)
    if os.path.isdir(path):
        raise InputError("is a directory, not a file", path=path)
    try:
        raw = open(path, "rb")  # noqa: SIM115 (closed with the Arrow stream)
    except OSError as e:
        raise InputError(f"cannot open: {e.strerror}", path=path) from None
    try:
        codec = _CODECS.get(os.path.splitext(path)[1].lower())
        if codec is None:
            codec = sniff_codec(raw.read(4))
            raw.seek(0)
        stream = pa.PythonFile(raw, mode="r")
        if codec is not None:
            stream = pa.CompressedInputStream(stream, codec)
    except (pa.ArrowException, OSError) as e:
        raw.close()
        raise InputError(f"cannot open: {e}", path=path) from None
    if tracker is not None:
        tracker.append(raw)
    return stream


def open_stdin() -> Any:
    """Standard input as an Arrow input stream, decompressed when its first bytes are the
    magic of a compression format (a pipe has no file name to tell)."""
    replay = Replay(sys.stdin.buffer)
    codec = sniff_codec(replay.peek_head(4))
    stream = pa.PythonFile(replay, mode="r")
    return stream if codec is None else pa.CompressedInputStream(stream, codec)


def read_block(stream: Any, size: int, path: str) -> bytes:
    """Up to ``size`` bytes of ``stream``; a read or decompression failure (a truncated or
    corrupt compressed file) is an input error."""
    try:
        data: bytes = stream.read(size)
    except (pa.ArrowException, OSError, EOFError, ValueError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise InputError(f"cannot read: {reason}",
                         path=path) from None
    return data


def read_after(stream: Any, head: bytes, size: int, path: str) -> bytearray:
    """``head`` followed by up to ``size`` bytes of ``stream``, read straight into one buffer
    (no copy to join them); as :func:`read_block`, a failure is an input error."""
    k = len(head)
    buf = bytearray(k + size)
    buf[:k] = head
    view = memoryview(buf)
    n = k
    try:
        while n < len(buf):
            got = stream.readinto(view[n:])
            if not got:
                break
            n += got
    except (pa.ArrowException, OSError, EOFError, ValueError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise InputError(f"cannot read: {reason}", path=path) from None
    finally:
        view.release()
    if n < len(buf):
        del buf[n:]
    return buf


class Replay(io.RawIOBase):
    """Standard input with its first bytes kept: they are peeked, then read again."""

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


def columns(records: Sequence[Mapping[str, Any]],
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


def split(chunks: Iterator[Raw], batch_size: int) -> Iterator[Raw]:
    """Cut text-format chunks (sized in bytes) to at most ``batch_size`` rows."""
    for raw in chunks:
        n = raw.table.num_rows
        if n <= batch_size:
            yield raw
            continue
        text = None if raw.text is None else _Once(raw.text)
        for k, off in enumerate(range(0, n, batch_size)):
            m = min(batch_size, n - off)
            bad = raw.bad if k == 0 else []
            extra = raw.rows - n if k == 0 else 0
            yield Raw(raw.table.slice(off, m), raw.ids[off:off + m], raw.text_cols, bad,
                      m + extra, blank=raw.blank if k == 0 else 0,
                      sample=raw.table if k == 0 else None,
                      text=None if text is None else text.part(off, m))


class _Once:
    """A block's text, parsed at most once for all the pieces it is cut into."""

    def __init__(self, parse: Callable[[], pa.Table]) -> None:
        self.parse = parse
        self.table: pa.Table | None = None

    def part(self, offset: int, length: int) -> Callable[[], pa.Table]:
        def text() -> pa.Table:
            if self.table is None:
                self.table = self.parse()
            return self.table.slice(offset, length)
        return text


def renamed(chunks: Iterator[Raw], name: str) -> Iterator[Raw]:
    """Re-raise input errors of ``chunks`` under a display name (``-`` -> ``<stdin>``)."""
    try:
        yield from chunks
    except InputError as e:
        raise InputError(e.reason, path=name, row=e.row, column=e.column) from None


__all__ = ["COMPRESSIONS", "FileSource", "Raw", "Replay", "STDIN", "Source", "TypedSource",
           "columns", "open_stdin", "open_stream", "read_after", "read_block", "renamed", "sniff_codec", "split"]
