"""The Spark pipeline as backends: ``(AnalyzedQuery, EventBatch) -> list[Match]``.

:func:`evaluate` runs one bounded batch through :func:`kleene.spark.match`;
:func:`evaluate_stream` replays it through :func:`kleene.spark.match_stream` (a bounded file
source, ``availableNow``, a sentinel row that moves the watermark past every event). Both return
the matches in kleene's documented order, so the Spark paths join any suite that runs backends
(kleene.backends registers them as ``spark`` and ``spark-stream``).

Each call is a Spark job (a second or more). For many small ``(query, events)`` pairs at once —
the conformance suite — :func:`evaluate_many` and :func:`evaluate_stream_many` evaluate them all
in ONE job and return per pair its matches or the error it raised:

* batch: every pair's rows go into one DataFrame and ONE ``mapInArrow`` stage; each task hands
  each pair's rows to that pair's own :class:`~kleene.spark.tasks.TaskRunner` (the code
  ``match`` runs), laid out as ``match`` lays them out: keyed (one group per key), single (one
  group) or split (ranges at quantiles of the time, each with its context rows, and the task's
  range ownership check); :func:`kleene.spark.batch.prepare`, ``plan_query`` and
  ``return_fields`` are the real ones. Only the shuffle that places the groups differs (one
  shuffle by pair instead of one per query).
* streaming: one streaming query with ONE stateful operator grouped by (pair, bucket):
  ``match_stream``'s own preparation per pair (:func:`kleene.spark.stream.prepare_stream`) and
  its own operator (:func:`kleene.spark.stream.stateful_operator`), whose processor runs each
  group with its pair's query.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import EngineError
from ..events import EventBatch, Match
from ..events.model import ID, TS, TYPE
from ..semantic.analyzed import AnalyzedQuery, VarKind
from .stream import pickled_error
from .tasks import END_US, LAST_POS, ORD, SEQ, ReturnField, TaskRunner, TaskSpec, output_schema

Pair = tuple[AnalyzedQuery, EventBatch]
Result = list[Match] | Exception

CASE = "__kcase"
GROUP = "__kgroup"
ERROR = "__kerror"
SPLIT_RANGES = 3
"""Split-mode pairs are cut into this many time ranges (as ``match(..., ranges=3)``), so the
range ownership and context rows are exercised even on tiny inputs."""
SENTINEL_TYPE = "__KLEENE_REPLAY_END__"


LOCAL_CONF = {"spark.sql.shuffle.partitions": "4", "spark.ui.showConsoleProgress": "false",
              # hundreds of tiny stages: AQE re-planning doubled the test suite's time
              "spark.sql.adaptive.enabled": "false", "spark.driver.memory": "2g"}
"""Settings of :func:`local_session`: a small local session for many tiny jobs (tests)."""


def local_session() -> Any:
    """A ``local[2]`` session for many tiny jobs (the test suites'; see :data:`LOCAL_CONF`),
    bound to the loopback interface."""
    from .session import get_session

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    session = get_session("local[2]", conf=LOCAL_CONF)
    session.sparkContext.setLogLevel("ERROR")
    return session


def _renamed(t: pa.Table) -> pa.Table:
    """The batch's table as user columns: ``_kid``, ``_kts``, ``_ktype``, attributes, ``_kord``."""
    return (t.rename_columns(["_kid" if n == ID else "_kts" if n == TS else
                              "_ktype" if n == TYPE else n for n in t.column_names])
            .append_column("_kord", pa.array(range(t.num_rows), pa.int64())))


_NONFINITE = {"Infinity": float("inf"), "-Infinity": float("-inf"), "NaN": float("nan")}
"""The strings the JSON output writes for non-finite floats (JSON has no such numbers)."""


def _decoded(v: Any, t: pa.DataType | None) -> Any:
    """A RETURN value read back from a JSON record, as the engine produced it: the strings
    ``"Infinity"``, ``"-Infinity"`` and ``"NaN"`` of a float field (or of a list of floats)
    are floats again; a field of another type keeps its value."""
    if t is None or v is None:
        return v
    if pa.types.is_floating(t) and isinstance(v, str):
        return _NONFINITE.get(v, v)
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and isinstance(v, list):
        return [_decoded(x, t.value_type) for x in v]
    return v


def _matches(records: Sequence[str], analyzed: AnalyzedQuery,
             returns: Sequence[ReturnField] = ()) -> list[Match]:
    """JSON Lines records (already in output order) -> :class:`Match` objects; ``returns``
    (the RETURN fields' Arrow types) turns non-finite floats back into floats."""
    lists = {v.name for v in analyzed.variables.values() if v.kind is VarKind.LIST}
    types = {f.name: f.arrow_type for f in returns}
    result = []
    for rec in records:
        r = json.loads(rec)
        bindings = {k: tuple(v) if k in lists else v for k, v in r["match"].items()}
        expired = r.get("expired")
        values = {k: _decoded(v, types.get(k)) for k, v in r.get("values", {}).items()}
        result.append(Match(r["query"], bindings, int(r["start"]), int(r["end"]),
                            values, None if expired is None else int(expired)))
    return result


def evaluate(analyzed: AnalyzedQuery, events: EventBatch, **options: Any) -> list[Match]:
    """Evaluate on Spark (keyed / split / single as :func:`kleene.spark.explain` says)."""
    from .batch import match
    from .session import get_session

    if events.table.num_rows == 0:
        return []
    spark = get_session()
    df = spark.createDataFrame(_renamed(events.table))
    out = match(df, analyzed, time_col="_kts", type_col="_ktype", id_col="_kid",
                order_col="_kord", time_unit="us", output="json", check=False, **options)
    rows = out.orderBy(END_US, LAST_POS, SEQ).select("record").collect()
    from .batch import return_fields

    types = {f.name: f.type for f in events.table.schema}
    return _matches([r[0] for r in rows], analyzed, return_fields(analyzed, types))


# ---------------------------------------------------------------------------------------------
# many pairs, one job
# ---------------------------------------------------------------------------------------------


class _Columns:
    """Attribute columns of many pairs in one table: one physical column per (name, type)."""

    def __init__(self) -> None:
        self.phys: dict[tuple[str, str], str] = {}

    def name(self, col: str, typ: pa.DataType) -> str:
        key = (col, str(typ))
        if key not in self.phys:
            taken = len([k for k in self.phys if k[0] == col])
            self.phys[key] = col if taken == 0 else f"{col}__k{taken}"
        return self.phys[key]


def _combined(parts: Sequence[tuple[int, pa.Table]]) -> tuple[pa.Table, dict[int, list[
        tuple[str, str]]]]:
    """One table of every pair's rows (``__kcase`` says whose) and, per pair, its
    (physical column, original column) list in the original order."""
    cols = _Columns()
    layout: dict[int, list[tuple[str, str]]] = {}
    tables = []
    for case, t in parts:
        names = [cols.name(f.name, f.type) for f in t.schema]
        layout[case] = list(zip(names, t.column_names, strict=True))
        tables.append(t.rename_columns(names)
                      .append_column(CASE, pa.array([case] * t.num_rows, pa.int64())))
    big = pa.concat_tables(tables, promote_options="default")
    return big, layout


def _split_bounds(ts: np.ndarray[Any, np.dtype[np.int64]], ranges: int) -> tuple[int, ...]:
    """As ``batch._split_bounds(exact=True)``: quantiles of the times, strictly inside."""
    from .batch import inside_bounds

    if ranges <= 1 or len(ts) == 0:
        return ()
    qs = np.quantile(ts, [i / ranges for i in range(1, ranges)], method="inverted_cdf")
    return inside_bounds(qs.tolist(), int(ts.min()), int(ts.max()))


def _layout(analyzed: AnalyzedQuery, t: pa.Table) -> tuple[pa.Table, tuple[str, ...],
                                                            tuple[int, ...] | None]:
    """The pair's rows with a ``__kgroup`` column, as ``batch.distribute`` places them:
    (rows, group columns, split bounds)."""
    from .batch import check_keys
    from .plan import plan_query

    plan = plan_query(analyzed)
    n = t.num_rows
    if plan.mode == "keyed":
        check_keys(plan.keys, t.column_names)
        keys = list(zip(*(t.column(k).to_pylist() for k in plan.keys), strict=True))
        rank: dict[tuple[Any, ...], int] = {}
        group = [rank.setdefault(k, len(rank)) for k in keys]
        return t.append_column(GROUP, pa.array(group, pa.int64())), (GROUP,), None
    if plan.mode == "single":
        return t.append_column(GROUP, pa.repeat(pa.scalar(0, pa.int64()), n)), (), None
    ts = t.column("_kts").to_numpy()
    bounds = _split_bounds(ts, SPLIT_RANGES)
    b = np.asarray(bounds, dtype=np.int64)
    first = np.searchsorted(b, ts - plan.lookahead_us, side="right")
    last = np.searchsorted(b, ts + plan.lookback_us, side="right")
    rows = np.repeat(np.arange(n), last - first + 1)
    ranges = np.concatenate([np.arange(f, l_ + 1) for f, l_ in zip(first, last, strict=True)])
    return (t.take(pa.array(rows)).append_column(GROUP, pa.array(ranges, pa.int64())),
            (GROUP,), bounds)


class _ManyRunner:
    """The ``mapInArrow`` function of :func:`evaluate_many`: rows sorted by (pair, group, ts,
    position) in; each pair's rows go through that pair's own TaskRunner."""

    def __init__(self, specs: dict[int, tuple[TaskSpec, list[tuple[str, str]]]],
                 schema: pa.Schema) -> None:
        self.specs = specs
        self.schema = schema

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        current: int | None = None
        rows: list[pa.RecordBatch] = []
        for rb in batches:
            cases = rb.column(CASE).to_numpy()
            cuts: list[int] = (np.flatnonzero(np.diff(cases)) + 1).tolist()
            starts = [0, *cuts, rb.num_rows]
            for s, e in zip(starts, starts[1:], strict=False):
                if e <= s:
                    continue
                case = int(cases[s])
                if case != current:
                    if current is not None:
                        yield from self._run(current, rows)
                    current, rows = case, []
                rows.append(rb.slice(s, e - s))
        if rows and current is not None:
            yield from self._run(current, rows)

    def _run(self, case: int, rows: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        spec, layout = self.specs[case]
        t = pa.Table.from_batches(rows)
        keep = [ID, TS, TYPE, ORD, GROUP]
        t = t.select(keep + [p for p, _ in layout]).rename_columns(
            keep + [o for _, o in layout])
        try:
            out = list(TaskRunner(spec)(iter(t.to_batches())))
        except Exception as e:  # noqa: BLE001 - reported for this pair, not the whole job
            blob = pickled_error(e)
            yield pa.RecordBatch.from_pydict(
                {"record": [None], END_US: [None], LAST_POS: [None], SEQ: [None],
                 CASE: [case], ERROR: [blob]}, schema=self.schema)
            return
        for b in out:
            yield pa.RecordBatch.from_arrays(
                [*b.columns, pa.array([case] * b.num_rows, pa.int64()),
                 pa.nulls(b.num_rows, pa.binary())], schema=self.schema)


def evaluate_many(pairs: Sequence[Pair]) -> list[Result]:
    """Evaluate many (query, events) pairs on Spark in ONE job (see the module docstring);
    per pair, its matches in output order or the error it raised."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    from .batch import arrow_types, default_partitions, prepare, return_fields
    from .session import get_session

    results: list[Result | None] = [None] * len(pairs)
    parts: list[tuple[int, pa.Table]] = []
    laid: dict[int, tuple[tuple[str, ...], tuple[int, ...] | None]] = {}
    for i, (aq, events) in enumerate(pairs):
        if events.table.num_rows == 0:
            results[i] = []
            continue
        try:
            t, group_cols, bounds = _layout(aq, _renamed(events.table))
        except Exception as e:  # noqa: BLE001 - this pair's error, raised when it is asked for
            results[i] = e
            continue
        parts.append((i, t))
        laid[i] = (group_cols, bounds)
    if parts:
        spark = get_session()
        big, layout = _combined(parts)
        df = spark.createDataFrame(big)
        prep = prepare(df, time_col="_kts", type_col="_ktype", id_col="_kid",
                       order_col="_kord", time_unit="us")
        types = arrow_types(df.schema)
        specs: dict[int, tuple[TaskSpec, list[tuple[str, str]]]] = {}
        schema: pa.Schema | None = None
        for i, _ in parts:
            aq = pairs[i][0]
            group_cols, bounds = laid[i]
            attr = [(p, o) for p, o in layout[i] if p != GROUP]
            try:
                spec = TaskSpec(
                    analyzed=aq, engine="automaton", time=prep.time, group_cols=group_cols,
                    attr_cols=tuple(o for _, o in attr), id_type=prep.id_type, output="json",
                    time_out=prep.time_out,
                    returns=return_fields(aq, {o: types[p] for p, o in attr if p in types},
                                          prep.id_type),
                    range_bounds=bounds, include_internal=True)
                schema = output_schema(spec)
            except Exception as e:  # noqa: BLE001 - this pair's error
                results[i] = e
                continue
            specs[i] = (spec, attr)
        if schema is not None:
            schema = schema.append(pa.field(CASE, pa.int64())).append(
                pa.field(ERROR, pa.binary()))
            parts_n = min(len(specs), default_partitions(spark))
            placed = (prep.df.where(F.col(CASE).isin(list(specs)))
                      .repartition(parts_n, CASE)
                      .sortWithinPartitions(CASE, GROUP, TS, ORD))
            out = placed.mapInArrow(_ManyRunner(specs, schema), from_arrow_schema(schema))
            records: dict[int, list[tuple[int, int, int, str]]] = {i: [] for i in specs}
            for row in out.collect():  # sorted here: a Spark sort costs two more stages
                i = row[CASE]
                if row[ERROR] is not None:
                    results[i] = pickle.loads(row[ERROR])  # noqa: S301 - our own task's bytes
                else:
                    records[i].append((row[END_US], row[LAST_POS], row[SEQ], row["record"]))
            for i, recs in records.items():
                if results[i] is None:
                    results[i] = _matches([r[3] for r in sorted(recs)], pairs[i][0],
                                          specs[i][0].returns)
    return [r if r is not None else [] for r in results]


# ---------------------------------------------------------------------------------------------
# streaming: a bounded replay through match_stream
# ---------------------------------------------------------------------------------------------


def evaluate_stream(analyzed: AnalyzedQuery, events: EventBatch) -> list[Match]:
    """Replay ``events`` through :func:`kleene.spark.match_stream` (one streaming query)."""
    out = evaluate_stream_many([(analyzed, events)])[0]
    if isinstance(out, Exception):
        raise out
    return out


def evaluate_stream_many(pairs: Sequence[Pair]) -> list[Result]:
    """Replay many pairs through ``match_stream``'s stateful operator in ONE streaming query;
    per pair, its matches or the error it raised.

    Every pair's rows are in one bounded file source (``availableNow``), one attribute column
    per (name, type) as in :func:`evaluate_many`, with a ``__kcase`` column saying whose. Per
    pair, :func:`kleene.spark.stream.prepare_stream` (``match_stream``'s own preparation) lays
    out its rows; the union of those goes through ONE
    :func:`~kleene.spark.stream.stateful_operator` grouped by (pair, bucket), whose processor
    runs each group with its pair's query: the code ``match_stream`` runs, per group.

    A second file holds one sentinel row per pair far in the future: once read, the watermark
    passes every real row, the groups' timers fire, every row is fed and every engine closed
    (the pair's ``end_us``: a bounded input ends, so PICK groups without a time window are
    released as ``close()`` releases them); the sentinel itself is not an event. A row
    reported late, or dropped by Spark's watermark, is an error: in a bounded replay nothing
    is behind the watermark. If the streaming query fails outside a pair's processing, the
    pairs are split in halves and replayed again, so the failing pair gets the error.
    """
    try:
        return _replay(pairs)
    except Exception as e:  # noqa: BLE001 - narrowed down to the pair that raised it
        if len(pairs) == 1:
            return [e]
        half = len(pairs) // 2
        return evaluate_stream_many(pairs[:half]) + evaluate_stream_many(pairs[half:])


def _id_column(t: pa.DataType) -> str:
    """The replay operator's id column for ids of type ``t`` (one column per id type)."""
    return ID if pa.types.is_integer(t) else f"{ID}_{t}"


def _replay(pairs: Sequence[Pair]) -> list[Result]:
    import base64

    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    from .session import get_session
    from .stream import KIND, QUERY_IX, prepare_stream, stateful_operator

    results: list[Result | None] = [None] * len(pairs)
    parts: list[tuple[int, pa.Table]] = []
    for i, (_, events) in enumerate(pairs):
        if events.table.num_rows == 0:
            results[i] = []
        else:
            parts.append((i, _renamed(events.table)))
    if not parts:
        return [r if r is not None else [] for r in results]
    spark = get_session()
    big, layout = _combined(parts)
    end = int(pc.max(big.column("_kts")).as_py()) + 1
    far = end + 10**12
    cases = [i for i, _ in parts]
    sentinel = pa.table({f.name: pa.nulls(len(cases), f.type) for f in big.schema})
    for col, vals in ((CASE, cases), ("_kts", [far] * len(cases)),
                      ("_ktype", [SENTINEL_TYPE] * len(cases)),
                      ("_kord", [big.num_rows + i for i in cases])):
        j = sentinel.column_names.index(col)
        sentinel = sentinel.set_column(j, col, pa.array(vals, big.schema.field(col).type))
    tmp = tempfile.mkdtemp(prefix="kleene-replay-")
    try:
        os.makedirs(f"{tmp}/src")
        pq.write_table(big, f"{tmp}/src/p0.parquet")
        pq.write_table(sentinel.cast(big.schema), f"{tmp}/src/p1.parquet")
        src = spark.readStream.schema(spark.read.parquet(f"{tmp}/src").schema) \
            .parquet(f"{tmp}/src")
        queries: dict[int, tuple[TaskSpec, tuple[str, ...], int, int | None]] = {}
        branches: dict[tuple[Any, ...], list[tuple[int, Any]]] = {}
        views: dict[tuple[tuple[str, str], ...], Any] = {}
        for i in cases:
            phys = {o: p for p, o in layout[i]}
            cols = tuple(layout[i])
            if cols not in views:  # this pair's columns under its own names
                views[cols] = src.select(*[F.col(f"`{p}`").alias(o) for p, o in cols])
            try:  # match_stream's own preparation (it reads the view's schema only)
                prep = prepare_stream(views[cols], pairs[i][0], time_col="_kts", type_col="_ktype",
                                      id_col="_kid", order_col="_kord", time_unit="us",
                                      output="json", check=False)
            except Exception as e:  # noqa: BLE001 - this pair's error
                results[i] = e
                continue
            # pairs whose prepared columns are the same expressions of the same source
            # columns share one branch of the operator's input (a branch scans the source)
            sig = (tuple(str(c) for _, c in prep.exprs),
                   tuple((o, phys[o]) for o in prep.inputs))
            branches.setdefault(sig, []).append((i, prep))
            queries[i] = (prep.task, (_id_column(prep.task.id_type), TS, TYPE, ORD,
                                      *[phys[a] for a in prep.task.attr_cols]),
                          prep.buckets, end)
        frames: list[Any] = []
        for (_, inputs), members in branches.items():
            first = members[0][1]
            wanted = {a for _, m in members for a in m.task.attr_cols}
            attrs = list(dict.fromkeys(p for i, _ in members for p, o in layout[i]
                                       if o in wanted))
            # the inputs under the pairs' own names (shared: same signature), the attributes
            # under their source names (an attribute that is also an input has both equal)
            base = (src.where(F.col(CASE).isin([i for i, _ in members]))
                    .select(*[F.col(f"`{p}`").alias(o) for o, p in inputs],
                            *[f"`{a}`" for a in attrs if a not in dict(inputs)], CASE))
            frames.append(base.select(
                *[c.alias(_id_column(first.task.id_type) if n == ID else n)
                  for n, c in first.exprs],
                *[f"`{a}`" for a in attrs], F.col(CASE).alias(QUERY_IX)))
        if frames:
            while len(frames) > 1:  # balanced: a chain of unions is re-analysed per step
                frames = [frames[k].unionByName(frames[k + 1], allowMissingColumns=True)
                          if k + 1 < len(frames) else frames[k]
                          for k in range(0, len(frames), 2)]
            out = stateful_operator(frames[0], queries, delay_ms=1, margin_ms=0, by_query=True)
            name = f"kleene_replay_{os.getpid()}_{abs(hash(tmp))}"
            q = (out.select(KIND, "record", END_US, LAST_POS, SEQ, QUERY_IX)
                 .writeStream.format("memory").queryName(name)
                 .option("checkpointLocation", f"{tmp}/ck").outputMode("append")
                 .trigger(availableNow=True).start())
            try:
                q.awaitTermination()
                dropped = sum(int(op.numRowsDroppedByWatermark)
                              for prog in q.recentProgress for op in prog.stateOperators)
                rows = spark.table(name).collect()
            finally:
                q.stop()
                spark.catalog.dropTempView(name)
            if dropped:
                raise EngineError(f"Spark dropped {dropped} row(s) of a bounded replay behind "
                                  "its watermark")
            records: dict[int, list[tuple[int, int, int, str]]] = {}
            for row in rows:
                i = row[QUERY_IX]
                if row[KIND] == "error":
                    if not isinstance(results[i], Exception):
                        results[i] = pickle.loads(  # noqa: S301 - our own operator's bytes
                            base64.b64decode(row["record"]))
                elif row[KIND] != "match":
                    results[i] = EngineError(
                        f"a bounded replay reported a {row[KIND]!r} row (end {row[END_US]}): "
                        "nothing should be behind the watermark")
                else:
                    records.setdefault(i, []).append(
                        (row[END_US], row[LAST_POS], row[SEQ], row["record"]))
            for i in queries:
                if results[i] is None:
                    results[i] = _matches([r[3] for r in sorted(records.get(i, []))],
                                          pairs[i][0], queries[i][0].returns)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return [r if r is not None else [] for r in results]


__all__ = ["LOCAL_CONF", "evaluate", "evaluate_many", "evaluate_stream", "evaluate_stream_many",
           "local_session"]
