"""Parquet files: typed columns, read in record batches of ``batch_size`` rows."""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from ...errors import InputError
from .base import STDIN, FileSource, Raw, open_stdin


class ParquetSource(FileSource):
    """Parquet (``.parquet``, ``.pq``); standard input is read whole (Parquet needs seeking)."""

    format = "parquet"
    extensions = (".parquet", ".pq")
    documented = (".parquet",)

    def chunks(self) -> Iterator[Raw]:
        import pyarrow.parquet as pq

        path = self.path
        if path != STDIN and not os.path.exists(path):
            raise InputError("no such file", path=path)
        try:
            pf = pq.ParquetFile(pa.BufferReader(open_stdin().read()) if path == STDIN
                                else path)
        except (pa.ArrowException, OSError) as e:
            raise InputError(f"not a readable Parquet file ({e})", path=path) from None
        start = 0
        try:
            for batch in pf.iter_batches(batch_size=self.options.batch_size):
                n = batch.num_rows
                yield Raw(pa.Table.from_batches([batch]),
                          np.arange(start, start + n, dtype=np.int64), frozenset(), [], n)
                start += n
        except (pa.ArrowException, OSError) as e:
            raise InputError(f"cannot read Parquet near row {start + 1}: {e}",
                             path=path) from None
        finally:
            pf.close()


__all__ = ["ParquetSource"]
