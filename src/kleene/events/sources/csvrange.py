"""One byte range of a plain CSV file, read as the whole file's reader reads it (issue 15:
keyed workers that each read their own part of the input).

A CSV row is one line (:mod:`.csvfile`: a quoted value cannot hold a line break), so a file
cut at line starts reads, part by part, into the rows of the whole file: the header line
followed by the lines of ``[start, end)`` is parsed by the same blocks and parser as
:class:`~.csvfile.CsvSource`. Ids count from 0 in each part (the caller adds the ids the
parts before it took: :attr:`CsvRangeSource` gives them through its stream's report, rows
and blank lines). Only an uncompressed regular file can be cut so.

Example:
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp(); p = os.path.join(d, "x.csv")
    >>> _ = open(p, "w").write("ts,v\\n" + "".join(f"{i},{i}\\n" for i in range(10)))
    >>> head, parts = csv_byte_ranges(p, ReadOptions(), 2)
    >>> head, [(s, e) for s, e in parts]
    (b'ts,v\\n', [(5, 25), (25, 45)])
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

from ..options import ReadOptions
from .base import _CODECS, STDIN, Raw, sniff_codec, split
from .csvfile import CsvSource, parse_csv

_HEAD_MAX = 1 << 20
"""Longest header line a file may have to be cut (a longer one: read as one part)."""


def csv_byte_ranges(path: str, options: ReadOptions, parts: int
                    ) -> tuple[bytes, list[tuple[int, int]]] | None:
    """The header line (with its line break) and up to ``parts`` byte ranges of about equal
    size that start at line starts and cover every line after the header; None when the
    input cannot be cut (not one uncompressed CSV file, a header longer than 1 MiB)."""
    fmt = (options.format or "").lower()
    if (path == STDIN or fmt not in ("", "csv") or not os.path.isfile(path)
            or os.path.splitext(path)[1].lower() in _CODECS
            or os.path.splitext(path)[1].lower() not in CsvSource.extensions and not fmt):
        return None
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(_HEAD_MAX)
        if sniff_codec(head[:4]) is not None:
            return None
        nl = head.find(b"\n")
        if nl < 0:
            return None
        first = nl + 1
        cuts = [first]
        for k in range(1, parts):
            at = max(first, size * k // parts)
            if at <= cuts[-1]:
                continue
            f.seek(at - 1)  # a cut right after a line break is a line start
            data = f.read(1 << 16)
            while data:
                j = data.find(b"\n")
                if j >= 0:
                    at += j
                    break
                at += len(data)
                data = f.read(1 << 16)
            if not data or at >= size:
                break
            if at > cuts[-1]:
                cuts.append(at)
    cuts.append(size)
    ranges = [(s, e) for s, e in zip(cuts, cuts[1:], strict=False) if e > s]
    return head[:first], ranges


class _Range(io.RawIOBase):
    """``head`` followed by the bytes ``[start, end)`` of the file at ``path``."""

    def __init__(self, path: str, head: bytes, start: int, end: int) -> None:
        super().__init__()
        self.head = head
        self.at = 0
        self.f: io.BufferedReader = open(path, "rb")  # noqa: SIM115 (closed with the stream)
        self.f.seek(start)
        self.left = end - start

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self.at < len(self.head):
            n = min(len(b), len(self.head) - self.at)
            b[:n] = self.head[self.at:self.at + n]
            self.at += n
            return n
        want = min(len(b), self.left)
        if want <= 0:
            return 0
        n = self.f.readinto(memoryview(b)[:want]) or 0
        self.left -= n
        return n

    def close(self) -> None:
        self.f.close()
        super().close()


class CsvRangeSource(CsvSource):
    """The lines ``[start, end)`` of a CSV file (after its header ``head``) as raw chunks,
    cut to ``batch_size`` rows; ids count from 0 in the range."""

    def __init__(self, path: str, options: ReadOptions, head: bytes, start: int,
                 end: int) -> None:
        super().__init__(path, options)
        self.head = head
        self.start = start
        self.end = end

    def use_types(self, types: Mapping[str, pa.DataType]) -> None:
        """The decided column types (see :class:`~.base.TypedSource`)."""
        self.types.update(types)

    def chunks(self) -> Iterator[Raw]:
        return split(self._chunks(), self.options.batch_size)

    def _chunks(self) -> Iterator[Raw]:
        # the Python file itself, not wrapped in pa.PythonFile: the blocks are read into
        # their buffers (readinto), where Arrow's wrapper would copy every block twice more
        stream = _Range(self.path, self.head, self.start, self.end)
        return parse_csv(stream, self.path, self.options, self.types, sample=False)


__all__ = ["CsvRangeSource", "csv_byte_ranges"]
