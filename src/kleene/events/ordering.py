"""Ordering and id checks shared by every source: out-of-order counting per chunk, the full
stable time sort of a bounded input, and the uniqueness of an id column."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InputError
from .model import ID, TS


class Disorder:
    """Counts rows behind an earlier timestamp (in input order) across chunks.

    Example:
        >>> d = Disorder()
        >>> t = d.order(pa.table({"__ts": [3, 1, 2]}), sort=True)
        >>> t.column("__ts").to_pylist(), d.out_of_order
        ([1, 2, 3], 2)
    """

    def __init__(self) -> None:
        self.out_of_order = 0
        self._max_ts: int | None = None

    def order(self, table: pa.Table, *, sort: bool) -> pa.Table:
        """Count the chunk's late rows; with ``sort``, sort the chunk stably by time."""
        # a row is out of order when an earlier row (in input order) has a later timestamp
        ts = table.column(TS).to_numpy()
        if not len(ts):
            return table
        if (self._max_ts is None or ts[0] >= self._max_ts) and not (ts[1:] < ts[:-1]).any():
            self._max_ts = int(ts[-1])  # in order (the usual case: no running maximum)
            return table
        running = np.maximum.accumulate(ts)
        before = np.empty_like(ts)
        before[0] = self._max_ts if self._max_ts is not None else np.iinfo(np.int64).min
        before[1:] = running[:-1]
        if self._max_ts is not None:
            np.maximum(before, self._max_ts, out=before)
        ooo = int(np.count_nonzero(ts < before))
        self._max_ts = int(max(running[-1], before[0]))
        self.out_of_order += ooo
        if ooo and sort:
            table = table.take(pa.array(np.argsort(ts, kind="stable")))
        return table


def sort_by_time(table: pa.Table) -> pa.Table:
    """``table`` ordered by (timestamp, position): a stable sort on ``__ts`` when needed."""
    ts = table.column(TS).to_numpy()
    if np.any(ts[1:] < ts[:-1]):
        table = table.take(pa.array(np.argsort(ts, kind="stable")))
    return table


def check_unique_ids(table: pa.Table, id_col: str, source: str) -> None:
    """Ids name events in matches, so an id column must not repeat a value."""
    ids = table.column(ID)
    if pa.types.is_integer(ids.type) and ids.null_count == 0 and _increasing(ids):
        return  # strictly increasing (the usual row ids)
    if pc.count_distinct(ids).as_py() == len(ids):
        return
    ordered = ids.take(pc.sort_indices(ids))
    same = pc.equal(ordered.slice(1), ordered.slice(0, len(ordered) - 1))
    k = int(np.flatnonzero(same.to_numpy(zero_copy_only=False))[0])
    raise InputError(f"the id column repeats the value {ordered[k].as_py()!r}; ids must be "
                     "unique (omit --id-col to use row numbers)", path=source, column=id_col)


def _increasing(col: pa.ChunkedArray) -> bool:
    """Whether an integer column without NULLs increases strictly, chunk by chunk (no copy
    of the column)."""
    last: int | None = None
    for chunk in col.chunks:
        if not len(chunk):
            continue
        arr = chunk.to_numpy()
        if (last is not None and arr[0] <= last) or bool(np.any(arr[1:] <= arr[:-1])):
            return False
        last = int(arr[-1])
    return True


def concat(tables: list[pa.Table]) -> pa.Table:
    """Chunks of one input as one table (a column widened in a later chunk is promoted).
    The chunks stay chunks: no copy (a copy of every column costs more than parsing them,
    mostly in fresh memory); the engines read chunked columns."""
    try:
        return pa.concat_tables(tables, promote_options="permissive")
    except pa.ArrowException as e:
        raise InputError(f"chunks of the input disagree on column types: {e}") from None


__all__ = ["Disorder", "check_unique_ids", "concat", "sort_by_time"]
