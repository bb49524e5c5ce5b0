"""Input sources: one module per format and one registry.

:data:`FILE_SOURCES` maps a format name to its :class:`~.base.FileSource` class; the class
names the file extensions it is chosen for. Adding a format is one module with a
``FileSource`` subclass plus one line here (see docs/architecture.md, "Adding a source").
In-memory inputs (Arrow, pandas, dicts) are in :mod:`.memory`.

Example:
    >>> detect_format("data/flights.csv.gz"), detect_format("x.ndjson")
    ('csv', 'jsonl')
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import pyarrow as pa

from ...errors import InputError
from ..options import ReadOptions
from .base import COMPRESSIONS, STDIN, FileSource, Raw, Source, TypedSource, renamed, split
from .csvfile import CsvSource
from .jsonl import JsonlSource
from .memory import memory_source
from .parquet import ParquetSource

FILE_SOURCES: dict[str, type[FileSource]] = {
    "csv": CsvSource,
    "jsonl": JsonlSource,
    "parquet": ParquetSource,
}
"""Format name -> source class: the one registry of file formats."""

ALIASES = {"json": "jsonl"}
"""Other names accepted for ``--input-format``."""


def detect_format(path: str) -> str:
    """The input format from a file name (``.csv``, ``.csv.gz``, ``.tsv``, ``.jsonl``, ...)."""
    name = os.path.basename(path).lower()
    for comp in COMPRESSIONS:
        if name.endswith(comp):
            name = name[: -len(comp)]
            break
    ext = os.path.splitext(name)[1]
    for fmt, cls in FILE_SOURCES.items():
        if ext in cls.extensions:
            return fmt
    shown = ext or "(no extension)"
    known = ", ".join(e for cls in FILE_SOURCES.values()
                      for e in (cls.documented or cls.extensions))
    raise InputError(f"unknown file format {shown}; kleene reads {known} (optionally .gz); "
                     f"pass --input-format {'|'.join(FILE_SOURCES)}", path=path)


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


class FilesSource:
    """One file, several files read as one input (ids continue from one file to the next),
    or standard input; chunks are cut to ``batch_size`` rows."""

    def __init__(self, name: str, files: list[str], cls: type[FileSource], options: ReadOptions,
                 tracker: list[IO[bytes]]) -> None:
        self.name = "<stdin>" if files == [STDIN] else name
        self.format = cls.format
        self.files = files
        self.cls = cls
        self.options = options
        self.tracker = tracker
        self.types: dict[str, pa.DataType] = {}

    def use_types(self, types: Mapping[str, pa.DataType]) -> None:
        """The decided column types, for every file of the input (see :class:`TypedSource`)."""
        self.types.update(types)

    def _open(self, path: str) -> FileSource:
        source = self.cls(path, self.options, self.tracker)
        source.types = self.types  # shared: filled in after the first chunk
        return source

    def chunks(self) -> Iterator[Raw]:
        opts = self.options
        if len(self.files) == 1:
            chunks = split(self._open(self.files[0]).chunks(), opts.batch_size)
            yield from (renamed(chunks, self.name) if self.files == [STDIN] else chunks)
            return
        offset = 0
        for f in self.files:
            for raw in split(self._open(f).chunks(), opts.batch_size):
                raw.ids = raw.ids + offset
                raw.offset, raw.source = offset, f
                yield raw
                offset += raw.rows + raw.blank


def file_source(path: str, options: ReadOptions, tracker: list[IO[bytes]]) -> FilesSource:
    """The source for a path (a file, directory, glob or ``-``) and its format."""
    if path == STDIN and options.format is None:
        raise InputError("reading standard input (--input -) needs --input-format "
                         f"{'|'.join(FILE_SOURCES)}", path="<stdin>")
    files = [path] if path == STDIN else list_files(path)
    fmt = (options.format or detect_format(files[0])).lower()
    fmt = ALIASES.get(fmt, fmt)
    if fmt not in FILE_SOURCES:
        raise InputError(f"unknown input format {fmt!r}; use {_one_of(list(FILE_SOURCES))}",
                         path=path)
    if options.format is None:
        for f in files[1:]:
            if detect_format(f) != fmt:
                raise InputError(f"the input mixes formats: {files[0]} is {fmt}, {f} is "
                                 f"{detect_format(f)}; pass one format", path=path)
    return FilesSource(path, files, FILE_SOURCES[fmt], options, tracker)


def _one_of(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def open_source(obj: Any, options: ReadOptions, tracker: list[IO[bytes]]) -> Source:
    """The source for anything :func:`kleene.read_events` accepts."""
    if isinstance(obj, (str, os.PathLike)):
        return file_source(os.fspath(obj), options, tracker)
    if isinstance(obj, FileSource):  # a source already made (e.g. a part of a file)
        return obj
    src = memory_source(obj, options.batch_size)
    if src is None:
        raise InputError(f"cannot read events from a {type(obj).__name__}; pass a file path, "
                         "a pandas DataFrame, a pyarrow Table or batches, or an iterable of "
                         "dicts")
    return src


__all__ = ["ALIASES", "FILE_SOURCES", "FileSource", "FilesSource", "Raw", "STDIN", "Source",
           "TypedSource",
           "detect_format", "file_source", "list_files", "open_source"]
