"""Executor-side code: what runs inside ``mapInArrow`` (pyarrow and the engine only, no pyspark).

A task receives Arrow record batches sorted by (group, ``__ts``, ``__ord``), where the group is
the partition key (keyed mode), a time-range number (split mode) or nothing (single mode). It
cuts the stream at group changes, runs the engine on each group with a fresh state, and turns
the matches into output rows. It checks the order it relies on and fails loudly on a violation:
Spark documents no order for ``sortWithinPartitions`` followed by ``mapInArrow``; a wrong order
would silently give wrong matches.

With ``on_cap="truncate"`` the task adds what the engine dropped in each group (runs, matches)
to the :class:`CapCounts` accumulator in the spec (:class:`kleene.spark.batch.CapReport`).

Every output row carries ``__end_us`` (the match's end in microseconds), ``__last_pos`` (the
input position ``__ord`` of the last positive event) and ``__seq`` (the running number of the
match in its task, which preserves the engine's documented order among matches ending on the
same event). Sorting by these three gives kleene's documented total output order.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import EngineError, InputError
from ..events import EventBatch, Match, TimeInfo
from ..events.model import ID, TS, TYPE
from ..frozen import dataclass
from ..semantic.analyzed import AnalyzedQuery, VarKind

ORD = "__ord"
"""Input position used to order events with equal timestamps (the row index by default)."""
RANGE = "__range"
"""Time-range number of a row in split mode."""
END_US = "__end_us"
LAST_POS = "__last_pos"
SEQ = "__seq"
TIMEOUT_POS = 1 << 62
"""Added to a timed-out partial match's ``__last_pos`` (EMIT TIMEOUTS): its ``__end_us`` is
its expiry T, so sorting by (end, last position, seq) puts it after every match completed at
T, and timeouts of equal T in the order of their last events (docs/semantics.md 20)."""
EXPIRED = "expired"
"""The DataFrame column of a timed-out partial match's expiry (null for a match)."""

MAX_RUNS_PER_PARTITION = 100_000
MAX_MATCHES_PER_EVENT = 1_000_000
MAX_MATCHES_PER_CALL = 2_000_000
"""The defaults of :class:`kleene.runtime.engine.Runtime`'s caps (not imported: the driver
builds specs without loading the engine; tests/spark/test_caps.py checks they agree)."""

OutputMode = Literal["map", "columns", "json", "csv"]
"""``csv``: the embedded CSV writer's row text (``record``) and header (``header``) per match."""
TimeOut = Literal["timestamp", "timestamp_ntz", "long", "double"]


@dataclass(frozen=True, slots=True)
class ReturnField:
    """One RETURN field of the output: its column name and Arrow type (``None``: JSON text)."""

    name: str
    arrow_type: pa.DataType | None


@dataclass(frozen=True, slots=True)
class Caps:
    """The automaton engine's memory caps, with :class:`kleene.runtime.engine.Runtime`'s
    meaning and defaults (``None``: no cap). In a Spark task one engine call is one group."""

    max_runs_per_partition: int | None = MAX_RUNS_PER_PARTITION
    max_matches_per_event: int | None = MAX_MATCHES_PER_EVENT
    max_matches_per_call: int | None = MAX_MATCHES_PER_CALL
    on_cap: str = "error"

    def options(self) -> dict[str, Any]:
        """The keyword arguments of :func:`kleene.runtime.engine.start`."""
        return {"max_runs_per_partition": self.max_runs_per_partition,
                "max_matches_per_event": self.max_matches_per_event,
                "max_matches_per_call": self.max_matches_per_call, "on_cap": self.on_cap}

    def changed(self) -> list[str]:
        """The names of the options that differ from the defaults."""
        default = Caps()
        return [k for k, v in self.options().items() if v != default.options()[k]]


class ByKey:
    """A Spark accumulator parameter whose value is a dict merged by key, the later value
    winning (duck-typed as PySpark's ``AccumulatorParam``, so this module needs no pyspark).

    For counts a task reports per unit of work (a group's dropped runs and matches, a file's
    skipped rows): a unit always reports the same numbers, so a task run twice (a retry,
    speculation, a second action on the same DataFrame) is counted once.
    """

    def zero(self, value: dict[Any, Any]) -> dict[Any, Any]:
        return {}

    def addInPlace(self, a: dict[Any, Any],  # noqa: N802 - Spark's name
                   b: dict[Any, Any]) -> dict[Any, Any]:
        a.update(b)
        return a


CapCounts = ByKey
"""The truncation report's parameter: group key (the partition key, ``(range,)`` in split
mode, ``()`` in single mode) -> (runs, matches) the engine dropped there."""


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """Everything a task needs; pickled once into the Spark closure."""

    analyzed: AnalyzedQuery
    engine: str
    time: TimeInfo
    group_cols: tuple[str, ...]
    attr_cols: tuple[str, ...]
    id_type: pa.DataType
    output: OutputMode
    time_out: TimeOut
    returns: tuple[ReturnField, ...]
    range_bounds: tuple[int, ...] | None = None
    """Split mode: ``b_1 < ... < b_{N-1}``; range j is ``[b_j, b_{j+1})`` with b_0 = -inf."""
    include_internal: bool = True
    event_type: str | None = None
    """One event type for every row: the input has no ``__type`` column, the task adds it."""
    order_col: str = ORD
    """The column that orders events with equal timestamps (``__id`` when ids are row numbers)."""
    caps: Caps = Caps()
    """The automaton engine's caps (other engines take none)."""
    cap_report: Any = None
    """A Spark accumulator with :class:`CapCounts` (``on_cap="truncate"``), or ``None``."""
    csv_fields: tuple[str, ...] | None = None
    """``output="csv"``: the RETURN fields of the header every match is written under (a
    query set's, every query's: one file), or ``None``: each match's own."""


def match_json(m: Match, time: TimeInfo) -> str:
    """The JSON Lines text of one match: exactly the embedded CLI's line."""
    from ..events.writers import match_line

    return match_line(m, time)


class CsvRows:
    """The embedded CSV writer's text for one match at a time: its header line and data line
    (:class:`kleene.events.writers.CsvWriter` writes the header of the first match, or of the
    RETURN ``fields`` it is given, then one line per match; the same ``_flat`` row, cells and
    ``csv`` settings give the same bytes)."""

    def __init__(self, time: TimeInfo, fields: tuple[str, ...] | None = None) -> None:
        import io

        from ..events.textcols import row_keys
        from ..events.writers import CSV_FIXED_COLUMNS, _LineFormatter

        self.header: tuple[str, ...] | None = (
            None if fields is None else (*CSV_FIXED_COLUMNS, *row_keys(fields)))
        """The columns of every match (given fields), or None: each match's own."""
        self._fits: set[tuple[str, ...]] = set()
        """Column sets checked against :attr:`header`."""
        self.time = time
        self.fmt = _LineFormatter(time)
        self.buf = io.StringIO()
        self._writers: dict[tuple[str, ...], tuple[str, Any]] = {}
        """Per column set: its header line and a ``DictWriter`` into ``buf``."""

    def texts(self, m: Match) -> tuple[str, str]:
        """(header line, data line) of ``m``, without the newlines."""
        from ..events.writers import _flat, csv_cells

        row = _flat(m, self.time, self.fmt)
        keys = tuple(row)
        if self.header is not None:
            if keys not in self._fits:  # (once per column set, not per match)
                missing = [k for k in keys if k not in self.header]
                if missing:  # (as the embedded writer: the value is not dropped)
                    raise InputError(f"CSV output: query {m.query!r} returns "
                                     f"{', '.join(missing)}, which the CSV header "
                                     f"({', '.join(self.header)}) has no column for")
                self._fits.add(keys)
            keys = self.header
        buf = self.buf
        known = self._writers.get(keys)
        if known is None:
            import csv

            writer = csv.DictWriter(buf, fieldnames=list(keys), extrasaction="ignore",
                                    lineterminator="\n")
            buf.seek(0)
            buf.truncate()
            writer.writeheader()
            known = self._writers[keys] = (buf.getvalue()[:-1], writer)
        header, writer = known
        buf.seek(0)
        buf.truncate()
        writer.writerow(csv_cells(row))
        return header, buf.getvalue()[:-1]


def output_schema(spec: TaskSpec) -> pa.Schema:
    """The Arrow schema of the task's output batches."""
    fields: list[pa.Field] = [pa.field("query", pa.string())]
    if spec.output == "json":
        fields = [pa.field("record", pa.string())]
    elif spec.output == "csv":
        fields = [pa.field("record", pa.string()), pa.field("header", pa.string())]
    else:
        if spec.output == "map":
            fields.append(pa.field("match", pa.map_(pa.string(), pa.list_(spec.id_type))))
        else:
            for v in spec.analyzed.variables.values():
                if v.kind is VarKind.NEGATED:
                    continue
                t = pa.list_(spec.id_type) if v.kind is VarKind.LIST else spec.id_type
                fields.append(pa.field(v.name, t))
        tt = _time_type(spec.time_out)
        fields += [pa.field("start", tt), pa.field("end", tt)]
        if spec.analyzed.query.timeouts:
            fields.append(pa.field(EXPIRED, tt))
        for r in spec.returns:
            fields.append(pa.field(r.name, r.arrow_type or pa.string()))
    if spec.include_internal or spec.output in ("json", "csv"):
        fields += [pa.field(END_US, pa.int64()), pa.field(LAST_POS, pa.int64()),
                   pa.field(SEQ, pa.int64())]
    return pa.schema(fields)


def _time_type(t: TimeOut) -> pa.DataType:
    return {"timestamp": pa.timestamp("us", "UTC"), "timestamp_ntz": pa.timestamp("us"),
            "long": pa.int64(), "double": pa.float64()}[t]


def _neq(a: pa.Array, b: pa.Array) -> pa.Array:
    """Element-wise 'differs', with null equal to null (the key of a null group)."""
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    ne = pc.fill_null(pc.not_equal(a, b), True)
    return pc.and_(ne, pc.invert(both_null))


class _Out:
    """Accumulates output rows column-wise and emits record batches."""

    def __init__(self, spec: TaskSpec) -> None:
        self.spec = spec
        self.schema = output_schema(spec)
        self.cols: dict[str, list[Any]] = {f.name: [] for f in self.schema}
        self.n = 0
        self.seq = 0
        self.positive = [v.name for v in spec.analyzed.variables.values()
                         if v.kind is not VarKind.NEGATED]
        self.list_vars = {v.name for v in spec.analyzed.variables.values()
                          if v.kind is VarKind.LIST}
        self.csv: CsvRows | None = None

    def add(self, m: Match, last_pos: int) -> None:
        c = self.cols
        spec = self.spec
        if spec.output == "json":
            c["record"].append(match_json(m, spec.time))
        elif spec.output == "csv":
            if self.csv is None:
                self.csv = CsvRows(spec.time, spec.csv_fields)
            header, line = self.csv.texts(m)
            c["record"].append(line)
            c["header"].append(header)
        else:
            c["query"].append(m.query)
            if spec.output == "map":
                c["match"].append([(k, list(v) if isinstance(v, tuple) else [v])
                                   for k, v in m.bindings.items()])
            else:
                for name in self.positive:
                    v = m.bindings.get(name)
                    if name in self.list_vars:
                        c[name].append(list(v) if isinstance(v, tuple) else
                                       ([] if v is None else [v]))
                    else:
                        c[name].append(v[0] if isinstance(v, tuple) and len(v) == 1 else v)
            c["start"].append(self._time(m.start))
            c["end"].append(self._time(m.end))
            if EXPIRED in c:
                c[EXPIRED].append(None if m.expired is None else self._time(m.expired))
            for r in spec.returns:
                val = m.values.get(r.name)
                if r.arrow_type is None:
                    val = None if val is None else json.dumps(val, default=str)
                elif isinstance(val, float) and math.isnan(val) and not pa.types.is_floating(
                        r.arrow_type):
                    val = None
                c[r.name].append(val)
        if END_US in c:
            if m.expired is None:
                c[END_US].append(m.end)
                c[LAST_POS].append(last_pos)
            else:
                c[END_US].append(m.expired)
                c[LAST_POS].append(TIMEOUT_POS + last_pos)
            c[SEQ].append(self.seq)
        self.seq += 1
        self.n += 1

    def _time(self, us: int) -> Any:
        if self.spec.time_out in ("timestamp", "timestamp_ntz"):
            return us
        out = self.spec.time.to_output(us)
        return float(out) if self.spec.time_out == "double" else int(out)

    def flush(self) -> pa.RecordBatch:
        arrays = []
        for f in self.schema:
            vals = self.cols[f.name]
            if pa.types.is_timestamp(f.type):
                arrays.append(pa.array(vals, pa.int64()).cast(f.type))
            else:
                try:
                    arrays.append(pa.array(vals, f.type))
                except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
                    raise EngineError(f"RETURN/output column {f.name!r}: cannot store the "
                                      f"engine's values as {f.type}: {e}") from None
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        self.cols = {f.name: [] for f in self.schema}
        self.n = 0
        return batch


def key_groups(batches: Iterator[pa.RecordBatch], gcols: Sequence[str]
               ) -> Iterator[tuple[tuple[Any, ...], pa.Table]]:
    """Cut a task's batches, sorted by ``gcols``, into (key, rows) groups (one group ``()``
    without ``gcols``); a key seen in two separate runs is an error (the sort was not kept)."""
    pending: list[pa.RecordBatch] = []
    pending_key: tuple[Any, ...] | None = None
    seen: set[tuple[Any, ...]] = set()

    def finish() -> Iterator[tuple[tuple[Any, ...], pa.Table]]:
        nonlocal pending
        if not pending:
            return
        table = pa.Table.from_batches(pending).combine_chunks()
        pending = []
        key = pending_key if pending_key is not None else ()
        if key in seen:
            raise EngineError(f"Spark delivered the rows of key {key!r} in two separate "
                              "runs inside one task; the (key, ts) sort was not kept")
        seen.add(key)
        yield key, table

    for rb in batches:
        if rb.num_rows == 0:
            continue
        if not gcols:
            pending.append(rb)
            continue
        change = np.zeros(rb.num_rows, dtype=bool)
        for c in gcols:
            col = rb.column(c)
            if rb.num_rows > 1:
                change[1:] |= _neq(col.slice(1), col.slice(0, rb.num_rows - 1)) \
                    .to_numpy(zero_copy_only=False)
        first_key = tuple(rb.column(c)[0].as_py() for c in gcols)
        change[0] = pending_key is None or first_key != pending_key
        starts = np.flatnonzero(change).tolist()
        bounds = [*starts, rb.num_rows]
        if not starts or starts[0] != 0:
            # the batch continues the pending group up to the first change
            end0 = starts[0] if starts else rb.num_rows
            pending.append(rb.slice(0, end0))
        for s, e in zip(starts, bounds[1:], strict=True):
            yield from finish()
            pending_key = tuple(rb.column(c)[s].as_py() for c in gcols)
            pending.append(rb.slice(s, e - s))
    yield from finish()


def _load_runner(blob: bytes, modules: tuple[str, ...]) -> TaskRunner:
    from .ship import load_spec

    return TaskRunner(load_spec(blob, modules))


class TaskRunner:
    """The ``mapInArrow`` function: groups in, matches out (see the module docstring)."""

    FLUSH_ROWS = 8192

    def __init__(self, spec: TaskSpec) -> None:
        self.spec = spec

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as the spec's own bytes, unpickled by :func:`_load_runner`: a worker that
        cannot import a UDF's module then says so in one line (:mod:`kleene.spark.ship`)."""
        from .ship import dump_spec, udf_modules

        return (_load_runner, (dump_spec(self.spec),
                               tuple(udf_modules(self.spec.analyzed.udfs))))

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        spec = self.spec
        backend = _Evaluator(spec)
        out = _Out(spec)
        for key, table in key_groups(batches, spec.group_cols):
            self._run_group(table, key, backend, out)
            if out.n >= self.FLUSH_ROWS:
                yield out.flush()
        if out.n:
            yield out.flush()

    def _run_group(self, table: pa.Table, key: tuple[Any, ...], backend: Any,
                   out: _Out) -> None:
        spec = self.spec
        if spec.event_type is not None:
            table = table.append_column(TYPE, pa.repeat(pa.scalar(spec.event_type, pa.string()),
                                                         table.num_rows))
        ordv = check_events(table, key, spec.order_col)
        events = EventBatch(table.select([ID, TS, TYPE, *spec.attr_cols]), spec.time)
        matches: Sequence[Match] = backend(events)
        dropped = backend.dropped
        if dropped != (0, 0) and spec.cap_report is not None:
            spec.cap_report.add({key: dropped})
        if not matches:
            return
        lo = hi = None
        if spec.range_bounds is not None:
            j = int(key[0])
            lo = spec.range_bounds[j - 1] if j > 0 else None
            hi = spec.range_bounds[j] if j < len(spec.range_bounds) else None
        # a match belongs to the range of its last event, a timed-out partial match to the
        # range of its first (the task reads one window past its range: plan_query)
        kept = [m for m in matches if not (
            (lo is not None and (m.end if m.expired is None else m.start) < lo)
            or (hi is not None and (m.end if m.expired is None else m.start) >= hi))]
        if not kept:
            return
        # row of every bound event, found in C++ (pc.index_in) rather than a Python dict
        flat: list[Any] = []
        sizes: list[int] = []
        for m in kept:
            n0 = len(flat)
            for b in m.bindings.values():
                if isinstance(b, tuple):
                    flat.extend(b)
                else:
                    flat.append(b)
            sizes.append(len(flat) - n0)
        ids = table.column(ID).combine_chunks()
        if pc.count_distinct(ids).as_py() != len(ids):
            raise InputError(f"the id column has duplicate ids in key {key!r}; ids must be "
                             "unique (omit id_col to use row numbers)")
        rows = pc.index_in(pa.array(flat, ids.type), value_set=ids).to_numpy(
            zero_copy_only=False)
        at = 0
        for m, k in zip(kept, sizes, strict=True):
            last = int(rows[at:at + k].max()) if k else -1
            at += k
            out.add(m, int(ordv[last]) if last >= 0 else -1)


def check_events(table: pa.Table, key: tuple[Any, ...], order_col: str) -> Any:
    """Fail on an event without time, type or id, or on rows out of (ts, position) order
    (what the engine relies on); returns the position column as numpy."""
    for col, what in ((TS, "time"), (TYPE, "event type"), (ID, "id")):
        nulls = table.column(col).null_count
        if nulls:
            where = pc.index(pc.is_null(table.column(col)), True).as_py()
            raise InputError(f"{nulls} event(s) of key {key!r} have no {what} (the first "
                             f"has id {table.column(ID)[where].as_py()!r}); every event "
                             "needs a time, a type and an id")
    ts = table.column(TS).to_numpy()
    ordv = table.column(order_col).to_numpy()
    if len(ts) > 1:
        dts = np.diff(ts)
        bad = np.flatnonzero((dts < 0) | ((dts == 0) & (np.diff(ordv) <= 0)))
        if len(bad):
            i = int(bad[0])
            raise EngineError(
                f"events of key {key!r} reached the engine out of (ts, position) order "
                f"at rows {i} and {i + 1} (ts {int(ts[i])} -> {int(ts[i + 1])}, position "
                f"{int(ordv[i])} -> {int(ordv[i + 1])}); refusing to return wrong matches")
    return ordv


class _Evaluator:
    """Evaluates one group with a fresh state.

    For the automaton engine the query is compiled ONCE per task: one runtime is reset to a
    snapshot of its empty state before each group (compiling per group cost about 80 ms, i.e.
    36 s for the 449 keys of the Aarhus data). Other backends are called per group.
    """

    def __init__(self, spec: TaskSpec) -> None:
        self.analyzed = spec.analyzed
        self.rt: Any = None
        self.fn: Any = None
        self.dropped = (0, 0)
        """(runs, matches) ``on_cap="truncate"`` dropped in the last group."""
        from ..backends import BACKENDS

        entry = BACKENDS.get(spec.engine)
        if entry is not None and entry.streaming and not entry.needs_spark:
            self.rt = entry.load_start()(spec.analyzed, **spec.caps.options())
        else:
            self.fn = resolve_backend(spec.engine)

    def __call__(self, events: EventBatch) -> list[Match]:
        if self.rt is None:
            out: list[Match] = self.fn(self.analyzed, events)
            return out
        rt = self.rt
        rt.reset()
        c = rt.counters
        runs, matches = c.truncated_runs, c.truncated_matches
        with warnings.catch_warnings():
            # the runtime's "see the counters" warning: the driver reports the counts instead
            warnings.simplefilter("ignore", RuntimeWarning)
            out = list(rt.push(events)) + list(rt.close())
        self.dropped = (c.truncated_runs - runs, c.truncated_matches - matches)
        return out


def resolve_backend(engine: str) -> Any:
    """A registered backend by name, or ``"module:function"`` (a custom evaluator with the
    backend signature ``(AnalyzedQuery, EventBatch) -> list[Match]``)."""
    from ..backends import get_backend

    if ":" in engine:
        import importlib

        module, _, func = engine.partition(":")
        return getattr(importlib.import_module(module), func)
    return get_backend(engine)


def range_of(ts_us: int, bounds: Sequence[int]) -> int:
    """The range number of a timestamp: the count of bounds <= ts (for tests and docs)."""
    return int(np.searchsorted(np.asarray(bounds, dtype=np.int64), ts_us, side="right"))


__all__ = [
    "END_US", "EXPIRED", "LAST_POS", "MAX_MATCHES_PER_CALL", "MAX_MATCHES_PER_EVENT",
    "MAX_RUNS_PER_PARTITION", "ORD", "RANGE", "SEQ", "TIMEOUT_POS", "ByKey", "CapCounts", "Caps",
    "CsvRows", "OutputMode", "check_events", "key_groups", "ReturnField", "TaskRunner",
    "TaskSpec", "TimeOut", "match_json", "output_schema", "range_of", "resolve_backend",
]
