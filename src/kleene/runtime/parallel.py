"""Keyed parallelism (issue 15): the partitions of a PARTITION BY query spread over worker
processes, with an order-preserving merge of their matches.

Every rule of a partitioned query reads one partition only (per-partition positions for
contiguity, count windows and negation; PICK groups, EMIT RECENT and CONSUME never mix two
partitions, since a match's events all share its key). So the stream is split by key:

1. *split*: the partition key of every event is dictionary-encoded (Arrow), and each distinct
   key goes to worker ``crc32(repr(key)) % workers`` (a hash of the key's value, stable from
   run to run and independent of the batch);
2. *match*: each worker runs the ordinary :class:`~kleene.runtime.engine.Runtime` over its share
   of the stream, carrying the events' positions in the whole stream (``GPOS_COL``), so its
   matches carry the same output-order keys as in one process. Workers are forked processes
   (they inherit the compiled plan and the events: nothing is pickled on the way in); worker 0
   runs in the calling process;
3. *merge*: the workers' matches, each list already in output order, are merged by the
   positions of their last events (a stable sort): the result is the single-process output,
   match for match and in order. With ``texts`` (the CLI's JSON Lines output), each worker
   also formats its own matches into output lines (Arrow string arrays) and the merge
   reorders lines, not Match objects: formatting is parallel too, and no Match is pickled.

Used by ``CompiledQuery.run`` / ``kleene.plans.evaluate`` with ``workers=N`` and by
``kleene run --workers N``. There, :class:`KeyedFeed` first sends each chunk to N forked
workers as soon as it is read (matching overlaps reading; the calling process only reads,
splits, merges and writes), and falls back to :func:`run_parallel` after reading when the
input is out of order, short, or a worker reaches a cap.

Streaming (:class:`ParallelStream`, ``compile(q, workers=N).start()``): the calling process is
the coordinator. It decides lateness, buffers out-of-order events and numbers the events in the
whole stream exactly as one :class:`Runtime` does, and forwards each released slice of events
(sorted, with their positions) to persistent forked workers by key hash, telling them the
stream's frontier. Each worker runs an ordinary Runtime (no lateness of its own) and reports
first the earliest position at which it may still release a match
(:meth:`Runtime.release_bound`, known before its matches are written), then its matches a
piece at a time as they are made; the coordinator merges the pieces as they come (a k-way
merge by the last events' positions), writes those before the smallest bound and holds back
the rest, which one runtime would still hold. Every call returns (or writes, ``push_to``)
what one runtime returns for it, in the same order, with memory of a few pieces;
``snapshot`` / ``restore`` save the coordinator's state and each worker's runtime snapshot.
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
import struct
import sys
import time
import traceback
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import field
from numbers import Integral
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import EngineError
from ..events import EventBatch, Match
from ..events.matchtable import (
    MatchBlocks,
    MatchColumns,
    MatchTable,
    concat_columns,
    parts_in_chunks,
)
from ..events.model import ID, TS, TimeInfo, int64_array
from ..frozen import dataclass
from .engine import (
    _FAR_PAST,
    GPOS_COL,
    MAX_MATCHES_PER_CALL,
    SINK_CHUNK,
    Counters,
    Runtime,
    Sink,
    _concat,
    default_workers,
    key_codes,
    safe_loads,
    set_late_aside,
)
from .keyed import (
    MIN_EVENTS_PER_WORKER,
    PARTS_COST,
    parts_estimate,
    parts_pay,
    sequential_reason,
)


@dataclass
class ParallelRun:
    """What a keyed parallel run did (for the CLI summary and the benchmarks)."""

    matches: list[Match]
    """The matches in output order; empty in count mode (``count_only``: the exact count,
    possibly beyond what a list can hold, is ``counters.matches``)."""
    counters: Counters
    workers: int
    """Processes that matched (1: ran sequentially, see ``reason``)."""
    reason: str | None = None
    """Why the run used one process, when it did."""
    cpu: dict[str, float] = field(default_factory=dict)
    """Seconds of the calling process: CPU of its own share and of the merge, wall time
    waiting for the other workers."""
    texts: list[pa.Array] | None = None
    """With ``texts=`` and more than one worker: the output lines of the matches in output
    order (string arrays; ``matches`` is then empty). See :meth:`n_matches`."""

    def n_matches(self) -> int:
        """How many matches the run found (listed, as lines, or counted)."""
        if self.texts is not None:
            return sum(len(t) for t in self.texts)
        return len(self.matches)


def key_workers(table: pa.Table, attrs: Sequence[str], workers: int) -> np.ndarray[Any, Any]:
    """Per row, the worker of its partition key: ``crc32(repr(key)) % workers`` (``key`` the
    tuple of :func:`~kleene.runtime.engine.key_codes`)."""
    dense = _dense_codes(table, attrs)
    if dense is not None:  # no sort: the keys present are found by counting their codes
        codes, dicts = dense
        present = np.flatnonzero(np.bincount(codes))
        per_code = np.zeros(int(present[-1]) + 1, dtype=np.int64)
        per_code[present] = [zlib.crc32(repr(k).encode()) % workers
                             for k in _decode(present.tolist(), dicts)]
        dense_out: np.ndarray[Any, Any] = per_code[codes]
        return dense_out
    inv, keys = key_codes(table, attrs)
    dest = np.array([zlib.crc32(repr(k).encode()) % workers for k in keys], dtype=np.int64)
    out: np.ndarray[Any, Any] = dest[inv.reshape(-1)]
    return out


_DENSE_MAX = 1 << 22
"""Largest product of the key columns' distinct counts that :func:`key_workers` counts in an
array (beyond it, the codes are sorted: :func:`~kleene.runtime.engine.key_codes`)."""


def _dense_codes(table: pa.Table, attrs: Sequence[str]
                 ) -> tuple[np.ndarray[Any, Any], list[list[Any]]] | None:
    """Per row, the mixed-radix code of its key over the key columns' dictionaries (as in
    :func:`~kleene.runtime.engine.key_codes`, before its sort), and the dictionaries; None when
    a column is missing, the table empty or the code space larger than ``_DENSE_MAX``."""
    if not attrs or table.num_rows == 0 or any(a not in table.column_names for a in attrs):
        return None
    codes: np.ndarray[Any, Any] | None = None
    dicts: list[list[Any]] = []
    space = 1
    for a in attrs:
        col = table.column(a)
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        enc = pc.dictionary_encode(col, null_encoding="encode").combine_chunks()
        vals = enc.dictionary.to_pylist()
        space *= max(len(vals), 1)
        if space > _DENSE_MAX:
            return None
        idx = enc.indices.to_numpy(zero_copy_only=False)
        if codes is None:  # one key column: its dictionary indices are the codes (no copy)
            codes = idx if len(attrs) == 1 else idx.astype(np.int64)
        else:
            codes = codes * len(vals) + idx.astype(np.int64)
        dicts.append(vals)
    assert codes is not None
    return codes, dicts


def _decode(codes: list[int], dicts: list[list[Any]]) -> list[tuple[Any, ...]]:
    """The key tuples of mixed-radix ``codes`` (the inverse of :func:`_dense_codes`)."""
    keys = []
    for u in codes:
        parts = []
        for vals in reversed(dicts):
            u, r = divmod(u, len(vals))
            parts.append(vals[r])
        keys.append(tuple(reversed(parts)))
    return keys


# the job a forked worker inherits (set just before forking, cleared after)
_JOB: dict[str, Any] = {}


def _work(w: int, *, rows: bool = True) -> tuple[Any, list[Any], list[int]]:
    """Worker ``w``: match its share of the stream; (positions of the matches' last events,
    the matches (as plain tuples with ``rows``, for the pipe; their output lines, string
    arrays, when the job has a ``texts`` formatter), counters)."""
    job = _JOB
    table: pa.Table = job["table"]
    idx = np.flatnonzero(job["dest"] == w)
    share = table.take(pa.array(idx)).append_column(GPOS_COL, pa.array(idx, pa.int64()))
    rt = _worker_runtime(job["compiled"], job["options"])
    rt.columnar = job["texts"] is not None  # formatted from the columns (plans/runs.py)
    out = rt.push(EventBatch(share, job["time"]))
    out += rt.close()
    return _worker_result(rt, out, job["udfs"], job["texts"], rows=rows)


def _worker_runtime(compiled: Any, options: dict[str, Any]) -> Runtime:
    """A worker's runtime: exact counts in count mode (the counters say them, however huge),
    else the output key of each match kept (the merge's order)."""
    rt = Runtime(compiled, **options)
    if options.get("count_only"):
        rt.count_placeholders = False
    else:
        rt.out_keys = []
    return rt


def _worker_result(rt: Runtime, out: list[Match], udfs: list[Any],
                   texts: Callable[[list[Match]], list[pa.Array]] | None, *,
                   rows: bool = True) -> tuple[Any, list[Any], list[int]]:
    """What a worker hands back: (positions of the matches' last events, the matches -- plain
    tuples with ``rows`` (for the pipe), or their output lines as string arrays with
    ``texts`` --, counters in :func:`_sum_counters`' layout plus each counting UDF's two)."""
    c = rt.counters
    counters = [c.events_in, c.events_processed, c.candidate_events, c.late_events,
                c.matches, c.truncated_runs, c.truncated_matches, c.events_skipped,
                int(c.truncated_exact)]
    for f in udfs:  # calls and hits (rows) this worker made (added up in the parent)
        counters += _udf_counts(f)
    if rt.out_keys is None:  # count only
        return [], [], counters
    # Workers never share a last event (it belongs to one partition), and each worker's list
    # is in output order: the position of the last event alone merges them.
    lasts = rt.out_keys
    if texts is not None:
        return np.asarray(lasts, dtype=np.int64), texts(out), counters
    if not rows:
        return lasts, out, counters
    return lasts, [(m.query, m.bindings, m.start, m.end, m.values) for m in out], counters


def _counted(udfs: Mapping[str, Any] | None) -> list[Any]:
    """The UDFs that count their work: memoizing ones (calls, hits) and vectorized ones
    (calls, rows)."""
    from ..udf import pure_udfs, vectorized_udfs

    return [f for _n, f in sorted({**pure_udfs(udfs or {}),
                                   **vectorized_udfs(udfs or {})}.items())]


def _udf_counts(f: Any) -> list[int]:
    """A counting UDF's two counters: calls and cache hits, or calls and rows."""
    return [f.calls, f.hits if hasattr(f, "hits") else f.rows]


def _add_udf_counts(f: Any, calls: int, second: int) -> None:
    f.calls += calls
    if hasattr(f, "hits"):
        f.hits += second
    else:
        f.rows += second


def _reply_and_exit(conn: Any, res: Any) -> None:
    """A forked worker's last act: its reply, pickled, then ``os._exit`` (no clean-up of the
    parent's state copied into the child)."""
    try:
        conn.send_bytes(pickle.dumps(res, protocol=pickle.HIGHEST_PROTOCOL))
    finally:
        conn.close()
        os._exit(0)


def _child(w: int, conn: Any) -> None:
    gc.disable()  # a collection would touch (and copy) every page inherited from the parent
    try:
        res: Any = ("ok", _work(w))
    except BaseException as e:  # noqa: BLE001 - reported to the parent, one line
        res = ("error", f"{type(e).__name__}: {e}", traceback.format_exc()[-2000:])
    _reply_and_exit(conn, res)


def run_parallel(compiled: Any, events: EventBatch, workers: int,
                 options: dict[str, Any] | None = None, *,
                 udfs: Mapping[str, Any] | None = None,
                 texts: Callable[[list[Match]], list[pa.Array]] | None = None,
                 columnar: bool = False) -> ParallelRun:
    """Evaluate ``compiled`` (a compiled plan) over a bounded, ordered batch with up to
    ``workers`` processes; the matches are exactly those of one process, in the same order.
    The counters of memoizing UDFs (``udfs``, kleene.udf) add up the workers' calls and hits.

    ``texts`` (a formatter: matches -> their output lines, one string per match, e.g.
    :meth:`kleene.events.writers.JsonLinesWriter.texts`): when the run forks, every worker
    formats its own matches and the result holds the merged lines (``ParallelRun.texts``)
    instead of Match objects; in one process the matches come back as usual (``columnar``:
    as a :class:`~kleene.events.matchtable.MatchTable` where the plan hands them over as
    columns or blocks, :attr:`Runtime.columnar`)."""
    options = dict(options or {})
    plan = compiled.plan
    n = len(events)
    if workers < 1:
        raise EngineError(f"workers must be a positive integer, not {workers!r}")
    ts = events.ts
    if n > 1 and not np.all(ts[1:] >= ts[:-1]):
        from ..errors import InputError

        raise InputError("events must be ordered by timestamp")
    reason = sequential_reason(compiled, n, workers)
    dest = None
    if reason is None:
        dest = key_workers(events.table, plan.partition_by, workers)
        if len(np.unique(dest)) < 2:
            reason = "every partition key hashes to one worker"
    if reason is not None or dest is None:
        from .engine import run_batch

        rt = Runtime(compiled, **options)
        rt.columnar = columnar
        if options.get("count_only"):
            rt.count_placeholders = False  # exact counts may be huge: read the counter
        return ParallelRun(run_batch(rt, events), rt.counters, 1, reason)
    counted = _counted(udfs)
    before = [_udf_counts(f) for f in counted]
    was = gc.isenabled()
    gc.disable()  # many small tuples are unpickled and merged: no cyclic collection meanwhile
    try:
        run = _fork_and_merge(compiled, events, workers, dest, options, udfs, texts)
    finally:
        if was:
            gc.enable()
    why = one_call_reason(compiled, options, run.counters)
    if why is None:
        return run
    from .engine import run_batch

    for f, (calls, second) in zip(counted, before, strict=True):  # count the one run only
        _add_udf_counts(f, calls - f.calls, second - _udf_counts(f)[1])
    rt = Runtime(compiled, **options)
    rt.columnar = columnar
    if options.get("count_only"):
        rt.count_placeholders = False
    return ParallelRun(run_batch(rt, events), rt.counters, 1, why)


def _fork_and_merge(compiled: Any, events: EventBatch, workers: int,
                    dest: np.ndarray[Any, Any], options: dict[str, Any],
                    udfs: Mapping[str, Any] | None,
                    texts: Callable[[list[Match]], list[pa.Array]] | None) -> ParallelRun:
    import multiprocessing  # (only here: run_parts forks bare)

    ctx = multiprocessing.get_context("fork")
    count_only = bool(options.get("count_only"))
    _JOB.update(compiled=compiled, table=events.table, dest=dest, options=options,
                time=events.time, udfs=_counted(udfs),
                texts=None if count_only else texts)
    procs = []
    cpu: dict[str, float] = {}
    try:
        for w in range(1, workers):
            recv, send = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_child, args=(w, send), daemon=True)
            p.start()
            send.close()
            procs.append((p, recv))
        pure = _JOB["udfs"]
        before = [_udf_counts(f) for f in pure]
        c0 = time.process_time()
        results = [_work(0, rows=False)]
        cpu["own share"] = time.process_time() - c0
        w0 = time.perf_counter()
        for p, recv in procs:
            try:
                res = pickle.loads(recv.recv_bytes())  # noqa: S301 - our own child's bytes
            except EOFError:
                raise EngineError(f"keyed parallel run: worker process {p.pid} died "
                                  f"(exit code {p.exitcode})") from None
            if res[0] != "ok":
                raise EngineError(f"keyed parallel run: a worker failed: {res[1]}")
            lasts, rows, cnt = res[1]
            results.append((lasts, rows if count_only or texts is not None
                             else [Match(*r) for r in rows], cnt))
        cpu["wait"] = time.perf_counter() - w0
        # the parent's counters already hold its own share; add the children's
        for (_l, _r, cnt) in results[1:]:
            for i, f in enumerate(pure):
                _add_udf_counts(f, cnt[9 + 2 * i] - before[i][0],
                                cnt[10 + 2 * i] - before[i][1])
    finally:
        _JOB.clear()
        for p, recv in procs:
            recv.close()
            p.join(timeout=5)
    counters = _sum_counters(c for _k, _r, c in results)
    if options.get("count_only"):
        return ParallelRun([], counters, workers)  # the count is counters.matches
    c0 = time.process_time()
    # each worker's list is in output order and no two share a last event: a stable sort of
    # the concatenated last positions is the merge
    lasts = np.concatenate([np.asarray(k, dtype=np.int64) for k, _r, _c in results])
    if texts is not None:
        order = np.argsort(lasts, kind="stable")
        lines = list(_merged_texts([t for _k, r, _c in results for t in r], order))
        cpu["merge"] = time.process_time() - c0
        return ParallelRun([], counters, workers, cpu=cpu, texts=lines)
    every = [m for _k, r, _c in results for m in r]
    matches = [every[i] for i in np.argsort(lasts, kind="stable").tolist()]
    cpu["merge"] = time.process_time() - c0
    return ParallelRun(matches, counters, workers, cpu=cpu)


# ---------------------------------------------------------------------------------------------
# a bounded input fed to the workers while it is read (reading overlaps matching)
# ---------------------------------------------------------------------------------------------

def _feed_child(w: int, conn: Any, compiled: Any, options: dict[str, Any], tinfo: TimeInfo,
                texts: Callable[[list[Match]], list[pa.Array]] | None, udfs: list[Any]) -> None:
    """A feed worker: pushes each share it is sent (the path of an Arrow IPC file holding a
    table with ``GPOS_COL``, deleted once read) through one Runtime; on ``b"end"`` closes it
    and replies as :func:`_work` does, or ``("redo", why)`` when the chunked run might differ
    from one push (a cap reached, an error)."""
    gc.freeze()
    gc.disable()  # as _work: no collection of the inherited pages, nor of the many matches
    res: Any
    try:
        rt = _worker_runtime(compiled, options)
        out: list[Match] = []
        while True:
            try:
                data = conn.recv_bytes()
            except (EOFError, OSError):  # the parent gave up (or died)
                os._exit(0)
            if data == b"end":
                break
            path = data.decode()
            with pa.OSFile(path) as source:  # read into memory: the file's space is freed now
                share = pa.ipc.open_stream(source).read_all()
            os.unlink(path)
            out += rt.push(EventBatch(share, tinfo))
        out += rt.close()
        c = rt.counters
        cap = rt.max_matches_per_call
        if c.truncated_runs or c.truncated_matches or c.events_skipped or c.late_events or (
                cap is not None and c.matches >= cap):
            # a cap counts per call: one push over the whole share may decide otherwise
            res = ("redo", "a cap was reached")
        else:
            res = ("ok", _worker_result(rt, out, udfs, texts), time.process_time())
    except BaseException as e:  # noqa: BLE001 - one push over the share reports it
        res = ("redo", f"{type(e).__name__}: {e}")
    _reply_and_exit(conn, res)


class KeyedFeed:
    """Keyed parallelism over a bounded input that is still being read: each chunk, as soon
    as it is read, is numbered in the whole stream and split by key hash to ``workers`` forked
    processes that match while the calling process reads on (it matches nothing itself: it
    reads, splits, merges and writes). :meth:`finish` returns what :func:`run_parallel` returns
    over the whole input, match for match and in order, or None: then run
    :func:`run_parallel` (nothing was forked, the input was out of order, or the chunked run
    may differ from one push: a cap was reached or a worker failed).

    Chunks must come in input order; the feed is exact only while the input is in time order
    (a bounded run then sorts nothing): call :meth:`abandon` at the first chunk out of order.
    Workers are forked once ``min_events`` events are read (before, one process may run)."""

    def __init__(self, compiled: Any, workers: int, options: dict[str, Any], *,
                 udfs: Mapping[str, Any] | None = None,
                 texts: Callable[[list[Match]], list[pa.Array]] | None = None,
                 min_events: int = 2 * MIN_EVENTS_PER_WORKER) -> None:
        if workers < 2:
            raise EngineError(f"a keyed feed needs at least 2 workers, not {workers!r}")
        self.compiled = compiled
        self.workers = workers
        self.options = dict(options)
        self.count_only = bool(self.options.get("count_only"))
        self.texts = None if self.count_only else texts
        self.udfs = _counted(udfs)
        self.min_events = min_events
        self.pending: list[pa.Table] = []
        self.n = 0
        self.used = np.zeros(workers, dtype=bool)
        self.procs: list[tuple[Any, Any]] = []
        self.before: list[list[int]] = []
        self.time: TimeInfo | None = None
        self.active = True
        self.cpu: dict[str, float] = {"split": 0.0}
        """CPU seconds of this process splitting and merging, wall seconds waiting for the
        workers at the end, and each worker's CPU seconds."""
        self.dir: str | None = None
        """Where the shares wait for their worker (in memory: /dev/shm where there is one):
        a pipe would make this process wait whenever a worker is busy."""
        self.redo: str | None = None
        """Why a worker asked for the batch path instead (a cap reached, an error), if one did."""
        self.one_process = False
        """The workers' result must be one process's (:func:`one_call_reason`): the batch
        path then runs in one process, not over workers again."""
        self.sent = 0

    def push(self, batch: EventBatch) -> None:
        """The next chunk of the input (in input order, not behind any earlier event)."""
        if not self.active or len(batch) == 0:
            return
        if self.time is None:
            self.time = batch.time
        c0 = time.process_time()
        t = batch.table
        t = t.append_column(GPOS_COL, pa.array(np.arange(self.n, self.n + t.num_rows,
                                                         dtype=np.int64)))
        self.n += t.num_rows
        try:
            if not self.procs:
                self.pending.append(t)
                if self.n >= self.min_events:
                    self._start()
                    pending, self.pending = self.pending, []
                    for p in pending:
                        self._send(p)
            else:
                self._send(t)
        except OSError as e:  # no room for the shares, no process, or a worker that already
            # replied after an error (a broken pipe): the batch path after reading
            self.redo = self._reply_of_a_leaver() or f"{type(e).__name__}: {e}"
            self.abandon()
        self.cpu["split"] += time.process_time() - c0

    def _reply_of_a_leaver(self) -> str | None:
        """The reason of a worker that replied ``redo`` mid-stream and left (so a share could
        not be sent to it), if one did."""
        for _p, conn in self.procs:
            try:
                if conn.poll(0.5):
                    res = pickle.loads(conn.recv_bytes())  # noqa: S301 - our own child's bytes
                    if res[0] != "ok":
                        return str(res[1])
            except (EOFError, OSError):
                continue
        return None

    def abandon(self) -> None:
        """Give up: the workers stop and nothing they did is used."""
        self.active = False
        self.pending = []
        procs, self.procs = self.procs, []
        for p, conn in procs:
            conn.close()  # the worker sees EOF and leaves
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
        if self.dir is not None:
            _remove_folder(self.dir)
            self.dir = None

    def finish(self) -> ParallelRun | None:
        """End of input: the workers' merged result (None: run :func:`run_parallel`)."""
        if not self.active or not self.procs:
            self.abandon()
            return None
        procs, self.procs = self.procs, []
        results = []
        w0 = time.perf_counter()
        try:
            for _p, conn in procs:
                try:
                    conn.send_bytes(b"end")
                except OSError:  # it already replied ("redo": an error mid-stream) and left
                    pass
            for p, conn in procs:
                try:
                    res = pickle.loads(conn.recv_bytes())  # noqa: S301 - our own child's bytes
                except EOFError:
                    raise EngineError(f"keyed parallel run: worker process {p.pid} died "
                                      f"(exit code {p.exitcode})") from None
                if res[0] != "ok":
                    self.active = False
                    self.redo = res[1]
                    return None
                results.append(res[1])
                self.cpu[f"worker {len(results)}"] = res[2]  # its CPU seconds, all told
        finally:
            self.procs = procs
            self.abandon()
        self.cpu["wait"] = time.perf_counter() - w0
        why = one_call_reason(self.compiled, self.options, _sum_counters(r[2] for r in results))
        if why is not None:
            self.active = False
            self.redo, self.one_process = why, True
            return None
        workers, reason = self.workers, None
        if int(self.used.sum()) < 2:
            workers, reason = 1, "every partition key hashes to one worker"
        return _merged(results, self.udfs, self.before, workers, reason, self.cpu,
                       self.texts, count_only=self.count_only)

    def _start(self) -> None:
        import multiprocessing  # (only here: run_parts forks bare)

        ctx = multiprocessing.get_context("fork")
        self.before = [_udf_counts(f) for f in self.udfs]
        self.dir = _share_folder("kleene-feed-")
        self.sent = 0
        for w in range(self.workers):
            mine, theirs = ctx.Pipe(duplex=True)
            p = ctx.Process(target=_feed_child,
                            args=(w, theirs, self.compiled, self.options, self.time,
                                  self.texts, self.udfs), daemon=True)
            p.start()
            theirs.close()
            self.procs.append((p, mine))

    def _send(self, t: pa.Table) -> None:
        dest = key_workers(t, self.compiled.plan.partition_by, self.workers)
        for w, (_p, conn) in enumerate(self.procs):
            mask = dest == w
            if not mask.any():
                continue
            self.used[w] = True
            share = t.filter(pa.array(mask))
            assert self.dir is not None
            path = os.path.join(self.dir, f"{self.sent}.arrow")
            self.sent += 1
            with pa.OSFile(path, "wb") as sink, pa.ipc.new_stream(sink, share.schema) as wr:
                wr.write_table(share)
            conn.send_bytes(path.encode())

    def __del__(self) -> None:
        try:
            self.abandon()
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown
            pass


# ---------------------------------------------------------------------------------------------
# an input read in parts by the workers themselves (no reading in the calling process)
# ---------------------------------------------------------------------------------------------

@dataclass
class PartRead:
    """What a worker read of its part of the input (see :func:`run_parts`)."""

    table: pa.Table | None
    """The part's events in input order, with ids counted from 0 in the part (None: see
    ``redo``)."""
    ids_taken: int = 0
    """Ids the part took (its rows, bad ones included, and its blank lines): the ids of the
    next part start there."""
    time: TimeInfo = field(default_factory=TimeInfo)
    """How the input's timestamps print back."""
    info: Any = None
    """Anything the caller wants back from the worker (picklable: its read report, ...)."""
    redo: str | None = None
    """Why the part cannot be read apart (a bad row, a type widened, ...): then the whole
    input is read in one process, as without parts."""


@dataclass
class PartsRun:
    """What :func:`run_parts` did: the run (None: read and run as usual, ``why`` says why),
    each part's ``info`` and the wall seconds until every part was read and exchanged."""

    run: ParallelRun | None
    infos: list[Any]
    why: str | None = None
    read_s: float = 0.0
    one_process: bool = False
    """The run must be one process's (:func:`one_call_reason`), not another split."""


def run_parts(compiled: Any, parts: int, read: Callable[[int], PartRead],
              options: dict[str, Any], *, udfs: Mapping[str, Any] | None = None,
              texts: Callable[[list[Match]], list[pa.Array]] | None = None,
              offset_ids: bool = True) -> PartsRun:
    """Keyed parallelism with the reading in the workers too: ``parts`` forked workers each
    read part ``w`` of the input (``read(w)``: consecutive parts, in input order), split it by
    key hash and hand each other worker its share (Arrow IPC files in /dev/shm); then each
    worker numbers the events of its keys in the whole input (the parts' event counts, and
    their ids with ``offset_ids``: the ids taken by the parts before), matches them and formats
    its matches as :func:`run_parallel`'s workers do. The result is that of
    :func:`run_parallel` over the whole input read in one process, match for match and in
    order -- or ``run=None`` with the reason when it might not be: a part that asks for it
    (:attr:`PartRead.redo`), events out of time order (within or across parts), a worker
    that failed (an error or a cap: the usual run reports it)."""
    if parts < 2:
        raise EngineError(f"a run in parts needs at least 2 workers, not {parts!r}")
    count_only = bool(options.get("count_only"))
    texts = None if count_only else texts
    counted = _counted(udfs)
    before = [_udf_counts(f) for f in counted]
    folder = _share_folder("kleene-parts-")
    buckets = parts * BUCKETS_PER_WORKER
    procs: list[tuple[Any, Any]] = []
    w0 = time.perf_counter()
    failed = True  # until every worker replied: the others are killed, not waited for
    try:
        for w in range(parts):
            procs.append(_fork(_part_child, w, parts, compiled, read, options, texts,
                               counted, folder, offset_ids, buckets, others=procs))
        # each part is released to every worker as soon as it and the parts before it are
        # read (its offsets are then known): a worker matches the shares of the parts
        # released while the others still read (no barrier after reading)
        reads: list[Any] = []
        infos: list[Any] = []
        why = None
        ids_before = events_before = 0
        last = None
        for p, conn in procs:
            r = _reply(p, conn)
            reads.append(r)
            infos.append(r[6] if r[0] == "read" else None)
            if r[0] != "read":
                why = str(r[1])
                break
            if r[1]:  # each part is in time order (checked there); and after the last?
                if last is not None and r[3] < last:
                    why = "the input is out of time order (the run sorts it)"
                    break
                last = r[4]
            release = pickle.dumps(("part", ids_before, events_before, r[5]))
            for _p, c in procs:
                try:
                    c.send_bytes(release)
                except OSError:  # a worker that left: its reply says why
                    pass
            ids_before += r[2]
            events_before += r[1]
        if why is not None:
            infos += [None] * (parts - len(infos))
            return PartsRun(None, infos, why)
        read_s = time.perf_counter() - w0
        cpu: dict[str, float] = {}
        results = []
        for w, (p, conn) in enumerate(procs):
            res = _reply(p, conn)
            if res[0] != "ok":
                return PartsRun(None, infos, str(res[1]), read_s)
            lasts, lines, counts = res[1]
            if isinstance(lines, str):  # the worker's lines, in a shared file (_write_lines)
                lines = _read_lines(lines)
            results.append((lasts, lines, counts))
            cpu[f"worker {w + 1}"] = res[2]
            for k, v in res[3].items():
                cpu[f"worker {w + 1} {k}"] = v
        why = one_call_reason(compiled, options, _sum_counters(r[2] for r in results))
        if why is not None:
            return PartsRun(None, infos, why, read_s, one_process=True)
        used = {b for r in reads for b, k in enumerate(r[5]) if k}
        workers, reason = parts, None
        if len(used) < 2:
            workers, reason = 1, "every partition key hashes to one bucket"
        failed = False
        run = _merged(results, counted, before, workers, reason, cpu, texts,
                      count_only=count_only)
        return PartsRun(run, infos, None, read_s)
    finally:
        for p, conn in procs:
            conn.close()  # a worker still waiting sees EOF and leaves
            if failed:  # (one may be matching a released part: nothing it makes is kept)
                p.kill()
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
        _remove_folder(folder)


class _Pipe:
    """One end of a pair of pipes that carries whole messages as ``multiprocessing``'s
    ``Connection`` does (``send_bytes``, ``recv_bytes``; :class:`EOFError` once the other end
    is closed), without importing it: a run in parts forks its workers bare (:func:`_fork`)."""

    def __init__(self, rfd: int, wfd: int) -> None:
        self.rfd, self.wfd = rfd, wfd

    def send_bytes(self, data: bytes) -> None:
        view = memoryview(struct.pack("<Q", len(data)) + data) if len(data) < 1 << 16 else None
        if view is None:
            self._write(memoryview(struct.pack("<Q", len(data))))
            view = memoryview(data)
        self._write(view)

    def _write(self, view: memoryview) -> None:
        while len(view):
            view = view[os.write(self.wfd, view):]

    def recv_bytes(self) -> bytes:
        return bytes(self.recv_buffer())

    def recv_buffer(self) -> bytearray:
        """The next message, as read (no copy)."""
        (n,) = struct.unpack("<Q", self._read(8))
        return self._read(n)

    def _read(self, n: int) -> bytearray:
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = os.readv(self.rfd, [view[got:]])
            if k == 0:
                raise EOFError
            got += k
        return buf

    def close(self) -> None:
        for fd in (self.rfd, self.wfd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.rfd = self.wfd = -1


class _Forked:
    """A worker forked by :func:`_fork`: ``multiprocessing.Process``'s ``pid``, ``exitcode``,
    ``join``, ``is_alive`` and ``kill``, as :func:`run_parts` uses them."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.exitcode: int | None = None

    def _poll(self, flags: int) -> bool:
        if self.exitcode is None:
            try:
                pid, status = os.waitpid(self.pid, flags)
            except ChildProcessError:
                self.exitcode = -1
                return True
            if pid == 0:
                return False
            self.exitcode = os.waitstatus_to_exitcode(status)
        return True

    def is_alive(self) -> bool:
        return not self._poll(os.WNOHANG)

    def join(self, timeout: float | None = None) -> None:
        if timeout is None:
            self._poll(0)
            return
        end = time.monotonic() + timeout
        while not self._poll(os.WNOHANG) and time.monotonic() < end:
            time.sleep(0.005)

    def kill(self) -> None:
        if self.exitcode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _fork(target: Callable[..., None], w: int, *args: Any,
          others: Sequence[tuple[_Forked, _Pipe]] = ()) -> tuple[_Forked, _Pipe]:
    """Fork a worker that runs ``target(w, args[0], conn, *args[1:])`` (``conn``: its end of
    the pipes) and leaves with ``os._exit``; (the worker, this process's end). The worker
    closes its copies of the ``others``' pipes (so that each sees EOF when this process
    closes its end, whatever its siblings do). A bare
    ``os.fork``, as ``multiprocessing``'s fork start method does, without its ~18 ms of
    imports in the calling process (docs/engine.md, "Reading in parts")."""
    down_r, down_w = os.pipe()  # parent -> worker
    up_r, up_w = os.pipe()  # worker -> parent
    for stream in (sys.stdout, sys.stderr):  # nothing buffered is written twice
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    pid = os.fork()
    if pid == 0:  # the worker
        code = 1
        try:
            os.close(down_w)
            os.close(up_r)
            for _p, conn in others:
                conn.close()
            target(w, args[0], _Pipe(down_r, up_w), *args[1:])
            code = 0
        finally:
            os._exit(code)
    os.close(down_r)
    os.close(up_w)
    return _Forked(pid), _Pipe(up_r, down_w)


def _reply(p: Any, conn: Any) -> Any:
    """A part worker's next reply; a worker that died is an error of the run."""
    try:
        return pickle.loads(conn.recv_bytes())  # noqa: S301 - our own child's bytes
    except EOFError:
        p.join(timeout=1)  # (its exit code)
        raise EngineError(f"keyed parallel run: worker process {p.pid} died "
                          f"(exit code {p.exitcode})") from None


def one_call_reason(compiled: Any, options: Mapping[str, Any], counters: Counters
                    ) -> str | None:
    """Why keyed workers' matches may not be one process's, from their counters added up;
    None when they are. A cap that counts per call (``max_matches_per_call``) or stops a
    partition for the rest of the call (``on_cap="truncate"``) decides by the call, and a
    bounded run in one process is one call over the whole input, where each worker's calls
    see only its share: when the matches reach that cap, or a worker truncated, one process
    must run it (and then raises or truncates as it does)."""
    if counters.truncated_runs or counters.truncated_matches or counters.events_skipped:
        return "a worker truncated at a cap (a cap counts per call: one process decides)"
    cap = options.get("max_matches_per_call", MAX_MATCHES_PER_CALL)
    if cap is None or counters.matches < cap:
        return None
    if Runtime(compiled, **options).max_matches_per_call is None:  # count mode: no cap
        return None
    return (f"the matches reach max_matches_per_call={cap} (a cap counts per call: one "
            "process decides)")


BUCKETS_PER_WORKER = 32
"""Key buckets per worker in a run in parts: the workers take buckets from one queue as they
finish the last (:func:`_match_buckets`), so a worker on a slower core does fewer of them
instead of the run waiting for it (docs/engine.md, "Reading in parts")."""

OPEN_BUCKETS = 2
"""Buckets a worker takes before every part is read (it matches their released parts
meanwhile); the rest wait in the queue for whichever worker is free first."""


def _part_child(w: int, parts: int, conn: Any, compiled: Any,
                read: Callable[[int], PartRead], options: dict[str, Any],
                texts: Callable[[list[Match]], list[pa.Array]] | None, udfs: list[Any],
                folder: str, offset_ids: bool, buckets: int) -> None:
    """Part worker ``w``: read part ``w``, split it by key hash into ``buckets`` IPC files
    (one per key bucket) and reply ``("read", events, ids taken, first ts, last ts, events
    per bucket, info)`` (or ``("redo", why)``); then match buckets taken from the shared
    queue (:func:`_match_buckets`) and reply ``("ok", (last positions, lines, counters),
    CPU seconds, phases)``."""
    gc.freeze()
    gc.disable()  # as _work: no collection of the inherited pages, nor of the many matches
    # the workers share the cores: Arrow threads beyond a worker's share of them (the CSV
    # parser's, csvfile._Parser) only take turns with the other workers, at a cost
    pa.set_cpu_count(max(1, default_workers() // parts))
    res: Any
    phases: dict[str, float] = {}
    try:
        res, tinfo = _read_part(w, compiled, read, folder, buckets, phases)
        conn.send_bytes(pickle.dumps(res, protocol=pickle.HIGHEST_PROTOCOL))
        if res[0] != "read":
            raise SystemExit
        result = _match_buckets(w, parts, buckets, conn, compiled, options, texts, udfs,
                                folder, offset_ids, tinfo, phases)
        c0 = time.process_time()
        if texts is not None:  # the lines go by a shared file, not pickled through the pipe
            result = (result[0], _write_lines(folder, w, result[1]), result[2])
        phases["format"] += time.process_time() - c0
        res = ("ok", result, time.process_time(), phases)
    except SystemExit:
        conn.close()
        os._exit(0)
    except BaseException as e:  # noqa: BLE001 - the usual run reports it
        res = ("redo", f"{type(e).__name__}: {e}")
    _reply_and_exit(conn, res)


@dataclass
class _Bucket:
    """A key bucket a part worker took: its runtime, the next part to push, its output."""

    b: int
    rt: Runtime
    next: int = 0
    out: Any = field(default_factory=list)
    events: int = 0


def _match_buckets(w: int, parts: int, buckets: int, conn: Any, compiled: Any,
                   options: dict[str, Any], texts: Callable[[list[Match]], list[pa.Array]] | None,
                   udfs: list[Any], folder: str, offset_ids: bool, tinfo: TimeInfo,
                   phases: dict[str, float]) -> tuple[Any, Any, list[int]]:
    """Match key buckets until the queue is empty; (the matches' last positions, their lines
    (or rows), counters as :func:`_worker_result` gives them), over every bucket matched.

    The calling process releases the parts in input order, each as soon as it and the parts
    before it are read (``("part", ids before it, events before it, events per bucket)``).
    A bucket (its own Runtime: the keys of two buckets never meet) takes the share of each
    released part in order, renumbered in the whole input. Buckets are taken from one queue
    (a claim file per bucket, created exclusively: whoever creates it matches the bucket), in
    the order of their events in the first part, largest first. Before every part is released
    a worker holds up to ``OPEN_BUCKETS`` buckets and matches their released parts; after, it
    matches one bucket to its end, then takes the next."""
    released: list[tuple[int, int]] = []
    order: list[int] = []

    def take_release() -> None:
        try:
            _part, ids_before, events_before, counts = pickle.loads(  # noqa: S301
                conn.recv_bytes())
        except (EOFError, OSError):  # the parent gave up (or died)
            raise SystemExit from None
        if not released:  # the queue's order: the first part's events, largest first
            order.extend(sorted(range(buckets), key=lambda b: (-counts[b], b)))
        released.append((ids_before, events_before))

    claimed = 0

    def claim() -> _Bucket | None:
        nonlocal claimed
        while claimed < len(order):
            b = order[claimed]
            claimed += 1
            try:
                os.close(os.open(os.path.join(folder, f"claim-{b}"),
                                 os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                continue
            rt = _worker_runtime(compiled, options)
            rt.columnar = texts is not None  # formatted from the columns (plans/runs.py)
            return _Bucket(b, rt)
        return None

    gather = match = fmt = 0.0
    lasts: list[Any] = []
    lines: list[Any] = []
    matched: list[int] = []  # the events of each bucket this worker matched
    counters: list[int] | None = None

    def advance(bk: _Bucket) -> None:
        nonlocal gather, match
        while bk.next < len(released):
            v = bk.next
            bk.next += 1
            c0 = time.process_time()
            path = os.path.join(folder, f"{v}-{bk.b}.arrow")
            if not os.path.exists(path):  # (no event of the bucket in part v)
                continue
            # mapped, not copied: the arrays read the file's pages (which stay while they
            # are mapped after the unlink, and are freed with them)
            share = _read_ipc(path)
            os.unlink(path)
            ids_before, events_before = released[v]
            i = share.schema.get_field_index(GPOS_COL)
            share = share.set_column(i, GPOS_COL, pc.add(share.column(i), events_before))
            if offset_ids and ids_before:
                k = share.schema.get_field_index(ID)
                share = share.set_column(k, ID, pc.add(share.column(k), ids_before))
            c1 = time.process_time()
            gather += c1 - c0
            bk.events += share.num_rows
            bk.out = _concat(bk.out, bk.rt.push(EventBatch(share, tinfo)))
            match += time.process_time() - c1

    def finish(bk: _Bucket) -> None:
        nonlocal match, fmt, counters
        c0 = time.process_time()
        out = _concat(bk.out, bk.rt.close())
        c1 = time.process_time()
        match += c1 - c0
        got_lasts, got, cnt = _worker_result(bk.rt, out, udfs, texts)
        fmt += time.process_time() - c1
        lasts.append(np.asarray(got_lasts, dtype=np.int64))
        lines.extend(got)
        matched.append(bk.events)
        if counters is None:
            counters = list(cnt)
        else:  # the runtime's counters add up; the UDFs' are the process's (the last)
            counters[:8] = [a + b for a, b in zip(counters[:8], cnt[:8], strict=True)]
            counters[8] = min(counters[8], cnt[8])
            counters[9:] = cnt[9:]

    active: list[_Bucket] = []
    take_release()
    while True:
        for bk in list(active):
            advance(bk)
            if bk.next == parts:
                finish(bk)
                active.remove(bk)
        if len(released) == parts:
            if active:
                continue
            taken = claim()
            if taken is None:
                break
            active.append(taken)
            continue
        if len(active) < OPEN_BUCKETS:
            taken = claim()
            if taken is not None:
                active.append(taken)
                continue
        take_release()
    phases["gather"], phases["match"], phases["format"] = gather, match, fmt
    phases["buckets"] = sum(1 for n in matched if n)  # (those with events)
    if counters is None:  # (this worker matched no bucket)
        rt = _worker_runtime(compiled, options)
        counters = _worker_result(rt, [], udfs, texts)[2]
    every = np.concatenate(lasts) if lasts else np.zeros(0, np.int64)
    return every, lines, counters


def _read_part(w: int, compiled: Any, read: Callable[[int], PartRead], folder: str,
               buckets: int, phases: dict[str, float]) -> tuple[Any, TimeInfo]:
    """Read part ``w`` and write its share of every key bucket (see :func:`_part_child`);
    (the reply, the input's time format)."""
    c0 = time.process_time()
    try:
        got = read(w)
    except BaseException as e:  # noqa: BLE001 - the usual read reports it
        return ("redo", f"{type(e).__name__}: {e}"), TimeInfo()
    if got.redo is not None or got.table is None:
        return ("redo", got.redo or "the part was not read"), got.time
    c1 = time.process_time()
    phases["read"] = c1 - c0
    table = got.table
    n = table.num_rows
    ts = table.column(TS).to_numpy() if n else np.zeros(0, np.int64)
    if n > 1 and not bool(np.all(ts[1:] >= ts[:-1])):
        return ("redo", "the input is out of time order (the run sorts it)"), got.time
    dest = (key_workers(table, compiled.plan.partition_by, buckets) if n
            else np.zeros(0, np.int64))
    # each bucket's rows in input order (a stable sort of 16-bit codes is a radix sort: 4 ms
    # for 500k rows, 29 ms as int64)
    order = np.argsort(dest.astype(np.uint16) if buckets <= 1 << 16 else dest, kind="stable")
    bounds = np.searchsorted(dest[order], np.arange(buckets + 1))
    taken = table.take(int64_array(order)) if n else table
    for b in range(buckets):
        lo, hi = int(bounds[b]), int(bounds[b + 1])
        if lo == hi:
            continue
        share = taken.slice(lo, hi - lo).append_column(GPOS_COL, int64_array(order[lo:hi]))
        path = os.path.join(folder, f"{w}-{b}.arrow")
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_stream(sink, share.schema) as wr:
            wr.write_table(share)
    phases["split"] = time.process_time() - c1
    first = int(ts[0]) if n else 0
    last = int(ts[-1]) if n else 0
    counts = np.diff(bounds).tolist()
    return ("read", n, got.ids_taken, first, last, counts, got.info), got.time


def _read_ipc(path: str) -> pa.Table:
    """The table of an Arrow IPC stream file, memory-mapped (no copy, no parse)."""
    source = pa.memory_map(path)  # (the arrays keep the mapping; it goes with them)
    return pa.ipc.open_stream(source).read_all()


def _write_lines(folder: str, w: int, lines: list[pa.Array]) -> str:
    """Write worker ``w``'s output lines (string arrays) as an Arrow IPC stream file in
    ``folder`` for the calling process to map (:func:`_read_lines`); its path."""
    path = os.path.join(folder, f"lines-{w}.arrow")
    if len({a.type for a in lines}) > 1:  # (one stream has one schema)
        lines = [a.cast(pa.large_string()) for a in lines]
    schema = pa.schema([("line", lines[0].type if lines else pa.string())])
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_stream(sink, schema) as wr:
        for a in lines:
            wr.write_batch(pa.record_batch([a], schema=schema))
    return path


def _read_lines(path: str) -> list[pa.Array]:
    """The lines :func:`_write_lines` wrote, mapped from the file (which may go now)."""
    lines = [c for c in _read_ipc(path).column(0).chunks if len(c)]
    os.unlink(path)
    return lines


def _merged(results: list[Any], udfs: list[Any], before: list[list[int]], workers: int,
            reason: str | None, cpu: dict[str, float],
            texts: Callable[[list[Match]], list[pa.Array]] | None, *,
            count_only: bool) -> ParallelRun:
    """The run of forked workers' results (:func:`_worker_result`, matches as rows or lines):
    the UDF counters and counters added up, the matches merged into output order."""
    for (_l, _r, cnt) in results:
        for i, f in enumerate(udfs):
            _add_udf_counts(f, cnt[9 + 2 * i] - before[i][0], cnt[10 + 2 * i] - before[i][1])
    counters = _sum_counters(cnt for _l, _r, cnt in results)
    if count_only:
        return ParallelRun([], counters, workers, reason, cpu=cpu)
    c0 = time.process_time()
    # each worker's list is in output order and no two share a last event: a stable sort of
    # the concatenated last positions is the merge
    lasts = np.concatenate([np.asarray(k, dtype=np.int64) for k, _r, _c in results])
    order = np.argsort(lasts, kind="stable")
    if texts is not None:
        lines = list(_merged_texts([t for _k, r, _c in results for t in r], order))
        cpu["merge"] = time.process_time() - c0
        return ParallelRun([], counters, workers, reason, cpu=cpu, texts=lines)
    every = [Match(*m) for _k, r, _c in results for m in r]
    matches = [every[i] for i in order.tolist()]
    cpu["merge"] = time.process_time() - c0
    return ParallelRun(matches, counters, workers, reason, cpu=cpu)


def _share_dir() -> str | None:
    """Where :class:`KeyedFeed` writes the shares: /dev/shm (memory) when it has 1 GiB free
    (a container's may have 64 MiB), else the temporary directory."""
    try:
        st = os.statvfs("/dev/shm")
        if st.f_bavail * st.f_frsize >= 1 << 30:
            return "/dev/shm"
    except OSError:
        pass
    return None


def _share_folder(prefix: str) -> str:
    """A new private folder for the workers' files in :func:`_share_dir` (as
    ``tempfile.mkdtemp``, without importing ``tempfile`` and ``shutil``, ~14 ms of the calling
    process's start of a run in parts)."""
    base = _share_dir()
    if base is None:
        import tempfile

        return tempfile.mkdtemp(prefix=prefix)
    while True:
        path = os.path.join(base, f"{prefix}{os.getpid()}-{os.urandom(6).hex()}")
        try:
            os.mkdir(path, 0o700)
            return path
        except FileExistsError:
            continue


def _remove_folder(path: str) -> None:
    """Remove a folder of :func:`_share_folder` and its files (errors ignored)."""
    try:
        with os.scandir(path) as entries:
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    import shutil

                    shutil.rmtree(e.path, ignore_errors=True)
                else:
                    os.unlink(e.path)
        os.rmdir(path)
    except OSError:
        import shutil

        shutil.rmtree(path, ignore_errors=True)


def _sum_counters(rows: Iterator[list[int]] | list[list[int]]) -> Counters:
    """The counters of a run: the workers' added up (``_work``'s layout)."""
    counters = Counters()
    for c in rows:
        counters.events_in += c[0]
        counters.events_processed += c[1]
        counters.candidate_events += c[2]
        counters.late_events += c[3]
        counters.matches += c[4]
        counters.truncated_runs += c[5]
        counters.truncated_matches += c[6]
        counters.events_skipped += c[7]
        counters.truncated_exact = counters.truncated_exact and bool(c[8])
    return counters


_MERGE_CHUNK = 65_536
"""Output lines per merged string array."""


def _merged_texts(parts: list[pa.Array], order: np.ndarray[Any, Any]) -> Iterator[pa.Array]:
    """The lines of ``parts`` (concatenated) in ``order``, a string array per chunk."""
    if not parts:
        return
    every = pa.concat_arrays([p.cast(pa.large_string()) for p in parts])  # no 2 GiB limit
    for i in range(0, len(order), _MERGE_CHUNK):
        yield every.take(int64_array(order[i:i + _MERGE_CHUNK]))


# ---------------------------------------------------------------------------------------------
# streaming over workers
# ---------------------------------------------------------------------------------------------

def _match_row(m: Match) -> tuple[Any, ...]:
    return (m.query, m.bindings, m.start, m.end, m.values)


def _send_msg(conn: _Pipe, msg: Any) -> None:
    """``msg`` pickled with its large buffers (numpy arrays, Arrow tables) out of band:
    sent as they are, never copied into the pickle (:func:`_recv_msg` reads them)."""
    _send_parts(conn, *_pickled(msg))


def _pickled(msg: Any) -> tuple[bytes, list[pickle.PickleBuffer]]:
    bufs: list[pickle.PickleBuffer] = []
    return pickle.dumps(msg, protocol=5, buffer_callback=bufs.append), bufs


def _send_parts(conn: _Pipe, head: bytes, bufs: list[pickle.PickleBuffer]) -> None:
    conn.send_bytes(struct.pack("<I", len(bufs)) + head)
    for b in bufs:
        conn.send_bytes(b.raw())  # type: ignore[arg-type]  # a bytes-like view


def _recv_msg(conn: _Pipe) -> Any:
    """A message of :func:`_send_msg` (its buffers read in place, not copied again)."""
    head = conn.recv_buffer()
    (n,) = struct.unpack_from("<I", head)
    bufs = [conn.recv_buffer() for _ in range(n)]
    return pickle.loads(memoryview(head)[4:], buffers=bufs)  # noqa: S301 - our own process's


def _stream_child(w: int, compiled: Any, conn: _Pipe, options: dict[str, Any]) -> None:
    """A stream worker: one Runtime (no lateness: the coordinator decides it), driven by
    ``(ops, chunk)`` messages. It runs a message's ops with their output unread (blocks and
    columns: ``Runtime.columnar``), replies ``("head", bound, extra)`` -- its
    :meth:`Runtime.release_bound` is known before any match is written --, then its matches
    in output order as ``("piece", keys, columns, rows)`` of at most ``chunk`` each (keys
    None for columns: their ``last_gpos``), made as they are sent (:func:`_sender`: at most
    :data:`AHEAD` ahead of the coordinator), then ``("end", counters)``; ``("error", one
    line)`` ends a reply at any point."""
    gc.freeze()  # the objects inherited from the parent are never scanned (nor copied)
    rt = Runtime(compiled, **{**options, "allowed_lateness_us": 0})
    rt.out_keys = []
    rt.block_keys = False
    rt.columnar = True
    send = _sender(conn)
    del w
    while True:
        try:
            ops, chunk = _recv_msg(conn)
        except (EOFError, OSError):  # the coordinator is gone
            os._exit(0)
        try:
            outs: list[tuple[Any, list[int]]] = []  # each op's output, with its out_keys
            extra: Any = None
            for op in ops:
                if op[0] == "stop":
                    conn.close()
                    os._exit(0)
                # an op after a push processes no event (no lateness here: nothing is
                # buffered), so the push's unread blocks stay as they were made
                if op[0] == "push":
                    _o, table, frontier, tinfo = op
                    if table.num_rows:
                        outs.append((rt.push(EventBatch(table, tinfo)), _taken_keys(rt)))
                    outs.append((rt.advance(frontier), _taken_keys(rt)))
                elif op[0] == "advance":
                    outs.append((rt.advance(op[1]), _taken_keys(rt)))
                elif op[0] == "close":
                    outs.append((rt.close(), _taken_keys(rt)))
                elif op[0] == "snapshot":
                    extra = rt.snapshot()
                elif op[0] == "restore":
                    rt.restore(op[1])
                    rt.out_keys = []
            send(("head", rt.release_bound(), extra))
            for out, keys in outs:
                for keyed, piece in _keyed_pieces(out, keys, chunk):
                    if isinstance(piece, MatchColumns):
                        send(("piece", keyed, piece.compact(), None))
                    else:
                        send(("piece", keyed, None, [_match_row(m) for m in piece]))
            c = rt.counters
            res: Any = ("end", [c.events_processed, c.candidate_events, c.matches,
                                c.truncated_runs, c.truncated_matches, c.events_skipped,
                                int(c.truncated_exact)])
        except BaseException as e:  # noqa: BLE001 - reported to the coordinator, one line
            res = ("error", f"{type(e).__name__}: {e}")
        send(res)


AHEAD = 4
"""Pieces a stream worker may make ahead of the one the coordinator reads."""


def _sender(conn: _Pipe) -> Callable[[tuple[Any, ...]], None]:
    """A stream worker's ``send``: each message pickled here (:func:`_send_msg`) and sent by
    a thread, at most :data:`AHEAD` queued, so the worker makes its next pieces while the
    coordinator reads another worker's (it merges them in order: a worker whose pieces
    come later waits)."""
    import queue
    import threading

    q: queue.Queue[tuple[bytes, list[pickle.PickleBuffer]]] = queue.Queue(AHEAD)

    def run() -> None:
        while True:
            head, bufs = q.get()
            try:
                _send_parts(conn, head, bufs)
            except OSError:  # the coordinator is gone
                os._exit(0)

    threading.Thread(target=run, daemon=True).start()
    return lambda msg: q.put(_pickled(msg))


def _taken_keys(rt: Runtime) -> list[int]:
    """The runtime's ``out_keys`` of the op that just ran (emptied for the next)."""
    keys = rt.out_keys
    assert keys is not None
    rt.out_keys = []
    return keys


def _keyed_pieces(out: Any, keys: list[int], chunk: int
                  ) -> Iterator[tuple[Any, MatchColumns | list[Match]]]:
    """An op's output (a list, or a :class:`MatchTable` of unread parts) in pieces of at most
    ``chunk`` matches, each with its matches' keys (their last events' positions; None for a
    column piece: its ``last_gpos``). ``keys``: the runtime's ``out_keys`` for the op
    (``block_keys`` off: one per block of a block part, one per match of any other part)."""
    at = 0
    for part in (out.parts if isinstance(out, MatchTable) else [out]):
        if isinstance(part, MatchBlocks):  # a list piece's keys are those of its blocks
            nb = len(part.blocks)
            bkeys = np.asarray(keys[at:at + nb], np.int64)
            at += nb
            sizes = np.fromiter(map(len, part.blocks), np.int64, nb)
            ends = np.cumsum(sizes)
            done = 0
            for piece in parts_in_chunks(part, chunk):
                lo, hi = done, done + len(piece)
                done = hi
                if isinstance(piece, MatchColumns):
                    yield None, piece
                    continue
                i, j = (int(x) for x in np.searchsorted(ends, [lo, hi - 1], side="right"))
                counts = (np.minimum(ends[i:j + 1], hi)
                          - np.maximum(ends[i:j + 1] - sizes[i:j + 1], lo))
                yield np.repeat(bkeys[i:j + 1], counts), piece
            continue
        pkeys = keys[at:at + len(part)]
        at += len(part)
        done = 0
        for piece in parts_in_chunks(part, chunk):
            yield (None if isinstance(piece, MatchColumns)
                   else np.asarray(pkeys[done:done + len(piece)], np.int64)), piece
            done += len(piece)


Run = tuple[np.ndarray[Any, Any], "MatchColumns | list[Match]"]
"""Matches in output order with their keys (last events' positions)."""


class _Source:
    """One sorted source of a call's output in the coordinator, a piece at a time: the
    matches that waited from earlier calls (one piece), or a worker's pieces as they come."""

    __slots__ = ("w", "keys", "data", "i")

    def __init__(self, w: int) -> None:
        self.w = w
        """The worker (-1: the waiting matches)."""
        self.keys: np.ndarray[Any, Any] = np.empty(0, np.int64)
        self.data: MatchColumns | list[Match] = []
        self.i = 0
        """The first match of the piece not merged yet."""

    def take(self, j: int) -> Run:
        """The matches from the cursor to ``j`` (the cursor moves there)."""
        i, self.i = self.i, j
        if i == 0 and j == len(self.keys):
            return self.keys, self.data
        return self.keys[i:j], _cut(self.data, i, j)


def _cut(d: MatchColumns | list[Match], i: int, j: int) -> MatchColumns | list[Match]:
    return d.slice(i, j) if isinstance(d, MatchColumns) else d[i:j]


def _as_list(d: MatchColumns | list[Match]) -> list[Match]:
    return d.matches() if isinstance(d, MatchColumns) else d


def _kind(d: MatchColumns | list[Match]) -> tuple[Any, ...] | None:
    """Parts of one kind join into one: column parts of one layout, or lists."""
    return d.layout() if isinstance(d, MatchColumns) else None


def _joined(parts: list[MatchColumns | list[Match]]) -> MatchColumns | list[Match]:
    """Parts one after the other as one: columns where they are all of one layout, else a
    list of ``Match``."""
    if len(parts) == 1:
        return parts[0]
    if len({_kind(d) for d in parts}) == 1 and isinstance(parts[0], MatchColumns):
        return concat_columns(parts)  # type: ignore[arg-type]
    return [m for d in parts for m in _as_list(d)]


SLICE_MIN = 64
"""A round of the merge whose runs from one source average this many matches or more is
written as slices of the sources' pieces (chain blocks: one run per last event), a finer
one as one part joined and reordered."""


def _merge_runs(runs: list[Run]) -> list[Run]:
    """Sorted runs, in the order of their sources, merged by key (stable: a tie goes to the
    earlier source, as one sort of their concatenation does), as consecutive runs."""
    if len(runs) == 1:
        return runs
    keys = np.concatenate([k for k, _d in runs])
    if bool(np.all(keys[1:] >= keys[:-1])):
        return runs
    perm = np.argsort(keys, kind="stable")
    firsts = np.cumsum([0] + [len(k) for k, _d in runs])  # each run's first in ``keys``
    src = np.searchsorted(firsts, perm, side="right") - 1  # the run of each merged match
    cuts = np.flatnonzero(src[1:] != src[:-1]) + 1
    if len(cuts) * SLICE_MIN < len(perm):  # few switches: slices of the runs, in order
        out = []
        for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), len(perm)], strict=True):
            j = int(src[a])
            i = int(perm[a] - firsts[j])
            k, d = runs[j]
            out.append((k[i:i + b - a], _cut(d, i, i + b - a)))
        return out
    d = _joined([d for _k, d in runs])
    if isinstance(d, MatchColumns):
        return [(keys[perm], d.take(perm))]
    return [(keys[perm], [d[i] for i in perm.tolist()])]


class _Pieces:
    """The coordinator's output of a call, written to the sink in pieces of at most
    ``chunk``: a run of at least a quarter ``chunk`` as it is (cut to ``chunk``), smaller
    ones gathered and joined (as :func:`_joined` joins) until they are, so that a fine
    interleaving of the workers' matches does not make a piece per match; a run of another
    kind first writes what is gathered."""

    def __init__(self, sink: Sink, chunk: int) -> None:
        self.sink, self.chunk = sink, chunk
        self.parts: list[MatchColumns | list[Match]] = []
        self.n = 0
        self.written = 0
        self.failed: Exception | None = None
        """What the sink raised: nothing more is written (the call still merges to its end,
        so that what waits is what one runtime keeps when its sink fails)."""

    def add(self, d: MatchColumns | list[Match]) -> None:
        if not len(d):
            return
        if self.parts and (_kind(self.parts[-1]) != _kind(d) or 4 * len(d) >= self.chunk):
            self.flush()
        if 4 * len(d) >= self.chunk:
            self._write(d)
            return
        self.parts.append(d)
        self.n += len(d)
        if 4 * self.n >= self.chunk:
            self.flush()

    def flush(self) -> None:
        """Write what is gathered."""
        if self.parts:
            d = _joined(self.parts)
            self.parts, self.n = [], 0
            self._write(d)

    def _write(self, d: MatchColumns | list[Match]) -> None:
        n, c = len(d), self.chunk
        for i in range(0, n, c):
            if self.failed is not None:
                return
            try:
                self.sink(d if n <= c else _cut(d, i, min(i + c, n)))
            except Exception as e:  # noqa: BLE001 - raised once the call is merged
                self.failed = e
                return
            self.written += min(c, n - i)


class _WorkerError(Exception):
    """A stream worker replied with an error (its one line)."""

    def __init__(self, worker: int, line: str) -> None:
        super().__init__(line)
        self.worker, self.line = worker, line


class ParallelStream:
    """A streaming runtime whose partitions are spread over ``workers`` processes: ``push``,
    ``advance``, ``close``, ``snapshot``, ``restore``, ``late`` and ``counters`` as
    :class:`~kleene.runtime.engine.Runtime`, with the same output call for call.

    It runs one Runtime in this process (``workers == 1``, and ``reason`` says why) when the
    query cannot be split by key (:func:`sequential_reason`), counts only (``count_only``) or
    emits timeouts. Caps (``max_matches_per_call``, ...) apply per worker. ``shutdown()`` (or
    ``close()``) ends the worker processes."""

    def __init__(self, compiled: Any, workers: int, **options: Any) -> None:
        if workers < 1:
            raise EngineError(f"workers must be a positive integer, not {workers!r}")
        reason = sequential_reason(compiled, 1 << 62, workers)
        if reason is None and options.get("count_only"):
            reason = "count_only: the counters of one runtime"
        if reason is None and compiled.spec.timeouts:
            reason = "EMIT TIMEOUTS runs in one process"
        self.compiled = compiled
        self.plan = compiled.plan
        self.reason = reason
        self.workers = 1 if reason is not None else workers
        self.options = dict(options)
        self.lateness = int(options.get("allowed_lateness_us", 0))
        self._one: Runtime | None = Runtime(compiled, **options) if reason is not None else None
        self._procs: list[tuple[_Forked, _Pipe]] = []
        self.counters = self._one.counters if self._one is not None else Counters()
        """One runtime's (``workers == 1``: the object itself), or the workers' added up."""
        self._wcounters: list[list[int]] = [[0] * 6 + [1] for _ in range(self.workers)]
        self.max_seen = _FAR_PAST
        self.frontier = _FAR_PAST
        self.next_gpos = 0
        self.buffer: list[pa.Table] = []
        self.late_events: list[pa.Table] = []
        self.time: TimeInfo | None = None
        self.closed = False
        self.waiting: list[tuple[int, Match]] = []
        """Matches the workers released that one runtime would still hold (position of the
        last event, match), in output order."""

    # -- public API -------------------------------------------------------------------------
    def push(self, batch: EventBatch) -> list[Match]:
        """Add events (in order, or out of order within the allowed lateness)."""
        if self._one is not None:
            return self._one.push(batch)
        return _listed(lambda sink: self._push(batch, sink, SINK_CHUNK))

    def advance(self, watermark_us: int) -> list[Match]:
        """Promise that no event with a timestamp below ``watermark_us`` will come."""
        if self._one is not None:
            return self._one.advance(watermark_us)
        return _listed(lambda sink: self._advance(watermark_us, sink, SINK_CHUNK))

    def close(self) -> list[Match]:
        """End of stream: every buffered event and pending match; the workers then stop."""
        if self._one is not None:
            return self._one.close()
        return _listed(lambda sink: self._close(sink, SINK_CHUNK))

    # streaming output: the same calls, the matches written to a sink in bounded pieces
    def push_to(self, batch: EventBatch, sink: Sink, *, chunk: int = SINK_CHUNK) -> int:
        """:meth:`push`, with the call's matches written to ``sink`` in output order, in
        pieces of at most ``chunk`` matches (:class:`~kleene.events.matchtable.MatchColumns`
        or lists of ``Match``, as :meth:`Runtime.push_to` writes); returns how many. The
        pieces concatenated are what :meth:`push` returns; the matches and counters are
        those of one runtime. The workers write their pieces as their own ``push_to`` does
        and the coordinator merges them as they come (memory: a few pieces, whatever the
        number of matches; docs/engine.md, "Keyed parallelism").

        Example:
            >>> import kleene
            >>> q = "PATTERN SEQ(A a, B b) PARTITION BY k"
            >>> par = kleene.compile(q, workers=2).start()
            >>> pieces = []
            >>> par.push_to(EventBatch.from_records([{"type": t, "ts": i, "k": i % 2}
            ...     for i, t in enumerate("AABB")]), pieces.append, chunk=1)
            2
            >>> par.close_to(pieces.append, chunk=1), [len(p) for p in pieces]
            (0, [1, 1])
        """
        if self._one is not None:
            return self._one.push_to(batch, sink, chunk=chunk)
        return self._push(batch, sink, _chunk(chunk))

    def advance_to(self, watermark_us: int, sink: Sink, *, chunk: int = SINK_CHUNK) -> int:
        """:meth:`advance`, with the matches written to ``sink`` (see :meth:`push_to`)."""
        if self._one is not None:
            return self._one.advance_to(watermark_us, sink, chunk=chunk)
        return self._advance(watermark_us, sink, _chunk(chunk))

    def close_to(self, sink: Sink, *, chunk: int = SINK_CHUNK) -> int:
        """:meth:`close`, with the matches written to ``sink`` (see :meth:`push_to`)."""
        if self._one is not None:
            return self._one.close_to(sink, chunk=chunk)
        return self._close(sink, _chunk(chunk))

    def _push(self, batch: EventBatch, sink: Sink, chunk: int) -> int:
        self._check_open()
        if self.time is None:
            self.time = batch.time
        t = batch.table
        if t.num_rows == 0:
            return 0
        t, ts = set_late_aside(t, self.counters, self.late_events, self.max_seen,
                               self.frontier, self.lateness)
        if t.num_rows == 0:
            return 0
        self.max_seen = max(self.max_seen, int(ts.max()))
        if self.lateness <= 0 and not self.buffer and bool(np.all(ts[1:] >= ts[:-1])):
            self.frontier = max(self.frontier, int(ts[-1]))
            return self._call(self._route(t), [], sink, chunk)
        self.buffer.append(t)
        return self._call(self._flush(self.max_seen - max(self.lateness, 0)), [], sink, chunk)

    def _advance(self, watermark_us: int, sink: Sink, chunk: int) -> int:
        self._check_open()
        shares = self._flush(int(watermark_us) - 1)
        self.frontier = max(self.frontier, int(watermark_us))
        return self._call(shares, [("advance", int(watermark_us))], sink, chunk)

    def _close(self, sink: Sink, chunk: int) -> int:
        self._check_open()
        n = self._call(self._flush(None), [("close",)], sink, chunk)
        self.closed = True
        self.shutdown()
        return n

    @property
    def late(self) -> EventBatch | None:
        """Events that arrived behind the frontier (never silently lost)."""
        if self._one is not None:
            return self._one.late
        if not self.late_events:
            return None
        return EventBatch(pa.concat_tables(self.late_events, promote_options="default"),
                          self.time or TimeInfo())

    def snapshot(self) -> bytes:
        """The whole state (the coordinator's and every worker's) as plain-data bytes."""
        if self._one is not None:
            return self._one.snapshot()
        self._check_open()
        blobs = self._send([[("snapshot",)]] * self.workers)
        buf = None
        if self.buffer:
            buf = _ipc(pa.concat_tables(self.buffer, promote_options="default"))
        c = self.counters
        data = {
            "version": 1, "parallel": self.workers, "query": self.compiled.plan.name,
            "max_seen": self.max_seen, "frontier": self.frontier, "next_gpos": self.next_gpos,
            "buffer": buf, "waiting": [(k, _match_row(m)) for k, m in self.waiting],
            "counters": [c.events_in, c.late_events], "wcounters": self._wcounters,
            "time": None if self.time is None else (self.time.kind, self.time.unit,
                                                    self.time.tz),
            "workers": [b[2] for b in blobs],
        }
        return pickle.dumps(data, protocol=5)

    def restore(self, blob: bytes) -> None:
        """Replace the state with a snapshot of the same query taken with as many workers
        (late events collected so far are dropped, as :meth:`Runtime.restore` does)."""
        if self._one is not None:
            self._one.restore(blob)
            return
        data = safe_loads(blob)
        if (not isinstance(data, dict) or data.get("version") != 1
                or data.get("query") != self.compiled.plan.name):
            raise EngineError(f"snapshot is not of query {self.compiled.plan.name!r}")
        if data.get("parallel") != self.workers:
            raise EngineError(f"snapshot was taken with {data.get('parallel') or 1} worker(s), "
                              f"not {self.workers}: restore it with as many")
        self._check_open()
        self._send([[("restore", b)] for b in data["workers"]])
        self.max_seen, self.frontier = data["max_seen"], data["frontier"]
        self.next_gpos = data["next_gpos"]
        self.buffer = []
        if data["buffer"] is not None:
            with pa.ipc.open_stream(data["buffer"]) as r:
                self.buffer = [r.read_all()]
        self.waiting = [(k, Match(*r)) for k, r in data["waiting"]]
        self.counters.events_in, self.counters.late_events = data["counters"]
        self._wcounters = data["wcounters"]
        self._sum_counters()
        self.time = TimeInfo(*data["time"]) if data["time"] is not None else None
        self.late_events = []

    def shutdown(self) -> None:
        """End the worker processes (the stream cannot be used afterwards)."""
        procs, self._procs = self._procs, []
        for p, conn in procs:
            try:
                _send_msg(conn, ([("stop",)], 1))
            except OSError:
                pass
            conn.close()
            p.join(timeout=5)
            p.kill()  # (if still there)
            p.join()

    def __del__(self) -> None:
        try:
            self.shutdown()
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown
            pass

    # -- internals --------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self.closed:
            raise EngineError(f"query {self.compiled.plan.name!r}: the runtime is closed")

    def _flush(self, upto: int | None) -> list[pa.Table] | None:
        """Release the buffered events up to ``upto`` (all: None), as one Runtime does."""
        if not self.buffer:
            return None
        t = pa.concat_tables(self.buffer, promote_options="default").combine_chunks()
        ts = t.column(TS).to_numpy()
        order = np.argsort(ts, kind="stable")
        t = t.take(pa.array(order))
        ts = ts[order]
        n = len(ts) if upto is None else int(np.searchsorted(ts, upto, side="right"))
        ready, rest = t.slice(0, n), t.slice(n)
        self.buffer = [rest] if rest.num_rows else []
        if not ready.num_rows:
            return None
        self.frontier = max(self.frontier, int(ts[n - 1]))
        return self._route(ready)

    def _route(self, t: pa.Table) -> list[pa.Table]:
        """Number the (sorted) events in the whole stream; each worker's share."""
        n = t.num_rows
        gpos = pa.array(np.arange(self.next_gpos, self.next_gpos + n, dtype=np.int64))
        self.next_gpos += n
        t = t.append_column(GPOS_COL, gpos)
        dest = key_workers(t, self.compiled.plan.partition_by, self.workers)
        return [t.filter(pa.array(dest == w)) for w in range(self.workers)]

    def _call(self, shares: list[pa.Table] | None, ops: list[tuple[Any, ...]], sink: Sink,
              chunk: int) -> int:
        """Send every worker its share (with the frontier) and ``ops``; write the merged
        matches one runtime would return to ``sink`` (pieces of at most ``chunk``); how many.

        Each worker replies with its release bound before its matches (it ran the ops with
        the output unread), so the cut is known before anything is merged: one runtime
        returns the matches before the smallest bound; those at or after it wait (for another
        worker's held match). Then a k-way merge of the sources -- the waiting matches, then
        each worker's pieces as they come, each source in output order -- by the last events'
        positions, a tie to the earlier source (one stable sort of their concatenation, as
        one runtime orders them): in each round every source gives what sorts before the
        smallest last key of the sources' current pieces, and the source holding it its whole
        piece, whose next piece is then read. A worker is read only when its next piece is
        needed (the others wait on their pipes): memory of a piece per worker and one being
        gathered, whatever the number of matches."""
        per = [([("push", shares[w], self.frontier, self.time)] if shares is not None else [])
               + ops for w in range(self.workers)]
        if not any(per):
            return 0
        heads = self._send(per, chunk, ends=False)
        bounds = [h[1] for h in heads if h[1] is not None]
        limit = min(bounds) if bounds else None
        out = _Pieces(sink, chunk)
        srcs: list[_Source] = []
        if self.waiting:
            src = _Source(-1)
            src.keys = np.asarray([k for k, _m in self.waiting], np.int64)
            src.data = [m for _k, m in self.waiting]
            srcs.append(src)
        waiting: list[tuple[int, Match]] = []
        done: set[int] = set()
        try:
            srcs += [s for s in map(_Source, range(self.workers)) if self._load(s, done)]
            while srcs:
                h = min(range(len(srcs)), key=lambda j: (int(srcs[j].keys[-1]), j))
                top = srcs[h].keys[-1]
                runs = []
                for j, s in enumerate(srcs):
                    end = len(s.keys) if j == h else int(np.searchsorted(
                        s.keys, top, side="right" if j < h else "left"))
                    if end > s.i:
                        runs.append(s.take(end))
                for keys, d in _merge_runs(runs):
                    cut = len(keys) if limit is None else int(np.searchsorted(keys, limit))
                    if cut < len(keys):  # what one runtime would still hold
                        waiting += zip(keys[cut:].tolist(),
                                       _as_list(_cut(d, cut, len(keys))), strict=True)
                        d = _cut(d, 0, cut)
                    out.add(d)
                srcs = [s for s in srcs if s.i < len(s.keys) or self._load(s, done)]
            out.flush()
        except BaseException as e:
            if isinstance(e, _WorkerError):
                done.add(e.worker)
            self._drain(done)  # every worker's reply read: the next call starts in step
            if isinstance(e, _WorkerError):
                raise EngineError(f"keyed parallel stream: a worker failed: {e.line}") from None
            raise
        self.waiting = waiting
        self._sum_counters()
        if out.failed is not None:
            raise out.failed
        return out.written

    def _load(self, src: _Source, done: set[int]) -> bool:
        """A worker's next piece into ``src``; False after its last (its counters kept)."""
        if src.w < 0:
            return False
        msg = self._recv(src.w)
        if msg[0] == "end":
            self._wcounters[src.w] = msg[1]
            done.add(src.w)
            return False
        _p, keys, cols, rows = msg
        src.keys = np.asarray(cols.last_gpos, np.int64) if cols is not None else keys
        src.data = cols if cols is not None else [Match(*r) for r in rows]
        src.i = 0
        return True

    def _recv(self, w: int) -> tuple[Any, ...]:
        """Worker ``w``'s next message; :class:`_WorkerError` for an error it reported."""
        p, conn = self._procs[w]
        try:
            res: tuple[Any, ...] = _recv_msg(conn)
        except (EOFError, OSError):
            p.join(timeout=1)  # (its exit code)
            raise EngineError(f"keyed parallel stream: worker process {p.pid} died "
                              f"(exit code {p.exitcode})") from None
        if res[0] == "error":
            raise _WorkerError(w, res[1])
        return res

    def _drain(self, done: set[int]) -> None:
        """Read the rest of every unfinished worker's reply (after an error)."""
        for w, (_p, conn) in enumerate(self._procs):
            while w not in done:
                try:
                    kind = _recv_msg(conn)[0]
                except (EOFError, OSError):
                    kind = "error"
                if kind in ("end", "error"):
                    done.add(w)

    def _sum_counters(self) -> None:
        c = self.counters
        cols = list(zip(*self._wcounters, strict=True))
        (c.events_processed, c.candidate_events, c.matches, c.truncated_runs,
         c.truncated_matches, c.events_skipped) = (sum(x) for x in cols[:6])
        c.truncated_exact = all(cols[6])

    def _send(self, per: list[list[tuple[Any, ...]]], chunk: int = SINK_CHUNK, *,
              ends: bool = True) -> list[tuple[Any, ...]]:
        """Send each worker its ops; their heads (``ends``: the whole replies read, for ops
        that make no match: snapshot, restore)."""
        if not self._procs:
            self._start()
        for (_p, conn), ops in zip(self._procs, per, strict=True):
            _send_msg(conn, (ops, chunk))
        heads: list[tuple[Any, ...]] = []
        done: set[int] = set()
        try:
            for w in range(self.workers):
                heads.append(self._recv(w))
                if ends:
                    self._recv(w)  # ("end", counters): the same as before
                    done.add(w)
        except _WorkerError as e:
            done.add(e.worker)
            self._drain(done)
            raise EngineError(f"keyed parallel stream: a worker failed: {e.line}") from None
        return heads

    def _start(self) -> None:
        for w in range(self.workers):
            self._procs.append(_fork(_stream_child, w, self.compiled, self.options,
                                     others=self._procs))


def _chunk(chunk: Any) -> int:
    """A sink's piece size, or a one-line error (before anything is pushed)."""
    if isinstance(chunk, bool) or not isinstance(chunk, Integral) or chunk < 1:
        raise EngineError(f"chunk must be a positive number of matches, not {chunk!r}")
    return int(chunk)


def _listed(call: Callable[[Sink], int]) -> list[Match]:
    """The matches a sinking call writes, as one list."""
    pieces: list[MatchColumns | list[Match]] = []
    call(pieces.append)
    return [m for p in pieces for m in _as_list(p)]


def _ipc(t: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    return bytes(sink.getvalue().to_pybytes())


__all__ = ["MIN_EVENTS_PER_WORKER", "PARTS_COST", "KeyedFeed", "ParallelRun", "ParallelStream",
           "PartRead", "PartsRun", "default_workers", "key_workers", "parts_estimate",
           "parts_pay", "run_parallel", "run_parts", "sequential_reason"]
