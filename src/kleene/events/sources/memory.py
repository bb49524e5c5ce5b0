"""In-memory inputs: a pyarrow Table / RecordBatch / RecordBatchReader / iterable of record
batches, a pandas DataFrame, or an iterable of dicts."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from ...errors import InputError
from ..badrows import BadRow
from .base import Raw, Source, columns


class ArrowSource:
    """Arrow tables or record batches, cut to ``batch_size`` rows."""

    def __init__(self, tables: Iterable[Any], batch_size: int, *, name: str = "<arrow table>",
                 format: str = "arrow") -> None:
        self.tables = tables
        self.batch_size = batch_size
        self.name = name
        self.format = format

    def chunks(self) -> Iterator[Raw]:
        start = 0
        for t in self.tables:
            table = pa.Table.from_batches([t]) if isinstance(t, pa.RecordBatch) else t
            for b in table.to_batches(max_chunksize=self.batch_size):
                n = b.num_rows
                yield Raw(pa.Table.from_batches([b]),
                          np.arange(start, start + n, dtype=np.int64), frozenset(), [], n)
                start += n


class RecordsSource:
    """Python dicts; a column Arrow cannot type from its values becomes text (inferred)."""

    name = "<records>"
    format = "records"

    def __init__(self, records: Iterable[Any], batch_size: int) -> None:
        self.records = records
        self.batch_size = batch_size

    def chunks(self) -> Iterator[Raw]:
        it = iter(self.records)
        start = 0
        while True:
            chunk = list(itertools.islice(it, self.batch_size))
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
            table, text_cols = columns(good, str)
            yield Raw(table, np.array(ids, dtype=np.int64), text_cols, bad, len(chunk))
            start += len(chunk)


def memory_source(obj: Any, batch_size: int) -> Source | None:
    """The source for an in-memory input, or ``None`` when ``obj`` is none of them."""
    if isinstance(obj, pa.Table | pa.RecordBatch):
        return ArrowSource([obj], batch_size)
    if isinstance(obj, pa.RecordBatchReader):
        return ArrowSource(obj, batch_size, name="<arrow stream>")
    if type(obj).__name__ == "DataFrame" and hasattr(obj, "to_records"):
        try:
            table = pa.Table.from_pandas(obj, preserve_index=False)
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise InputError(f"cannot convert the DataFrame to Arrow: {e}",
                             path="<DataFrame>") from None
        return ArrowSource([table], batch_size, name="<DataFrame>", format="pandas")
    if isinstance(obj, Iterable) and not isinstance(obj, (bytes, str, Mapping)):
        it = iter(obj)
        first = next(it, None)
        if first is None:
            raise InputError("no events: the input is empty", path="<records>")
        rest = itertools.chain([first], it)
        if isinstance(first, pa.RecordBatch | pa.Table):
            return ArrowSource(rest, batch_size, name="<arrow batches>")
        return RecordsSource(rest, batch_size)
    return None


__all__ = ["ArrowSource", "RecordsSource", "memory_source"]
