"""CSV and TSV files (plain or compressed): every column as text, typed later by inference."""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from ...errors import InputError
from ..badrows import BadRow
from ..options import ReadOptions
from .base import STDIN, FileSource, Raw, Replay, open_stream, peek


def delimiter_of(path: str, options: ReadOptions) -> str:
    """The delimiter: ``options.delimiter``, else a tab for ``.tsv`` files, else a comma."""
    return options.delimiter or ("\t" if ".tsv" in path.lower() else ",")


def csv_header(head: bytes, path: str, delimiter: str) -> list[str]:
    """The column names from the first bytes of a CSV file."""
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


class CsvSource(FileSource):
    """CSV as text columns. Parsing is multi-threaded; Arrow reports the line of a ragged row
    only when single-threaded, so at the first ragged row the rest of the file is re-read
    single-threaded from the first row not yet yielded (the slow path, only with bad rows)."""

    format = "csv"
    extensions = (".csv", ".tsv", ".txt")
    documented = (".csv", ".tsv")

    def chunks(self) -> Iterator[Raw]:
        import pyarrow.csv as pcsv

        path, opts = self.path, self.options
        delimiter = delimiter_of(path, opts)
        if path == STDIN:  # one pass only: no multi-threaded first try
            replay = Replay(sys.stdin.buffer)
            names = csv_header(replay.peek_head(1 << 16), path, delimiter)

            def open_input() -> Any:
                return pa.PythonFile(replay, mode="r")
        else:
            names = csv_header(peek(path), path, delimiter)

            def open_input() -> Any:
                return open_stream(path, self.tracker)
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
                    yield Raw(table, ids, text_cols, bad, total)
                    start += total
                    if batch is None:
                        return
            finally:
                stream.close()
            threaded = False


def count_csv_rows(path: str, options: ReadOptions) -> int:
    """The rows of a CSV file as the reader numbers them: every row after the header, ragged
    ones included, empty lines not (the ids of the next file of an input start there).
    Parses like :class:`CsvSource` but converts only the first column."""
    import pyarrow.csv as pcsv

    delimiter = delimiter_of(path, options)
    names = csv_header(peek(path), path, delimiter)
    ragged = 0

    def on_invalid(row: Any) -> str:
        nonlocal ragged
        ragged += 1
        return "skip"

    stream = open_stream(path)
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


__all__ = ["CsvSource", "count_csv_rows", "csv_header", "delimiter_of"]
