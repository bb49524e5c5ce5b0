"""The in-memory event model: a columnar batch of events in (timestamp, input position) order.

An :class:`EventBatch` wraps a ``pyarrow.Table`` with three reserved columns and any number of
typed attribute columns:

``__id``    the event's stable id: its 0-based row index in the input, or a user id column
            (int64 or string)
``__ts``    event time as int64 **microseconds** (since the epoch for datetime input; for numeric
            input, the number times the unit's microseconds, e.g. 1 second -> 1_000_000)
``__type``  the event type (string)

There is no Python object per event on the hot path: engines read columns as numpy arrays.
:class:`TimeInfo` remembers how to print timestamps back (ISO-8601 for datetime input, numbers in
the input's unit otherwise).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from ..errors import InputError
from ..frozen import dataclass


def int64_array(values: Any) -> pa.Array:
    """A numpy integer array (row numbers, times) as an Arrow int64 array, through the buffer: the
    same as ``pa.array(values, type=pa.int64())``, without that call's import of numpy.ma
    (6-25 ms of a short run's start-up)."""
    data = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(data), [None, pa.py_buffer(data)])


def bool_array(values: Any) -> pa.Array:
    """A numpy boolean array (a mask) as an Arrow boolean array, through the buffer (bits
    packed): the same as ``pa.array(values)``, without its import of numpy.ma."""
    data = np.ascontiguousarray(values, dtype=np.bool_)
    bits = np.packbits(data, bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(data), [None, pa.py_buffer(bits)])


ID = "__id"
TS = "__ts"
TYPE = "__type"
RESERVED = (ID, TS, TYPE)

_UNIT_US = {"s": 1_000_000, "ms": 1_000, "us": 1}


@dataclass(frozen=True, slots=True)
class TimeInfo:
    """How ``__ts`` maps back to the user's timestamps.

    ``kind="datetime"``: microseconds since the epoch, printed as ISO-8601 (UTC when the input
    had a zone, naive otherwise). ``kind="numeric"``: printed as ``ts / unit`` (an int when
    exact).
    """

    kind: Literal["datetime", "numeric"] = "numeric"
    unit: Literal["s", "ms", "us"] = "s"
    tz: str | None = None

    @property
    def unit_us(self) -> int:
        """Microseconds per input unit."""
        return _UNIT_US[self.unit]

    def to_output(self, ts_us: int) -> int | float | str:
        """Convert an internal timestamp to its output form (JSON value)."""
        if self.kind == "datetime":
            t = _dt.datetime(1970, 1, 1) + _dt.timedelta(microseconds=int(ts_us))
            if self.tz is not None:
                return t.replace(tzinfo=_dt.UTC).isoformat()
            return t.isoformat()
        q, r = divmod(int(ts_us), self.unit_us)
        return q if r == 0 else ts_us / self.unit_us

    def from_user(self, value: int | float) -> int:
        """Convert a user number (in the input unit) to internal microseconds."""
        return round(value * self.unit_us)


@dataclass(frozen=True, slots=True)
class EventBatch:
    """A batch of events, ordered by (``__ts``, input position).

    Example:
        >>> b = EventBatch.from_records([
        ...     {"id": "a1", "type": "A", "ts": 1, "x": 5},
        ...     {"id": "b1", "type": "B", "ts": 2, "x": 7},
        ... ])
        >>> len(b), b.types.tolist(), b.ts.tolist()
        (2, ['A', 'B'], [1000000, 2000000])
    """

    table: pa.Table
    time: TimeInfo = TimeInfo()

    def __post_init__(self) -> None:
        missing = [c for c in RESERVED if c not in self.table.column_names]
        if missing:
            raise InputError(f"internal event table lacks columns {missing}")

    def __len__(self) -> int:
        return int(self.table.num_rows)

    # -- columns as numpy (zero-copy where Arrow allows) -------------------------------------
    @property
    def ts(self) -> np.ndarray[Any, np.dtype[np.int64]]:
        """Timestamps in microseconds, int64."""
        return self.table.column(TS).to_numpy()  # type: ignore[no-any-return]

    @property
    def ids(self) -> pa.ChunkedArray:
        """Event ids (int64 or string)."""
        return self.table.column(ID)

    @property
    def types(self) -> np.ndarray[Any, np.dtype[Any]]:
        """Event types as a numpy object array of str."""
        return self.table.column(TYPE).to_numpy(zero_copy_only=False)  # type: ignore[no-any-return]

    @property
    def attribute_names(self) -> list[str]:
        """User attribute columns, in input order."""
        return [c for c in self.table.column_names if c not in RESERVED]

    def column(self, name: str) -> pa.ChunkedArray:
        """An attribute column by name."""
        return self.table.column(name)

    def slice(self, offset: int, length: int | None = None) -> EventBatch:
        """A zero-copy slice."""
        return EventBatch(self.table.slice(offset, length), self.time)

    def row(self, i: int) -> dict[str, Any]:
        """One event as a dict (for tests, errors and the oracle; never on a hot path)."""
        return {k: v[0] for k, v in self.table.slice(i, 1).to_pydict().items()}

    def rows(self) -> list[dict[str, Any]]:
        """All events as dicts (tests and the oracle only)."""
        rows: list[dict[str, Any]] = self.table.to_pylist()
        return rows

    @staticmethod
    def concat(batches: Sequence[EventBatch]) -> EventBatch:
        """Concatenate batches that share a schema and time info."""
        if not batches:
            raise InputError("no event batches to concatenate")
        return EventBatch(pa.concat_tables([b.table for b in batches]).combine_chunks(),
                          batches[0].time)

    @staticmethod
    def from_records(records: Iterable[Mapping[str, Any]], *, time: TimeInfo | None = None,
                     sort: bool = True) -> EventBatch:
        """Build a batch from dicts with keys ``type``, ``ts`` (numbers, in ``time.unit``),
        optional ``id`` (default: the row index) and attributes. Sorted stably by ts.

        This is the compact constructor for tests; files go through ``kleene.events.readers``.
        """
        time = time or TimeInfo()
        recs = list(records)
        if not recs:
            raise InputError("no events")
        has_id = "id" in recs[0]
        attr_names: list[str] = []
        for r in recs:
            for k in r:
                if k not in ("id", "type", "ts") and k not in attr_names:
                    attr_names.append(k)
        ids = [r["id"] for r in recs] if has_id else list(range(len(recs)))
        ts = np.array([time.from_user(r["ts"]) for r in recs], dtype=np.int64)
        cols: dict[str, Any] = {
            ID: pa.array(ids),
            TS: pa.array(ts, pa.int64()),
            TYPE: pa.array([str(r["type"]) for r in recs], pa.string()),
        }
        for a in attr_names:
            cols[a] = pa.array([r.get(a) for r in recs])
        table = pa.table(cols)
        if sort:
            order = np.argsort(ts, kind="stable")
            if not np.array_equal(order, np.arange(len(order))):
                table = table.take(pa.array(order))
        return EventBatch(table, time)


__all__ = ["EventBatch", "TimeInfo", "ID", "TS", "TYPE", "RESERVED"]
