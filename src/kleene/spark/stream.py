"""Streaming CEP on Spark Structured Streaming: ``kleene.spark.match_stream``.

``transformWithStateInPandas`` (Spark >= 4.0, RocksDB state store, event-time timers), grouped
by a hash bucket of the key (``buckets`` groups; keyed queries only have independent keys, so
one engine serves every key of a bucket). Per bucket, the state is one value: the engine's
``snapshot()`` bytes, the rows that have arrived but are not yet final (Arrow IPC bytes), the
number of buckets and the bucket's timer. In each micro-batch, and when its timer fires, a
bucket's processor:

1. restores the engine from the snapshot (the query is compiled once per Python worker);
2. adds the new rows to the pending rows; rows behind the watermark at arrival are *late*:
   they go to the output as ``kind = 'late'`` rows (with their id and time), never into the
   engine;
3. feeds the pending rows older than the watermark, sorted by (time, position), to the engine,
   then advances the engine to the watermark (closing windows, firing trailing negations);
4. stores the new snapshot and the remaining rows, and keeps one event-time timer: at the
   oldest remaining row, else at the next watermark step, so idle buckets still make progress
   as the global watermark moves.

Spark's event-time column is the event time plus :data:`SHIFT_MS` (Spark drops rows at or
before its watermark, which starts at 0). A bounded input may give its end
(:attr:`StreamSpec.end_us`): once the watermark reaches it, each group closes its engine,
releasing what only the end of a stream releases (PICK groups without a time window).

``match_stream`` = :func:`prepare_stream` (one query's columns) + :func:`stateful_operator`;
the operator can also run many queries at once, grouped by (query, bucket) (the bounded replay
of many pairs in :mod:`kleene.spark.backend`): the same processor, per group its query.

pyspark costs a few JVM round trips and a pandas frame per group and micro-batch, which is why
the state is per bucket, not per key. A restarted query resumes from its checkpoint: the
RocksDB state holds exactly what step 4 stored, so no match is lost or duplicated; a restart
with another number of buckets fails with a clear error. Without PARTITION BY (or ``[attr]``)
the whole stream is one group: correct, not parallel.
"""

from __future__ import annotations

import base64
import io
import pickle
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import EngineError, InputError
from ..events import EventBatch, Match
from ..events.model import ID, TS, TYPE
from ..frozen import dataclass
from .nested import SET_POS, as_text
from .tasks import END_US, ORD, SEQ, OutputMode, TaskSpec, _Out, output_schema

WM = "__wm"
KIND = "kind"
LATE_ID = "late_id"
QUERY_IX = "__query"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
BUCKET = "__bucket"
DEFAULT_BUCKETS = 4
MAX_BUCKETS = 1 << 16
SHIFT_MS = 1
"""Spark's event-time column is the event time plus this: Spark's watermark starts at 0 and
Spark drops every row at or before its watermark, so an event at time 0 (the epoch, or a
numeric time of 0) would be dropped in the first micro-batch. Timers are in Spark's time."""
_STATE_SCHEMA = "snapshot binary, pending binary, applied_wm long, buckets int, timer long"


@dataclass(frozen=True, slots=True)
class StreamSpec:
    """One query of a stateful processor (pickled into the query plan)."""

    task: TaskSpec
    columns: tuple[str, ...]
    """The processor's input columns this query reads, in the engine's order: the id, time,
    type and order columns, then ``task.attr_cols`` (renamed to those names)."""
    buckets: int = 1
    """Number of state groups: the keys are hashed into this many buckets (1: unkeyed)."""
    token: str = ""
    """Names this compiled query in a worker's runtime cache (unique per query)."""
    end_us: int | None = None
    """A bounded input's end: rows at or after it only move the watermark (they are not
    events), and once kleene's watermark reaches it the group's engine is closed, releasing
    every match it holds (PICK without a time window holds its groups until the end)."""
    group: Any = None
    """A nested group (:class:`kleene.spark.nested.GroupSpec`): this state group runs the
    group's queries through the embedded set engine; ``task`` is its first query's, with the
    attributes of them all."""
    text_ids: bool = False
    """Ids are written as text (a set with nested queries, ``map`` / ``columns`` output)."""


@dataclass(frozen=True, slots=True)
class ProcessorSpec:
    """What the stateful processor needs: its queries and the input layout."""

    queries: Mapping[int, StreamSpec]
    """The queries by number (``match_stream``: one, number 0)."""
    in_schema: pa.Schema
    """Arrow schema of the processor's input rows as pandas delivers them (ns timestamps)."""
    schema: pa.Schema
    """The same with microsecond timestamps, as the engine expects."""
    margin_ms: int = 0
    """Late margin: Spark's watermark runs this much behind kleene's, so rows up to this much
    behind kleene's watermark still reach the processor and are reported as late."""
    by_query: bool = False
    """Groups are (query index, bucket) and output rows carry ``__query``: many queries in one
    stateful operator (a query set, or the bounded replay of many pairs)."""
    replay: bool = False
    """The replay of many unrelated pairs (:mod:`kleene.spark.backend`): a query's error is
    reported as a ``kind = 'error'`` row (``record``: its pickled exception, base64) instead of
    failing the streaming query, and ``late_id`` is text (the pairs' id types differ)."""
    out_names: tuple[str, ...] = ()
    """A query set's output columns (the union of its queries'): each query's rows get the
    columns it does not have as NULL."""
    null_masks: tuple[tuple[int, int], ...] = ()
    """(value column, null-mask column) positions of the nullable integer and float columns.
    pandas turns an integer column with NULLs into floats, which loses every value beyond 2**53
    (and fails beyond int64's float range), and gives NULL and NaN in a float column the same
    NaN. Such a column reaches the processor with its NULLs as 0 plus a boolean mask column
    (appended after the input columns) and is rebuilt exact: NaN stays NaN, NULL stays NULL."""
    text_ids: bool = False
    """Late ids are written as text (a set with nested queries, ``map`` / ``columns``)."""


def _ipc(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue()


def _unipc(blob: bytes | None) -> pa.Table | None:
    if not blob:
        return None
    with pa.ipc.open_stream(blob) as r:
        return r.read_all()


def stream_output_schema(task: TaskSpec) -> pa.Schema:
    """The batch output schema plus ``kind`` ('match' | 'late') and ``late_id``."""
    base = output_schema(task)
    return pa.schema([pa.field(KIND, pa.string()), *base,
                      pa.field(LATE_ID, task.id_type)])


_RUNTIMES: OrderedDict[str, tuple[Any, bytes]] = OrderedDict()
_MAX_RUNTIMES = 256


def _runtime(spec: StreamSpec) -> tuple[Any, bytes]:
    """The compiled runtime of ``spec`` and a fresh snapshot, compiled once per Python worker
    (workers are reused across tasks and micro-batches; least recently used ones beyond
    :data:`_MAX_RUNTIMES` are dropped). It holds no group's state: every step restores the
    group's stored snapshot into it first."""
    from ..plans import start

    hit = _RUNTIMES.get(spec.token) if spec.token else None
    if hit is not None:
        _RUNTIMES.move_to_end(spec.token)
        return hit
    if spec.group is not None:
        from .nested import Positions, group_window

        rt = spec.group.queries.start(**spec.group.options)
        entry = (rt, Positions(group_window(spec.group)).dump(rt.snapshot()))
    else:
        rt = start(spec.task.analyzed)
        entry = (rt, rt.snapshot())
    if spec.token:
        while len(_RUNTIMES) >= _MAX_RUNTIMES:
            _RUNTIMES.popitem(last=False)
        _RUNTIMES[spec.token] = entry
    return entry


class KleeneProcessor:
    """The ``StatefulProcessor`` (built by :func:`processor_class` so pyspark stays lazy).

    One instance serves one Spark task (one state partition of one micro-batch); each query's
    runtime is compiled once per worker and restored for every group it handles.
    """

    def __init__(self, spec: ProcessorSpec | None,
                 packed: tuple[bytes, tuple[str, ...]] | None = None) -> None:
        self._spec = spec
        self._packed = packed

    @property
    def spec(self) -> ProcessorSpec:
        """The spec, unpickled at its first use: Spark's driver-side runner of
        ``transformWithStateInPandas`` only calls :meth:`init` and does not see the modules
        :func:`kleene.spark.ship.ship_udfs` added, so it must not import a UDF's module."""
        if self._spec is None:
            from .ship import load_spec

            assert self._packed is not None
            self._spec = load_spec(*self._packed)
            self._packed = None
        return self._spec

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as the spec's own bytes: a worker that cannot import a UDF's module says so
        in one line (:func:`kleene.spark.ship.load_spec`)."""
        if self._packed is not None:
            return (_load_processor, self._packed)
        from .ship import dump_spec, udf_modules

        modules = sorted({m for q in self.spec.queries.values()
                          for m in udf_modules(q.task.analyzed.udfs)})
        return (_load_processor, (dump_spec(self.spec), tuple(modules)))

    def init(self, handle: Any) -> None:
        self.handle = handle
        self.state = handle.getValueState("kleene", _STATE_SCHEMA)

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        tables = []
        for pdf in rows:
            if len(pdf):
                tables.append(self._to_arrow(pdf))
        yield from self._guarded(key, tables, self._wm(timerValues), None)

    def handleExpiredTimer(self, key: Any, timerValues: Any,
                           expiredTimerInfo: Any) -> Iterator[Any]:
        expired = int(expiredTimerInfo.getExpiryTimeInMs())
        yield from self._guarded(key, [], self._wm(timerValues), expired)

    def close(self) -> None:
        return None

    def _to_arrow(self, pdf: Any) -> pa.Table:
        """pandas -> Arrow by position (pandas may rename columns), with Spark's types back."""
        ins, target = self.spec.in_schema, self.spec.schema
        if pdf.shape[1] != len(ins):
            raise InputError(f"stream rows have {pdf.shape[1]} columns, expected {len(ins)}: "
                             f"{list(pdf.columns)} vs {ins.names}")
        masks = dict(self.spec.null_masks)
        n = len(target)  # the mask columns after them are not events' columns
        arrays = [pa.array(pdf.iloc[:, i].to_numpy(), type=ins.field(i).type,
                           mask=pdf.iloc[:, masks[i]].to_numpy(dtype=bool))
                  if i in masks else
                  pa.array(pdf.iloc[:, i], type=ins.field(i).type, from_pandas=True)
                  for i in range(n)]
        return pa.Table.from_arrays(arrays, schema=pa.schema([ins.field(i) for i in range(n)])
                                    ).cast(target, safe=False)

    def _wm(self, timer_values: Any) -> int | None:
        """kleene's watermark in ms (None: Spark has none yet)."""
        wm = int(timer_values.getCurrentWatermarkInMs())
        return wm + self.spec.margin_ms - SHIFT_MS if wm > 0 else None

    def _spark_ms(self, kleene_ms: int) -> int:
        """The Spark event time (timer) at which kleene's watermark reaches ``kleene_ms``; at
        least 1 ms: Spark never fires a timer at or before 0 (a group whose oldest row is at
        time 0 kept a negative timer, was never called again and lost all its matches)."""
        return max(1, kleene_ms - self.spec.margin_ms + SHIFT_MS)

    def _query(self, key: Any) -> tuple[int, StreamSpec]:
        ix = int(key[0]) if self.spec.by_query else 0
        return ix, self.spec.queries[ix]

    def _guarded(self, key: Any, new: list[pa.Table], wm_ms: int | None,
                 expired: int | None) -> Iterator[Any]:
        if not self.spec.replay:
            yield from self._step(key, new, wm_ms, expired)
            return
        try:
            frames = list(self._step(key, new, wm_ms, expired))
        except Exception as e:  # noqa: BLE001 - this query's error, not the whole operator's
            yield self._error_frame(key, e)
            return
        yield from frames

    # -----------------------------------------------------------------------------------------
    def _load(self, key: Any, q: StreamSpec,
              ) -> tuple[bytes | None, pa.Table | None, int | None, int | None]:
        """The stored (snapshot, pending rows, applied watermark µs, timer ms) of this group
        (snapshot None: a fresh group)."""
        stored = self.state.get()
        if stored is None:
            return None, None, None, None
        snap, pend_blob, applied, buckets, timer = stored
        if buckets != q.buckets:
            raise InputError(
                f"the checkpoint was written with buckets={buckets}, this query has "
                f"buckets={q.buckets} (group {key!r}): a restarted query must keep "
                "its number of buckets (or start from a new checkpoint)")
        return (bytes(snap) if snap else None, _unipc(bytes(pend_blob) if pend_blob else None),
                None if applied is None else int(applied),
                None if timer is None else int(timer))

    def _step(self, key: Any, new: list[pa.Table], wm_ms: int | None,
              expired: int | None) -> Iterator[Any]:
        ix, q = self._query(key)
        task = q.task
        names = [ID, TS, TYPE, ORD, *task.attr_cols]
        snap, old, applied_us, timer = self._load(key, q)
        if expired is not None and timer == expired:
            timer = None  # Spark deletes the timer that fired after this call
        rt = None
        pos: Any = None
        if snap is not None or wm_ms is not None:
            # before the first watermark a fresh group only buffers: no engine needed
            rt, fresh = _runtime(q)
            if q.group is None:
                rt.restore(fresh if snap is None else snap)
            else:  # a nested group: the set runtime and its input positions
                from .nested import Positions, group_window

                pos = Positions(group_window(q.group))
                rt.restore(pos.load(fresh if snap is None else snap))
                rt.placed = []
        closed = rt is not None and rt.closed
        parts = []
        if old is not None and old.num_rows:
            parts.append(old)
        out = _Out(task)
        late_rows: list[tuple[Any, int]] = []
        wm_us = wm_ms * 1000 if wm_ms is not None else None
        for t in new:
            t = t.select(list(q.columns)).rename_columns(names)
            if q.end_us is not None:
                # end markers: they moved Spark's watermark, they are not events
                t = t.filter(pc.less(t.column(TS), pa.scalar(q.end_us, pa.int64())))
            late = None
            if wm_us is not None:
                late = t.column(TS).to_numpy() < wm_us
            if closed:  # after the end every row is behind it
                late = np.ones(t.num_rows, dtype=bool)
            if late is not None and late.any():
                # behind the watermark at arrival: late (Spark's rule), never matched
                lt = t.filter(pa.array(late))
                late_rows.extend(zip(lt.column(ID).to_pylist(),
                                     lt.column(TS).to_pylist(), strict=True))
                t = t.filter(pa.array(~late))
            if t.num_rows:
                parts.append(t)
        pending = pa.concat_tables(parts).combine_chunks() if parts else None
        matches: list[Match] = []
        ords: dict[Any, int] = {}
        if rt is not None:
            rt.out_keys = [] if task.analyzed.query.timeouts else None
        if pending is not None and pending.num_rows and rt is not None and wm_us is not None \
                and not closed:
            ready_mask = pc.less(pending.column(TS), pa.scalar(wm_us, pa.int64()))
            ready = pending.filter(ready_mask)
            pending = pending.filter(pc.invert(ready_mask))
            if ready.num_rows:
                # one runtime serves every key of the bucket: keys are independent
                # (plan_query keys a query only then), each key's rows arrive in order
                order = np.lexsort((ready.column(ORD).to_numpy(), ready.column(TS).to_numpy()))
                ready = ready.take(pa.array(order))
                ords = dict(zip(ready.column(ID).to_pylist(),
                                ready.column(ORD).to_pylist(), strict=True))
                cols = ready.select([ID, TS, TYPE, *task.attr_cols])
                if task.analyzed.query.timeouts:
                    from ..runtime.engine import GPOS_COL

                    # the engine's positions are the stream's: a timed-out partial match
                    # released later is ordered by its last event's (rt.out_keys)
                    cols = cols.append_column(GPOS_COL, ready.column(ORD))
                if pos is not None:
                    gpos0, late0 = rt.next_gpos, rt.late_count
                    rt.push(EventBatch(cols, task.time))
                    if rt.late_count != late0:
                        raise EngineError(f"nested group {key!r}: the set runtime found late "
                                          "events in order (internal)")
                    pos.add(gpos0, ready.column(ORD).to_numpy(), ready.column(TS).to_numpy())
                else:
                    matches += rt.push(EventBatch(cols, task.time))
        if rt is not None and wm_us is not None and not closed:
            matches += rt.advance(wm_us)
            applied_us = wm_us if applied_us is None else max(applied_us, wm_us)
            if q.end_us is not None and wm_us >= q.end_us:
                matches += rt.close()  # every row before the end is in: release all
        keys = rt.out_keys if rt is not None else None
        if pos is not None:
            matches = []  # the group's matches are in rt.placed (below)
        for i, m in enumerate(matches):
            last = -1
            if keys is not None and len(keys) == len(matches):
                last = int(keys[i])
            else:
                for b in m.bindings.values():
                    for ev in (b if isinstance(b, tuple) else (b,)):
                        last = max(last, ords.get(ev, -1))
            out.add(as_text(m) if q.text_ids else m, last)
        want: int | None = None
        if rt is not None and rt.closed:
            want = None
        elif pending is not None and pending.num_rows:
            oldest = int(pc.min(pending.column(TS)).as_py())
            want = self._spark_ms(oldest // 1000 + 1)
        elif wm_ms is not None:
            # the next watermark step: the engine may hold matches to release, and a
            # restart with another number of buckets finds every old bucket by its timer
            want = self._spark_ms(wm_ms + 1)
        if want != timer:
            # one timer per group, remembered in the state: no listTimers round trip
            if timer is not None:
                self.handle.deleteTimer(timer)
            if want is not None:
                self.handle.registerTimer(want)
        rest = _ipc(pending) if pending is not None and pending.num_rows else None
        blob = None if rt is None else rt.snapshot()
        if pos is not None and blob is not None:
            if wm_us is not None:
                pos.prune(wm_us)
            blob = pos.dump(blob)
        self.state.update((blob, rest, applied_us, q.buckets, want))
        if q.group is not None:
            yield from self._group_frames(q, rt, pos, late_rows)
        elif out.n or late_rows:
            yield self._frame(ix, out, late_rows)

    def _group_frames(self, q: StreamSpec, rt: Any, pos: Any,
                      late_rows: list[tuple[Any, int]]) -> Iterator[Any]:
        """A nested group's rows: per query, its matches (from the set runtime's output
        entries, with the set's order columns) and the late rows (once per query)."""
        from .nested import placed_rows

        g = q.group
        placed = rt.placed if rt is not None else []
        outs, set_pos, seqs = placed_rows(g, placed, pos.ord_of if pos is not None
                                          else (lambda _g: -1))
        for i, out in enumerate(outs):
            if out.n or late_rows:
                yield self._frame(g.places[i], out, late_rows, task=g.specs[i],
                                  cols={SEQ: seqs[i], SET_POS: set_pos[i]})

    def _frame(self, ix: int, out: _Out, late_rows: list[tuple[Any, int]],
               task: TaskSpec | None = None, cols: dict[str, list[int]] | None = None) -> Any:
        import pandas as pd

        q = self.spec.queries.get(ix)
        if task is None:
            assert q is not None
            task = q.task
        n = out.n
        batch = out.flush()
        pdf = batch.to_pandas(timestamp_as_object=False) if n else pd.DataFrame(
            {f.name: pd.Series([], dtype=object) for f in batch.schema})
        if "match" in pdf.columns and n:
            pdf["match"] = [dict(x) for x in pdf["match"]]
        if n:
            for c, vals in (cols or {}).items():
                pdf[c] = vals
            if SET_POS in self.spec.out_names and SET_POS not in pdf.columns:
                pdf[SET_POS] = ix
        if self.spec.text_ids:
            late_rows = [(str(i), t) for i, t in late_rows]
        pdf.insert(0, KIND, "match")
        pdf[LATE_ID] = None
        if late_rows:
            late: dict[str, list[Any]] = {c: [None] * len(late_rows) for c in pdf.columns}
            late[KIND] = ["late"] * len(late_rows)
            late[LATE_ID] = [i for i, _ in late_rows]
            late["query"] = [task.analyzed.name] * len(late_rows)
            if END_US in late:
                late[END_US] = [ts for _, ts in late_rows]
            pdf = pd.concat([pdf, pd.DataFrame(late)], ignore_index=True) if n else \
                pd.DataFrame(late)
        if self.spec.replay:
            pdf[LATE_ID] = [None if v is None or v != v else str(v) for v in pdf[LATE_ID]]
        if self.spec.by_query:
            pdf[QUERY_IX] = ix
        if self.spec.out_names:
            for c in self.spec.out_names:
                if c not in pdf.columns:
                    pdf[c] = None
            pdf = pdf[list(self.spec.out_names)]
        return pdf

    def _error_frame(self, key: Any, e: Exception) -> Any:
        import pandas as pd

        ix, q = self._query(key)
        fields = stream_output_schema(q.task).names
        row: dict[str, list[Any]] = {c: [None] for c in fields}
        row[KIND] = ["error"]
        row["record"] = [base64.b64encode(pickled_error(e)).decode("ascii")]
        row[QUERY_IX] = [ix]
        return pd.DataFrame(row)


def pickled_error(e: Exception) -> bytes:
    """``e`` pickled, or an :class:`EngineError` with its text if it does not pickle (a
    query's error sent back from a Spark task, :mod:`kleene.spark.backend`)."""
    try:
        blob = pickle.dumps(e)
        pickle.loads(blob)  # noqa: S301 - our own bytes, checked to load
    except Exception:  # noqa: BLE001 - an error that does not pickle: its text
        blob = pickle.dumps(EngineError(f"{type(e).__name__}: {e}"))
    return blob


def processor_class() -> type:
    """``KleeneProcessor`` as a subclass of pyspark's ``StatefulProcessor``."""
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    return type("KleeneStatefulProcessor", (KleeneProcessor, StatefulProcessor), {})


_PROCESSOR: type | None = None


def _load_processor(blob: bytes, modules: tuple[str, ...]) -> Any:
    return _make_processor(None, (blob, modules))  # the spec is unpickled at its first use


def _make_processor(spec: ProcessorSpec | None,
                    packed: tuple[bytes, tuple[str, ...]] | None = None) -> Any:
    global _PROCESSOR
    if _PROCESSOR is None:
        _PROCESSOR = processor_class()
        # pickled by reference: the class must be importable under this module name
        _PROCESSOR.__module__ = __name__
        globals()["KleeneStatefulProcessor"] = _PROCESSOR
    return _PROCESSOR(spec, packed)


def __getattr__(name: str) -> Any:
    """Executors unpickle ``kleene.spark.stream.KleeneStatefulProcessor`` by name."""
    if name == "KleeneStatefulProcessor":
        global _PROCESSOR
        if _PROCESSOR is None:
            _PROCESSOR = processor_class()
            _PROCESSOR.__module__ = __name__
        globals()[name] = _PROCESSOR
        return _PROCESSOR
    raise AttributeError(name)


_INTERVAL_MS = {"ms": 1, "millisecond": 1, "milliseconds": 1, "s": 1000, "sec": 1000,
                "second": 1000, "seconds": 1000, "min": 60_000, "minute": 60_000,
                "minutes": 60_000, "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
                "day": 86_400_000, "days": 86_400_000}


def interval_ms(text: str, what: str = "watermark") -> int:
    """Parse ``"10 seconds"`` / ``"500 ms"`` / ``"2 minutes"`` into milliseconds."""
    parts = text.strip().lower().split()
    try:
        amount = float(parts[0])
        unit = _INTERVAL_MS[parts[1]] if len(parts) > 1 else 1000
    except (IndexError, KeyError, ValueError):
        raise InputError(f"{what} {text!r}: write an amount and a unit, like '10 seconds' "
                         f"(units: {', '.join(sorted(_INTERVAL_MS))})") from None
    if len(parts) > 2 or amount < 0:
        raise InputError(f"{what} {text!r}: write one non-negative amount and a unit")
    return round(amount * unit)


@dataclass(frozen=True, slots=True)
class Prepared:
    """One query's input layout for the stateful operator (see :func:`prepare_stream`)."""

    exprs: tuple[tuple[str, Any], ...]
    """``(name, Column)`` for ``__id, __ts, __type, __ord, __wm, __bucket``, computed from
    the input columns ``inputs``."""
    inputs: tuple[str, ...]
    """The input columns ``exprs`` read (id, time, type, order, keys)."""
    task: TaskSpec
    buckets: int

    def select(self, df: Any) -> Any:
        """The prepared rows: ``exprs`` and the attributes the query reads; no watermark yet
        (one ``withWatermark`` over the operator's whole input)."""
        return df.select(*[c.alias(n) for n, c in self.exprs],
                         *[f"`{c}`" for c in self.task.attr_cols])


def prepare_stream(df: Any, query: Any, *, time_col: str, type_col: str | None = None,
                   event_type: str | None = None, id_col: str, order_col: str | None = None,
                   time_unit: str = "s", output: OutputMode = "map",
                   buckets: int = DEFAULT_BUCKETS,
                   udfs: Mapping[str, Callable[..., Any]] | None = None,
                   name: str | None = None, check: bool = True,
                   query_types: tuple[str, ...] = ()) -> Prepared:
    """Check the options and lay out one query's input rows (``match_stream``'s first half;
    ``df`` is only read for its schema). ``check``: the query is checked against the stream's
    schema (:func:`kleene.spark.batch.check_schema`, as :func:`kleene.spark.match` does);
    ``query_types``: a set's query names, event types too (nested queries)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from .batch import (
        _ts_expr,
        analyzed_of,
        arrow_types,
        check_keys,
        check_schema,
        referenced_attributes,
        return_fields,
    )
    from .plan import plan_query
    from .ship import ship_udfs

    q = analyzed_of(query, udfs=udfs, name=name)
    plan = plan_query(q)
    for what, c in (("time column", time_col), ("type column", type_col),
                    ("id column", id_col), ("order column", order_col)):
        if c is not None and c not in df.columns:
            raise InputError(f"{what} {c!r} is not a column; columns: {', '.join(df.columns)}",
                             column=c)
    if type_col is None and event_type is None:
        raise InputError("pass type_col (a column) or event_type (one type for every row)")
    if check:  # from the schema: a stream's event types are not known before it starts
        check_schema(q, df, time_col=time_col, event_type=event_type,
                     hidden=(order_col if order_col != time_col else None,),
                     query_types=query_types)
    idt = df.schema[id_col].dataType
    if isinstance(idt, T.IntegralType):
        idc, id_type = F.col(f"`{id_col}`").cast("long"), pa.int64()
    elif isinstance(idt, T.StringType):
        idc, id_type = F.col(f"`{id_col}`"), pa.string()
        if order_col is None:
            raise InputError("string ids cannot order events with equal times: pass order_col")
    else:
        raise InputError(f"id column {id_col!r} must hold integers or strings", column=id_col)
    ts, time, time_out = _ts_expr(df, time_col, time_unit)
    # only the attributes the query reads travel through the state operator: pyspark turns
    # every row into a Python tuple and back into pandas, so each column costs per row
    used = referenced_attributes(q)
    attr_cols = tuple(c for c in df.columns if c in used)
    ordc = F.col(f"`{order_col}`").cast("long") if order_col is not None else idc
    typ = (F.col(f"`{type_col}`").cast("string") if type_col is not None
           else F.lit(event_type))
    if isinstance(buckets, bool) or not isinstance(buckets, int) or not (
            1 <= buckets <= MAX_BUCKETS):
        raise InputError(f"buckets={buckets!r}: write a whole number from 1 to {MAX_BUCKETS}")
    if plan.mode == "keyed":
        check_keys(plan.keys, df.columns)
        keys = [F.col(f"`{k}`") for k in plan.keys]
        group = F.pmod(F.hash(*keys), F.lit(buckets))
        key_cols = tuple(plan.keys)
    else:  # one group: correct, not parallel
        buckets = 1
        group = F.lit(0)
        key_cols = ()
    exprs = ((ID, idc), (TS, ts), (TYPE, typ), (ORD, ordc),
             # Spark's event time: SHIFT_MS later, so an event at time 0 is after Spark's
             # initial watermark (0, and Spark drops rows at or before its watermark)
             (WM, F.timestamp_micros(ts + F.lit(SHIFT_MS * 1000))), (BUCKET, group))
    inputs = tuple(dict.fromkeys(c for c in (id_col, time_col, type_col, order_col, *key_cols)
                                 if c is not None))
    attr_types = arrow_types(df.schema)
    ship_udfs(df.sparkSession, q.udfs)  # before the operator is built (issue 17)
    task = TaskSpec(analyzed=q, engine="automaton", time=time, group_cols=(),
                    attr_cols=attr_cols, id_type=id_type, output=output, time_out=time_out,
                    returns=return_fields(q, attr_types, id_type), include_internal=True)
    return Prepared(exprs, inputs, task, buckets)


def stateful_operator(df: Any, queries: Mapping[int, tuple[TaskSpec, tuple[str, ...], int,
                                                      int | None]],
                      *, delay_ms: int, margin_ms: int, by_query: bool = False,
                      query_set: bool = False, groups: Mapping[int, Any] | None = None,
                      text_ids: bool = False) -> Any:
    """The stateful operator over prepared rows (``match_stream``'s second half).

    ``df`` holds :meth:`Prepared.select` rows (with ``__query``, the query's number, when
    ``by_query`` or ``query_set``); ``queries`` gives per query number its task, the input
    columns it reads (see :attr:`StreamSpec.columns`), its number of buckets and its end
    (:attr:`StreamSpec.end_us`). ``by_query`` is the replay of many unrelated pairs (errors
    as rows, text late ids, one output schema); ``query_set`` a user's query set (errors fail
    the query; the output has the union of the queries' columns). ``groups``: per query
    number, a nested group (:class:`kleene.spark.nested.GroupSpec`) that state group runs;
    ``text_ids``: ids are written as text (a set with nested queries).
    """
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_type

    from .session import ROCKSDB

    spark = df.sparkSession
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
    if spark.conf.get(CHANGELOG, None) is None:
        # each micro-batch commits a small changelog, not a RocksDB snapshot (unless the
        # session chose otherwise); about halves the commit time per micro-batch here
        spark.conf.set(CHANGELOG, "true")
    df = df.withWatermark(WM, f"{delay_ms + margin_ms} milliseconds")
    in_fields, fields = [], []
    for f in df.schema.fields:
        at = to_arrow_type(f.dataType, timezone="UTC")
        fields.append(pa.field(f.name, at))
        if pa.types.is_timestamp(at):
            at = pa.timestamp("ns", at.tz)
        in_fields.append(pa.field(f.name, at))
    # nullable integer and float columns: NULLs as 0 plus a mask column
    # (ProcessorSpec.null_masks)
    nullable = [i for i, f in enumerate(df.schema.fields)
                if f.nullable and (pa.types.is_integer(fields[i].type)
                                   or pa.types.is_floating(fields[i].type))
                and f.name not in (QUERY_IX, BUCKET)]
    null_masks = tuple((i, len(fields) + k) for k, i in enumerate(nullable))
    if nullable:
        from pyspark.sql import functions as F

        names = df.schema.names
        df = df.select(*[F.coalesce(F.col(f"`{c}`"), F.lit(0)).alias(c)
                         if i in nullable else F.col(f"`{c}`") for i, c in enumerate(names)],
                       *[F.col(f"`{names[i]}`").isNull().alias(f"__knull{k}")
                         for k, i in enumerate(nullable)])
        in_fields += [pa.field(f"__knull{k}", pa.bool_()) for k in range(len(nullable))]
    groups = dict(groups or {})
    specs = {ix: StreamSpec(task, cols, buckets, uuid.uuid4().hex, end, groups.get(ix),
                            text_ids)
             for ix, (task, cols, buckets, end) in queries.items()}
    out = stream_output_schema(next(iter(specs.values())).task)
    out_names: tuple[str, ...] = ()
    if by_query:
        def text_late(schema: pa.Schema) -> list[pa.Field]:
            return [pa.field(LATE_ID, pa.string()) if f.name == LATE_ID else f for f in schema]

        shared = text_late(out)
        if any(text_late(stream_output_schema(s.task)) != shared for s in specs.values()):
            raise InputError("queries of one stateful operator need one output schema "
                             "(use output='json')")
        out = pa.schema([*shared, pa.field(QUERY_IX, pa.int64())])
    elif query_set:
        out = pa.schema([*_union_fields(specs), pa.field(QUERY_IX, pa.int64()),
                         *([pa.field(SET_POS, pa.int64())] if groups else [])])
        out_names = tuple(out.names)
    pspec = ProcessorSpec(specs, pa.schema(in_fields), pa.schema(fields), margin_ms,
                          by_query or query_set, replay=by_query, out_names=out_names,
                          null_masks=null_masks, text_ids=text_ids)
    grouped = df.groupBy(QUERY_IX, BUCKET) if by_query or query_set else df.groupBy(BUCKET)
    return grouped.transformWithStateInPandas(
        statefulProcessor=_make_processor(pspec), outputStructType=from_arrow_schema(out),
        outputMode="Append", timeMode="EventTime")


def _union_fields(specs: Mapping[int, StreamSpec]) -> list[pa.Field]:
    """The output columns of a query set: every query's, in first-seen order; a column two
    queries give different types is an error naming both."""
    seen: dict[str, tuple[pa.Field, str]] = {}
    tasks = [t for s in specs.values()
             for t in (s.group.specs if s.group is not None else (s.task,))]
    for task in tasks:
        for f in stream_output_schema(task):
            got = seen.get(f.name)
            if got is None:
                seen[f.name] = (f, task.analyzed.name)
            elif got[0].type != f.type:
                raise InputError(f"query set on a stream: column {f.name!r} is {got[0].type} in "
                                 f"query {got[1]!r} but {f.type} in query "
                                 f"{task.analyzed.name!r}; rename one (AS), or use "
                                 "output='json'")
    return [f for f, _ in seen.values()]


def match_stream(df: Any, query: Any, *, watermark: str, time_col: str,
                 type_col: str | None = None, event_type: str | None = None,
                 id_col: str, order_col: str | None = None, time_unit: str = "s",
                 output: OutputMode = "map", late_margin: str | None = None,
                 buckets: int = DEFAULT_BUCKETS,
                 udfs: Mapping[str, Callable[..., Any]] | None = None,
                 name: str | None = None, check: bool = True) -> Any:
    """Run a query over a streaming DataFrame with event time; returns a streaming DataFrame.

    The query is checked against the stream's schema before anything starts, as
    :func:`kleene.spark.match` checks a DataFrame (``check=False`` lets a missing column be
    NULL): an unknown attribute or PARTITION BY column, or a string column compared with a
    number, raises :class:`~kleene.errors.QueryValidationError` with a did-you-mean. Event
    types are checked only with ``event_type``: with ``type_col`` they are in rows that have
    not arrived yet, so a misspelt type is not found (the query then matches nothing).

    ``watermark`` is the delay (``"10 seconds"``): kleene's watermark is the largest event time
    seen minus it, and rows are matched once the watermark passes them. Output rows have
    ``kind = 'match'`` (the columns of :func:`kleene.spark.match`) or ``kind = 'late'`` (a row
    that arrived behind the watermark: ``late_id``, ``__end_us`` = its time). Spark itself
    drops rows behind *its* watermark before they reach kleene, so Spark's watermark runs
    ``late_margin`` (default: the watermark delay) behind kleene's: rows up to that much late
    are reported as ``late`` rows; later ones are only counted by Spark
    (``numRowsDroppedByWatermark`` in the query progress). ``id_col`` is required (a stream has
    no row index); ties in time are broken by ``order_col``, else by the id (integer ids).

    A keyed query's keys are hashed into ``buckets`` state groups; each group holds one engine
    for all its keys, so a micro-batch costs a few state calls per bucket, not per key. A
    restarted query must keep its number of buckets (checked: a clear error otherwise).

    Example:
        >>> q = match_stream(sdf, "PATTERN SEQ(A a, B b) PARTITION BY k WITHIN 5 seconds",
        ...                  watermark="5 seconds", time_col="ts", type_col="type",
        ...                  id_col="id")                                # doctest: +SKIP
        >>> q.writeStream.format("parquet").option("checkpointLocation", ck).start(out)
        ...                                                              # doctest: +SKIP
    """
    from .session import require_pyspark

    require_pyspark()
    delay_ms = interval_ms(watermark)
    margin_ms = interval_ms(late_margin, "late_margin") if late_margin is not None else delay_ms
    p = prepare_stream(df, query, time_col=time_col, type_col=type_col, event_type=event_type,
                       id_col=id_col, order_col=order_col, time_unit=time_unit, output=output,
                       buckets=buckets, udfs=udfs, name=name, check=check)
    cols = (ID, TS, TYPE, ORD, *p.task.attr_cols)
    return stateful_operator(p.select(df), {0: (p.task, cols, p.buckets, None)},
                             delay_ms=delay_ms, margin_ms=margin_ms)


def match_stream_set(df: Any, queries: Any, *, watermark: str, time_col: str,
                     type_col: str | None = None, event_type: str | None = None,
                     id_col: str, order_col: str | None = None, time_unit: str = "s",
                     output: OutputMode = "map", late_margin: str | None = None,
                     buckets: int = DEFAULT_BUCKETS,
                     udfs: Mapping[str, Callable[..., Any]] | None = None,
                     dialect: str | None = None, check: bool = True) -> Any:
    """A query set over a streaming DataFrame in ONE streaming query and one stateful
    operator: each query's rows are laid out as :func:`match_stream` lays them out (its own
    key buckets), tagged with the query's place (``__query``), and the operator keeps one
    state group per (query, bucket). Each query's matches and late rows are those of
    :func:`match_stream` with that query alone (``query`` names it; a row behind the
    watermark is reported once per query that reads its type). The output has the union of
    the queries' columns (NULL where a query has none; a column two queries type differently
    is an error: rename it, or use ``output='json'``). Nested queries: each nested group
    (producers and the consumers reading their matches) is ONE state group running the
    embedded set engine (:mod:`kleene.spark.nested`), its rows with the set's order columns
    (``__set_pos``); with ``output='map'`` or ``'columns'`` the ids are then text. Not
    supported: CSV records.

    ``queries``: a :class:`kleene.QuerySet`, a list of queries or a mapping name -> query (as
    :func:`kleene.compile_many`).
    """
    from pyspark.sql import functions as F

    from .batch import spark_query_set
    from .session import require_pyspark

    require_pyspark()
    qs = spark_query_set(queries, udfs=udfs, dialect=dialect)
    if output == "csv":
        raise InputError("CSV records of a query set on a stream: each query has its own "
                         "header; use output='json', 'map' or 'columns'")
    from dataclasses import replace

    from .nested import group_spec, nested_groups

    groups = nested_groups(qs)
    lead = {g[0]: g for g in groups}
    grouped = {p for g in groups for p in g}
    text_ids = bool(groups) and output in ("map", "columns")
    delay_ms = interval_ms(watermark)
    margin_ms = interval_ms(late_margin, "late_margin") if late_margin is not None else delay_ms
    frames = []
    specs: dict[int, tuple[TaskSpec, tuple[str, ...], int, int | None]] = {}
    group_specs: dict[int, Any] = {}
    for place in range(len(qs.queries)):
        if place in grouped and place not in lead:
            continue
        members = lead.get(place, (place,))
        preps = [prepare_stream(df, qs.queries[m].analyzed, time_col=time_col,
                                type_col=type_col, event_type=event_type, id_col=id_col,
                                order_col=order_col, time_unit=time_unit, output=output,
                                buckets=buckets, udfs=udfs, name=qs.queries[m].name,
                                check=check, query_types=tuple(qs.names))
                 for m in members]
        tasks = [replace(p.task, id_type=pa.string()) if text_ids else p.task for p in preps]
        p = preps[0]
        if place in lead:
            # a nested group: one state group (no key: labels P#k number the producer's
            # matches over the whole stream), every attribute its queries read
            attrs = tuple(dict.fromkeys(a for t in tasks for a in t.attr_cols))
            task = replace(tasks[0], attr_cols=attrs)
            p = Prepared(tuple((n, F.lit(0) if n == BUCKET else e) for n, e in p.exprs),
                         p.inputs, task, 1)
            group_specs[place] = group_spec(qs, members, tasks, attr_cols=attrs,
                                            time=task.time, order_col=ORD, options={})
        else:
            task = tasks[0]
            p = replace(p, task=task)
        frames.append(p.select(df).withColumn(QUERY_IX, F.lit(place).cast("long")))
        specs[place] = (task, (ID, TS, TYPE, ORD, *task.attr_cols), p.buckets, None)
    while len(frames) > 1:  # balanced: a chain of unions is re-analysed per step
        frames = [frames[k].unionByName(frames[k + 1], allowMissingColumns=True)
                  if k + 1 < len(frames) else frames[k] for k in range(0, len(frames), 2)]
    return stateful_operator(frames[0], specs, delay_ms=delay_ms, margin_ms=margin_ms,
                             query_set=True, groups=group_specs, text_ids=text_ids)


__all__ = ["KleeneProcessor", "Prepared", "ProcessorSpec", "StreamSpec", "interval_ms",
           "match_stream", "match_stream_set", "prepare_stream", "processor_class", "stateful_operator",
           "stream_output_schema"]
