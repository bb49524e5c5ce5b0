"""Streaming CEP on Spark Structured Streaming: ``kleene.spark.match_stream``.

``groupBy(key).transformWithStateInPandas`` (Spark >= 4.0, RocksDB state store, event-time
timers). Per key, the state is two values: the engine's ``snapshot()`` bytes and the rows that
have arrived but are not yet final (Arrow IPC bytes). In each micro-batch, and when a timer
fires, a key's processor:

1. restores the engine from the snapshot;
2. adds the new rows to the pending rows; rows behind the watermark this key has already
   applied are *late*: they go to the output as ``kind = 'late'`` rows (with their id and time),
   never into the engine;
3. feeds the pending rows older than the watermark, sorted by (time, position), to the engine,
   then advances the engine to the watermark (closing windows, firing trailing negations);
4. stores the new snapshot and the remaining rows, and registers an event-time timer for the
   oldest remaining row (and, while the engine holds matches, for the next watermark step), so
   idle keys still make progress as the global watermark moves.

A restarted query resumes from its checkpoint: the RocksDB state holds exactly what step 4
stored, so no match is lost or duplicated. Without PARTITION BY (or ``[attr]``) the whole
stream is one key: correct, not parallel.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InputError
from ..events import EventBatch, Match
from ..events.model import ID, TS, TYPE
from .tasks import END_US, ORD, OutputMode, TaskSpec, _Out, output_schema

WM = "__wm"
KIND = "kind"
LATE_ID = "late_id"
_STATE_SCHEMA = "snapshot binary, pending binary, applied_wm long"


@dataclass(frozen=True, slots=True)
class StreamSpec:
    """What the stateful processor needs (pickled into the query plan)."""

    task: TaskSpec
    in_schema: pa.Schema
    """Arrow schema of the processor's input rows as pandas delivers them (ns timestamps)."""
    schema: pa.Schema
    """The same with microsecond timestamps, as the engine expects."""
    margin_ms: int = 0
    """Late margin: Spark's watermark runs this much behind kleene's, so rows up to this much
    behind kleene's watermark still reach the processor and are reported as late."""


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


def _runtime_busy(rt: Any) -> bool:
    """True while the engine holds matches that a later watermark will release."""
    if getattr(rt, "held", None):
        return True
    if getattr(rt, "buffer", None):
        return True
    return any(getattr(st, "pending", None) for st in getattr(rt, "states", {}).values())


class KleeneProcessor:
    """The ``StatefulProcessor`` (built by :func:`processor_class` so pyspark stays lazy)."""

    def __init__(self, spec: StreamSpec) -> None:
        self.spec = spec

    def init(self, handle: Any) -> None:
        from ..runtime.engine import start

        self.handle = handle
        self.state = handle.getValueState("kleene", _STATE_SCHEMA)
        self.rt = start(self.spec.task.analyzed)
        self.fresh = self.rt.snapshot()

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        tables = []
        for pdf in rows:
            if len(pdf):
                tables.append(self._to_arrow(pdf))
        yield from self._step(key, tables, self._wm(timerValues))

    def _to_arrow(self, pdf: Any) -> pa.Table:
        """pandas -> Arrow by position (pandas may rename columns), with Spark's types back."""
        ins, target = self.spec.in_schema, self.spec.schema
        if pdf.shape[1] != len(ins):
            raise InputError(f"stream rows have {pdf.shape[1]} columns, expected {len(ins)}: "
                             f"{list(pdf.columns)} vs {ins.names}")
        arrays = [pa.array(pdf.iloc[:, i], type=ins.field(i).type, from_pandas=True)
                  for i in range(len(ins))]
        return pa.Table.from_arrays(arrays, schema=ins).cast(target, safe=False)

    def handleExpiredTimer(self, key: Any, timerValues: Any,
                           expiredTimerInfo: Any) -> Iterator[Any]:
        yield from self._step(key, [], self._wm(timerValues))

    def _wm(self, timer_values: Any) -> int:
        """kleene's watermark in ms (0: none yet): Spark's plus the late margin."""
        wm = int(timer_values.getCurrentWatermarkInMs())
        return wm + self.spec.margin_ms if wm > 0 else 0

    def close(self) -> None:
        return None

    # -----------------------------------------------------------------------------------------
    def _step(self, key: Any, new: list[pa.Table], wm_ms: int) -> Iterator[Any]:
        spec = self.spec
        task = spec.task
        stored = self.state.get() if self.state.exists() else None
        snap, pend_blob, applied = (stored if stored is not None
                                    else (self.fresh, None, None))
        rt = self.rt
        rt.restore(bytes(snap))
        parts = []
        old = _unipc(bytes(pend_blob) if pend_blob else None)
        if old is not None and old.num_rows:
            parts.append(old)
        out = _Out(task)
        late_rows: list[tuple[Any, int]] = []
        applied_us = int(applied) if applied is not None else None
        wm_us = wm_ms * 1000 if wm_ms > 0 else None
        for t in new:
            if wm_us is not None:
                # behind the watermark at arrival: late (Spark's rule), never matched
                tsv = t.column(TS).to_numpy()
                is_late = tsv < wm_us
                if is_late.any():
                    lt = t.filter(pa.array(is_late))
                    late_rows.extend(zip(lt.column(ID).to_pylist(),
                                         lt.column(TS).to_pylist(), strict=True))
                    t = t.filter(pa.array(~is_late))
            if t.num_rows:
                parts.append(t.select(old.column_names) if old is not None else t)
        pending = pa.concat_tables(parts).combine_chunks() if parts else None
        matches: list[Match] = []
        ords: dict[Any, int] = {}
        if pending is not None and pending.num_rows and wm_us is not None:
            ready_mask = pc.less(pending.column(TS), pa.scalar(wm_us, pa.int64()))
            ready = pending.filter(ready_mask)
            pending = pending.filter(pc.invert(ready_mask))
            if ready.num_rows:
                order = np.lexsort((ready.column(ORD).to_numpy(), ready.column(TS).to_numpy()))
                ready = ready.take(pa.array(order))
                ords = dict(zip(ready.column(ID).to_pylist(),
                                ready.column(ORD).to_pylist(), strict=True))
                batch = EventBatch(ready.select([ID, TS, TYPE, *task.attr_cols]), task.time)
                matches += rt.push(batch)
        if wm_us is not None:
            matches += rt.advance(wm_us)
            applied_us = wm_us if applied_us is None else max(applied_us, wm_us)
        for m in matches:
            last = -1
            for b in m.bindings.values():
                for ev in (b if isinstance(b, tuple) else (b,)):
                    last = max(last, ords.get(ev, -1))
            out.add(m, last)
        self.state.update((rt.snapshot(), _ipc(pending) if pending is not None and
                           pending.num_rows else None, applied_us))
        for t in list(self.handle.listTimers()):
            self.handle.deleteTimer(t)
        if pending is not None and pending.num_rows:
            oldest = int(pc.min(pending.column(TS)).as_py())
            self.handle.registerTimer(oldest // 1000 + 1 - self.spec.margin_ms)
        elif _runtime_busy(rt) and wm_ms > 0:
            self.handle.registerTimer(wm_ms + 1 - self.spec.margin_ms)
        if out.n or late_rows:
            yield self._frame(out, late_rows)

    def _frame(self, out: _Out, late_rows: list[tuple[Any, int]]) -> Any:
        import pandas as pd

        task = self.spec.task
        n = out.n
        batch = out.flush()
        pdf = batch.to_pandas(timestamp_as_object=False) if n else pd.DataFrame(
            {f.name: pd.Series([], dtype=object) for f in batch.schema})
        if "match" in pdf.columns and n:
            pdf["match"] = [dict(x) for x in pdf["match"]]
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
        return pdf


def processor_class() -> type:
    """``KleeneProcessor`` as a subclass of pyspark's ``StatefulProcessor``."""
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    return type("KleeneStatefulProcessor", (KleeneProcessor, StatefulProcessor), {})


_PROCESSOR: type | None = None


def _make_processor(spec: StreamSpec) -> Any:
    global _PROCESSOR
    if _PROCESSOR is None:
        _PROCESSOR = processor_class()
        # pickled by reference: the class must be importable under this module name
        _PROCESSOR.__module__ = __name__
        globals()["KleeneStatefulProcessor"] = _PROCESSOR
    return _PROCESSOR(spec)


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


def match_stream(df: Any, query: Any, *, watermark: str, time_col: str,
                 type_col: str | None = None, event_type: str | None = None,
                 id_col: str, order_col: str | None = None, time_unit: str = "s",
                 output: OutputMode = "map", late_margin: str | None = None,
                 udfs: Mapping[str, Callable[..., Any]] | None = None,
                 name: str | None = None) -> Any:
    """Run a query over a streaming DataFrame with event time; returns a streaming DataFrame.

    ``watermark`` is the delay (``"10 seconds"``): kleene's watermark is the largest event time
    seen minus it, and rows are matched once the watermark passes them. Output rows have
    ``kind = 'match'`` (the columns of :func:`kleene.spark.match`) or ``kind = 'late'`` (a row
    that arrived behind the watermark: ``late_id``, ``__end_us`` = its time). Spark itself
    drops rows behind *its* watermark before they reach kleene, so Spark's watermark runs
    ``late_margin`` (default: the watermark delay) behind kleene's: rows up to that much late
    are reported as ``late`` rows; later ones are only counted by Spark
    (``numRowsDroppedByWatermark`` in the query progress). ``id_col`` is required (a stream has
    no row index); ties in time are broken by ``order_col``, else by the id (integer ids).

    Example:
        >>> q = match_stream(sdf, "PATTERN SEQ(A a, B b) PARTITION BY k WITHIN 5 seconds",
        ...                  watermark="5 seconds", time_col="ts", type_col="type",
        ...                  id_col="id")                                # doctest: +SKIP
        >>> q.writeStream.format("parquet").option("checkpointLocation", ck).start(out)
        ...                                                              # doctest: +SKIP
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_type

    from .batch import _ts_expr, analyzed_of, return_fields
    from .plan import plan_query
    from .session import ROCKSDB, require_pyspark

    require_pyspark()
    spark = df.sparkSession
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
    q = analyzed_of(query, udfs=udfs, name=name)
    plan = plan_query(q)
    for what, c in (("time column", time_col), ("type column", type_col),
                    ("id column", id_col), ("order column", order_col)):
        if c is not None and c not in df.columns:
            raise InputError(f"{what} {c!r} is not a column; columns: {', '.join(df.columns)}",
                             column=c)
    if type_col is None and event_type is None:
        raise InputError("pass type_col (a column) or event_type (one type for every row)")
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
    attr_cols = tuple(df.columns)
    ordc = F.col(f"`{order_col}`").cast("long") if order_col is not None else idc
    typ = (F.col(f"`{type_col}`").cast("string") if type_col is not None
           else F.lit(event_type))
    delay_ms = interval_ms(watermark)
    margin_ms = interval_ms(late_margin, "late_margin") if late_margin is not None else delay_ms
    prepared = (df.withColumn(ID, idc).withColumn(TS, ts).withColumn(TYPE, typ)
                .withColumn(ORD, ordc).withColumn(WM, F.timestamp_micros(F.col(TS)))
                .withWatermark(WM, f"{delay_ms + margin_ms} milliseconds"))
    attr_types = {}
    for f in df.schema.fields:
        try:
            attr_types[f.name] = to_arrow_type(f.dataType, timezone="UTC")
        except Exception:  # noqa: BLE001 - unsupported types get JSON text
            continue
    task = TaskSpec(analyzed=q, engine="automaton", time=time, group_cols=(),
                    attr_cols=attr_cols, id_type=id_type, output=output, time_out=time_out,
                    returns=return_fields(q, attr_types), include_internal=True)
    in_fields, fields = [], []
    for f in prepared.schema.fields:
        at = to_arrow_type(f.dataType, timezone="UTC")
        fields.append(pa.field(f.name, at))
        if pa.types.is_timestamp(at):
            at = pa.timestamp("ns", at.tz)
        in_fields.append(pa.field(f.name, at))
    spec = StreamSpec(task, pa.schema(in_fields), pa.schema(fields), margin_ms)
    out_schema = from_arrow_schema(stream_output_schema(task))
    keys = [F.col(f"`{k}`") for k in plan.keys] if plan.mode == "keyed" else [F.lit(0)]
    grouped = prepared.groupBy(*keys)
    return grouped.transformWithStateInPandas(
        statefulProcessor=_make_processor(spec), outputStructType=out_schema,
        outputMode="Append", timeMode="EventTime")


__all__ = ["KleeneProcessor", "StreamSpec", "interval_ms", "match_stream", "processor_class",
           "stream_output_schema"]
