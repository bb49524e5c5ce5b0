"""Reading CSV files with kleene's own reader inside Spark tasks (``kleene run --spark``).

Spark's CSV source parses in the JVM; for the keyed Aarhus query that parse was the largest
single cost of the pipeline (13-16 of its 21-24 JVM CPU seconds, plus JIT warm-up in a fresh
process), while pyarrow's C++ parser, which the embedded reader uses, reads the same two gzip
files in about 3.5 CPU seconds. So for local CSV input the Spark CLI reads each file in a Spark
task with :class:`kleene.events.readers.EventStream`, and the events are, by construction, the
embedded CLI's: the same type inference (decided once on the driver from the first rows of the
first file, as one stream over all the files decides it), the same time parsing (ISO-8601,
``--time-format``, epoch numbers), the same checks and the same error messages naming file,
row and column.

Two small jobs: one task per file counts its rows (:func:`count_csv_rows`: the ids of a file
continue from the rows of the files before it), then one task per file reads it and yields
Arrow batches of the columns the query needs, each row with its input row index. Spark
schedules and distributes these tasks like any scan (a file is read where its task runs, so a
cluster needs the path on every worker, as Spark's own reader does for local paths).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InputError
from ..events.model import ID
from ..events.readers import (
    Decisions,
    EventStream,
    ReadOptions,
    count_csv_rows,
    normalise_type,
)
from ..frozen import dataclass

_PATH_INDEX = "id"
"""The column of ``spark.range``: the file's index, one per partition."""


@dataclass(frozen=True, slots=True)
class CountTask:
    """Executor side: the row count of each file index it receives."""

    files: tuple[str, ...]
    options: ReadOptions
    cwd: str | None = None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            idx = b.column(0).to_pylist()
            rows, blank = [], []
            for i in idx:
                with _shown_as(self.files[i]):
                    ids, empty = count_csv_rows(_at(self.cwd, self.files[i]), self.options)
                rows.append(ids)
                blank.append(empty)
            yield pa.RecordBatch.from_arrays(
                [pa.array(idx, pa.int64()), pa.array(rows, pa.int64()),
                 pa.array(blank, pa.int64())], ["file", "rows", "blank"])


@dataclass(frozen=True, slots=True)
class ReadTask:
    """Executor side: the events of each file index it receives, as typed Arrow columns
    (``columns``, in the types of ``schema``) plus ``row_col``, the input row index."""

    files: tuple[str, ...]
    bases: tuple[int, ...]
    options: ReadOptions
    decisions: Decisions
    columns: tuple[str, ...]
    row_col: str
    schema: pa.Schema
    cwd: str | None = None
    """The driver's working directory: relative paths are resolved against it."""
    absent: frozenset[str] = frozenset()
    """Columns the query reads that the first file lacks (NULL for every event): a later file
    that has one is an error, since its values would be lost."""
    skipped: Any = None
    """With ``on_bad_row="skip"``: a Spark accumulator (:class:`~kleene.spark.tasks.ByKey`)
    that receives, per file index, (rows skipped, the first messages)."""

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for i in b.column(0).to_pylist():
                yield from self._read(i)

    def _read(self, i: int) -> Iterator[pa.RecordBatch]:
        # the task opens the absolute path (an executor's working directory is not the
        # driver's) and names the file as the user gave it
        shown = self.files[i]
        with _shown_as(shown):
            yield from self._read_file(i, _at(self.cwd, shown), shown, self.bases[i])

    def _read_file(self, i: int, path: str, shown: str, base: int) -> Iterator[pa.RecordBatch]:
        with EventStream(path, self.options, sort_chunks=False,
                         decisions=self.decisions) as stream:
            yield from self._batches(stream, shown, base)
            if self.skipped is not None:
                report = stream.report
                self.skipped.add({i: (report.skipped, tuple(
                    e.replace(path, shown, 1) for e in report.bad_examples))})

    def _batches(self, stream: EventStream, shown: str, base: int) -> Iterator[pa.RecordBatch]:
        for events in stream:
            table = events.table
            late = sorted(self.absent.intersection(table.column_names))
            if late:
                raise InputError(
                    f"has column(s) {', '.join(map(repr, late))}, which the query reads but "
                    "the first file of the input does not have; give every file the first "
                    "file's columns (or run without --spark)", path=shown)
            arrays = []
            for name in self.columns:
                if name not in table.column_names:
                    raise InputError(f"column {name!r} is missing from this file (the first "
                                     "file of the input has it)", path=shown)
                col = table.column(name).combine_chunks()
                want = self.schema.field(name).type
                if col.type != want:
                    raise InputError(
                        f"holds {want} values in the first rows of the input but {col.type} "
                        f"from row {int(table.column(ID)[0].as_py()) + 1} of this file on; "
                        f"pass --column-type {name}=TYPE to fix its type",
                        path=shown, column=name)
                arrays.append(col)
            arrays.append(pc.add(table.column(ID).combine_chunks(),
                                 pa.scalar(base, pa.int64())))
            yield pa.RecordBatch.from_arrays(arrays, schema=self.schema)


@contextlib.contextmanager
def _shown_as(shown: str) -> Iterator[None]:
    """Errors name the file as the user gave it, not the absolute path the task opened."""
    try:
        yield
    except InputError as e:
        if e.path is None or e.path == shown:
            raise
        raise InputError(e.reason, path=shown, row=e.row, column=e.column) from None


def _at(cwd: str | None, path: str) -> str:
    return path if cwd is None or os.path.isabs(path) else os.path.join(cwd, path)


def decide(files: Sequence[str], options: ReadOptions) -> Decisions:
    """The reader's decisions (column types, time column and parsing) for the whole input:
    made from the first rows of the first file that has rows, as one stream over all the
    files makes them."""
    for path in files:
        with EventStream(path, options, sort_chunks=False) as stream:
            next(stream, None)
            if stream.decisions is not None:
                return stream.decisions
    raise InputError("no events: the input is empty", path=files[0])


def read_csv(spark: Any, files: Sequence[str], options: ReadOptions, *,
             attributes: Sequence[str] | None, row_col: str,
             skipped: Any = None) -> tuple[Any, int, int]:
    """The events of local CSV ``files`` as a DataFrame read by kleene's reader in Spark tasks,
    and their number of rows.

    Columns: the time column (a timestamp, or the epoch numbers as read), the type and id
    columns when ``options`` names them, the ``attributes`` that exist in the input (``None``:
    every column), each typed as the embedded reader types it, and ``row_col``: the 0-based
    input row index, continuing from one file to the next; then the number of rows and of
    empty lines (no rows, but each takes an index, as in the embedded reader). With ``options.on_bad_row`` =
    ``skip``, ``skipped`` (a :class:`~kleene.spark.tasks.ByKey` accumulator) receives per file
    index the number of rows skipped and the first messages."""
    from pyspark.sql.pandas.types import from_arrow_schema

    files = tuple(files)
    cwd = os.getcwd()
    d = decide(files, options)
    # the ids come from the row index; a user id column stays a column (match() reads it)
    task_options = replace(options, id_col=None)
    counts = {int(r[0]): (int(r[1]), int(r[2])) for r in
              spark.range(0, len(files), 1, len(files))
              .mapInArrow(CountTask(files, task_options, cwd), "file long, rows long, blank long")
              .collect()}
    bases, total, blank = [], 0, 0
    for i in range(len(files)):
        bases.append(total)
        total += counts[i][0]
        blank += counts[i][1]
    if total == blank:
        raise InputError("no events: the input is empty", path=files[0])
    type_col = (options.type_col or "type") if options.event_type is None else None
    wanted = {d.time_col, type_col, options.id_col}
    names = [c for c in d.types if attributes is None or c in wanted or c in attributes]
    # the decided types are the reader's (the time column's is the parsed time's)
    schema = pa.schema([pa.field(c, normalise_type(d.types[c])) for c in names]
                       + [pa.field(row_col, pa.int64())])
    absent = frozenset(attributes or ()) - set(d.types)
    task = ReadTask(files, tuple(bases), task_options, d, tuple(names), row_col, schema, cwd,
                    absent, skipped)
    df = spark.range(0, len(files), 1, len(files)).mapInArrow(task, from_arrow_schema(schema))
    return df, total - blank, blank


__all__ = ["CountTask", "ReadTask", "decide", "read_csv"]
