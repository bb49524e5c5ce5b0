"""Many queries in one pass: :func:`compile_many`, :class:`QuerySet` and its streaming runtime.

Each query's matches in a set are exactly its matches run alone; across queries the output is
ordered by the completing event (its timestamp, then its arrival), then the query's place in
the set, then the query's own order (docs/semantics.md, "Query sets"). Queries the shared
network supports (``kleene.plans.shared``) are evaluated together in SCEMon's event-queue
network (``kleene.runtime.shared``); the others run on their own plan in the same pass.

Example:
    >>> import kleene
    >>> from kleene.events import EventBatch
    >>> qs = kleene.compile_many([
    ...     "NAME ab PATTERN SEQ(A a, B b) PARTITION BY src WITHIN 10 seconds",
    ...     "NAME bc PATTERN SEQ(B b, C c) PARTITION BY src WITHIN 10 seconds"])
    >>> ev = [{"id": i, "type": t, "ts": i, "src": 1} for i, t in enumerate("ABC")]
    >>> [(m.query, dict(m.bindings)) for m in qs.run(EventBatch.from_records(ev))]
    [('ab', {'a': 0, 'b': 1}), ('bc', {'b': 1, 'c': 2})]
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import field
from numbers import Integral
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .api import CompiledQuery, QueryLike
from .api import compile as compile_query
from .errors import EngineError, QueryValidationError
from .events import EventBatch, Match
from .events.matchtable import MatchColumns, MatchTable, parts_in_chunks
from .events.model import ID, TS, TYPE, TimeInfo
from .frozen import dataclass

if TYPE_CHECKING:
    from .runtime.engine import Sink
    from .runtime.shared import SharedNetwork, SharedSpec

SINK_CHUNK = 16_384
"""Default of the most matches in one piece handed to a sink (``Runtime.push_to``'s)."""

PLANS = ("auto", "shared", "separate")
"""``auto``: the shared network when at least two queries of the set can share it (else each
query alone); ``shared``: every query the network supports; ``separate``: SCEMon's SP
baseline, every query on its own plan."""

_FAR_PAST = -(2 ** 62)
_key4 = itemgetter(0, 1, 2, 3)
Produced = list[tuple[int, int, tuple[int, ...], int, Match]]
"""Output entries: (completing ts, its position, () for an input event or (producer's place,
k) for a derived one, the query's place, the match)."""


def _spec(c: CompiledQuery) -> SharedSpec | str:
    """The query's shared-network spec or the reason it has none (imported lazily: importing
    kleene must not load the engines)."""
    from .plans.shared import shared_spec

    return shared_spec(c.analyzed)


def _is_spec(s: object) -> bool:
    from .runtime.shared import SharedSpec

    return isinstance(s, SharedSpec)


@dataclass(frozen=True)
class QuerySet:
    """Compiled queries evaluated together; immutable (``start`` gives a runtime that can add
    and remove queries)."""

    queries: tuple[CompiledQuery, ...]
    plan: str = "auto"
    options: Mapping[str, Any] = field(default_factory=dict)
    dialect: str | None = None
    udfs: Mapping[str, Callable[..., Any]] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        """The query names, in set order."""
        return [q.name for q in self.queries]

    def specs(self) -> list[SharedSpec | str]:
        """Per query: its network spec, or why the network cannot take it."""
        return [_spec(q) for q in self.queries]

    def uses_network(self) -> bool:
        """Does this set evaluate some queries in the shared network?"""
        if self.plan == "separate" or self.options.get("allowed_lateness_us", 0):
            return False
        specs = self.specs()
        n = sum(_is_spec(s) for s in specs)
        if self.plan == "shared":
            return n >= 1
        reads = nested_reads(list(self.queries))
        produced = {p for r in reads.values() for p in r}
        return n >= 2 or any(q.name in produced and _is_spec(s)
                             for q, s in zip(self.queries, specs, strict=True))

    def run(self, events: EventBatch) -> list[Match]:
        """Every query's matches over a bounded, ordered batch, in the set's output order."""
        ts = events.ts
        if len(ts) > 1 and not np.all(ts[1:] >= ts[:-1]):
            from .errors import InputError

            raise InputError("events must be ordered by timestamp")
        rt = self.start()
        return rt.push(events) + rt.close()

    def start(self, **options: Any) -> QuerySetRuntime:
        """A streaming runtime: ``push`` / ``advance`` / ``close``, ``add`` / ``remove``."""
        return QuerySetRuntime(self, {**self.options, **options})

    def explain(self) -> str:
        """One line per query: in the shared network, or on its own plan and why."""
        shared = self.uses_network()
        reads = nested_reads(list(self.queries))
        lines = []
        for q, s in zip(self.queries, self.specs(), strict=True):
            if reads[q.name]:
                lines.append(f"{q.name}: own plan {q.plan} (reads the matches of "
                             f"{', '.join(reads[q.name])})")
            elif shared and not isinstance(s, str):
                conds = [v for v, f in zip(s.vars, s.filters, strict=True) if f is not None] \
                    if s.filters else []
                lines.append(f"{q.name}: shared network ({s.kind.upper()} of "
                             f"{', '.join(s.types)}, key {list(s.key_attrs)}, "
                             f"{'EMIT RECENT' if s.recent else 'EMIT ALL'}"
                             + (f", conditions on {', '.join(conds)}" if conds else "") + ")")
            else:
                why = s if isinstance(s, str) else f"--plan {self.plan}" if \
                    self.plan == "separate" else "nothing to share"
                lines.append(f"{q.name}: own plan {q.plan} ({why})")
        return "\n".join(lines)


def compile_many(queries: Iterable[QueryLike] | Mapping[str, QueryLike], *,
                 dialect: str | None = None,
                 udfs: Mapping[str, Callable[..., Any]] | None = None,
                 names: Iterable[str | None] | None = None, plan: str | None = None,
                 **options: Any) -> QuerySet:
    """Compile several queries into one :class:`QuerySet`.

    ``queries`` is a list (text, AST or builder) or a mapping name -> query. A query's name is
    its NAME clause, else the mapping key or ``names[i]``, else ``q1``, ``q2``, ... Names must
    be unique. ``plan``: ``auto`` (default), ``shared`` or ``separate`` (:data:`PLANS`).
    ``options`` are the runtime options of :func:`kleene.compile` plus ``clean_period`` (events
    between two cleanings of the shared network, default 100,000).
    """
    plan = plan or "auto"
    if plan not in PLANS:
        raise QueryValidationError(f"unknown query-set plan {plan!r}; available: "
                                   f"{', '.join(PLANS)}")
    if isinstance(queries, Mapping):
        items = list(queries.values())
        given: list[str | None] = list(queries.keys())
    else:
        items = list(queries)
        given = list(names) if names is not None else [None] * len(items)
        if len(given) != len(items):
            raise QueryValidationError(f"compile_many: {len(items)} queries but "
                                       f"{len(given)} names")
    if not items:
        raise QueryValidationError("compile_many: the query set is empty")
    set_opts = {k: v for k, v in options.items() if k != "clean_period"}
    compiled: list[CompiledQuery] = []
    for i, (q, nm) in enumerate(zip(items, given, strict=True)):
        compiled.append(compile_query(q, dialect=dialect, udfs=udfs, name=nm or f"q{i + 1}",
                                      **set_opts))
    check_unique([c.name for c in compiled])
    for c in compiled:
        refuse_timeouts(c)
    nested_reads(compiled)  # a cycle is an error here, not when the set runs
    return QuerySet(tuple(compiled), plan, dict(options), dialect, dict(udfs or {}))


def nested_reads(queries: list[CompiledQuery]) -> dict[str, list[str]]:
    """Per query name, the queries of the set whose matches it reads: its event types that are
    query names (docs/semantics.md §17, nested queries). A query reading itself, a cycle, or
    a consumer read by another query is a ``QueryValidationError``."""
    names = {c.name for c in queries}
    reads = {c.name: sorted({v.type for v in c.analyzed.variables.values()
                             if v.type is not None and v.type in names}) for c in queries}
    for n, rs in reads.items():
        if n in rs:
            raise QueryValidationError(f"query set: query {n!r} reads its own matches (a "
                                       "cycle: a query cannot be its own event type)")
        for p in rs:
            if reads[p]:
                if n in reads[p]:
                    raise QueryValidationError(f"query set: {n!r} and {p!r} read each "
                                               f"other's matches (a cycle: {n} -> {p} -> {n})")
                raise QueryValidationError(
                    f"query set: {n!r} reads {p!r}, which reads {reads[p][0]!r}; one level of "
                    "nesting is supported (a consumer's matches feed no other query)")
    return reads


def refuse_timeouts(c: CompiledQuery) -> None:
    """A query set does not output timed-out partial matches (EMIT TIMEOUTS): refused, not
    silently dropped."""
    if c.analyzed.query.timeouts:
        raise QueryValidationError(f"query {c.name!r}: EMIT TIMEOUTS is for a query run on "
                                   "its own, not in a query set; run it separately")


def check_unique(names: list[str]) -> None:
    """Query names in a set must be unique (they label every output record)."""
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise QueryValidationError(f"query set: two queries are named {n!r}; names must "
                                       "be unique (use NAME, or rename a file)")
        seen.add(n)


def _types(c: CompiledQuery) -> frozenset[str]:
    """The event types a query's variables read."""
    return frozenset(v.type for v in c.analyzed.variables.values() if v.type is not None)


class _Member:
    __slots__ = ("compiled", "order", "qid", "network", "runtime", "reads", "consumer",
                 "key_attrs", "types")

    def __init__(self, compiled: CompiledQuery, order: int, qid: int) -> None:
        self.compiled = compiled
        self.order = order
        self.qid = qid
        self.network: tuple[str, ...] | None = None
        self.runtime: Any = None
        self.reads: frozenset[str] = frozenset()
        """The producers whose matches this query reads (nested queries)."""
        self.consumer: _Consumer | None = None
        self.key_attrs: tuple[str, ...] = ()
        """A producer's key attributes: its derived events carry them."""
        self.types = _types(compiled)
        """The event types the query reads (a query name among them: a nested query)."""


class _Consumer:
    """A consumer's stream ids: what each stands for (the input event's id, or a derived
    event's label), with its place in the set's order; pruned by the consumer's window."""

    __slots__ = ("next_sid", "ids", "types", "window")

    def __init__(self, types: frozenset[str] | None, window: int | None) -> None:
        self.next_sid = 0
        self.ids: dict[int, tuple[Any, int, int, tuple[int, ...]]] = {}
        self.types = types
        self.window = window

    def prune(self, now: int) -> None:
        """Forget events no match can bind any more: older than two windows (a match held
        for a trailing NOT is released within one window of its end)."""
        if self.window is None or len(self.ids) < 4096:
            return
        cut = now - 2 * self.window - 1
        for k in [k for k, v in self.ids.items() if v[1] < cut]:
            del self.ids[k]


_RT_OPTS = ("allowed_lateness_us", "max_runs_per_partition", "max_matches_per_event",
            "max_matches_per_call", "on_cap", "count_only", "use_kernel")


class QuerySetRuntime:
    """A running query set. ``push`` / ``advance`` / ``close`` as for one query; ``add`` and
    ``remove`` change the set while it runs (an added query sees the events pushed after it;
    a removed one emits nothing more and its state is freed)."""

    def __init__(self, qs: QuerySet, options: dict[str, Any]) -> None:
        self.qs = qs
        self.options = options
        self.clean_period = int(options.get("clean_period", 100_000))
        self.rt_options = {k: v for k, v in options.items() if k in _RT_OPTS}
        self.lateness = int(options.get("allowed_lateness_us", 0) or 0)
        self.shared = qs.uses_network() if not self.lateness else False
        self.members: dict[str, _Member] = {}
        self.networks: dict[tuple[str, ...], SharedNetwork] = {}
        self.next_order = 0
        self.next_qid = 0
        self.next_gpos = 0
        self.frontier = _FAR_PAST
        self.max_seen = _FAR_PAST
        self.time: TimeInfo | None = None
        self.late_events: list[pa.Table] = []
        self.late_count = 0
        self.counts: dict[str, int] = {}
        """Matches emitted per query name (also for removed queries)."""
        self._seen: list[dict[Any, tuple[int, int]]] = [{}, {}]
        self._seen_from = (0, 0)
        """Where the two calls :meth:`_remember` holds started."""
        self._seen_lo = 0
        """The first position it holds: a lazy query's match whose last event is before it
        is placed as :meth:`_collect` places it (its end time, position -1)."""
        self.closed = False
        self.type_users: dict[str, int] = {}
        """Per event type, how many running queries read it (so :meth:`add` sees at once
        whether a new query nests, without checking the whole set)."""
        self.placed: Produced | None = None
        """Set to a list to also collect every output entry (completing ts, position, derived
        label, place, match) in the set's order (the Spark task of a nested group reads the
        positions and places from it: kleene.spark.nested)."""
        reads = nested_reads(list(qs.queries))
        for c in qs.queries:
            self._add_compiled(c, consumer=bool(reads[c.name]))
        for c in qs.queries:
            if reads[c.name]:
                self._resolve(self.members[c.name], reads[c.name])

    # ------------------------------------------------------------------ membership
    def _resolve(self, m: _Member, producers: list[str]) -> None:
        """A consumer's producers (docs/semantics.md §17, nested queries): each evaluated by
        the shared network, none itself a consumer."""
        if self.rt_options.get("count_only"):
            raise QueryValidationError("query set: nested queries need the producers' matches "
                                       "(count_only / --count builds none)")
        for p in producers:
            pm = self.members[p]
            if pm.network is None:
                why = _spec(pm.compiled)
                why = (why if isinstance(why, str) else "plan 'separate'" if
                       self.qs.plan == "separate" else "allowed lateness"
                       if self.lateness else "the set does not use the network")
                raise QueryValidationError(
                    f"query set: {m.compiled.name!r} reads the matches of {p!r}, which the "
                    f"shared network does not evaluate ({why}); a producer's matches must be "
                    "final when their completing event is processed")
        aq = m.compiled.analyzed
        types = {v.type for v in aq.variables.values()}
        w = aq.within
        m.reads = frozenset(producers)
        m.consumer = _Consumer(None if None in types else frozenset(t for t in types if t),
                               None if w is None or w.is_count else w.microseconds)

    def _add_compiled(self, c: CompiledQuery, *, consumer: bool = False) -> None:
        if c.name in self.members:
            raise QueryValidationError(f"query set: a query named {c.name!r} is already "
                                       "running; names must be unique")
        m = _Member(c, self.next_order, self.next_qid)
        self.next_order += 1
        self.next_qid += 1
        m.key_attrs = tuple(dict.fromkeys(c.analyzed.partition_by + c.analyzed.equivalence))
        spec = _spec(c) if self.shared and not consumer else None
        if spec is not None and not isinstance(spec, str):
            from .runtime.engine import MAX_MATCHES_PER_CALL
            from .runtime.shared import SharedNetwork

            net = self.networks.get(spec.key_attrs)
            if net is None:
                net = self.networks[spec.key_attrs] = SharedNetwork(
                    spec.key_attrs, clean_period=self.clean_period,
                    max_matches_per_event=self.rt_options.get("max_matches_per_event",
                                                              1_000_000),
                    max_matches_per_call=self.rt_options.get("max_matches_per_call",
                                                             MAX_MATCHES_PER_CALL),
                    on_cap=self.rt_options.get("on_cap", "error"),
                    count_only=bool(self.rt_options.get("count_only", False)))
            net.add(m.qid, spec, m.order, self.next_gpos)
            m.network = spec.key_attrs
        else:
            m.runtime = c.start(**self.rt_options)
        self.members[c.name] = m
        self.counts.setdefault(c.name, 0)
        for t in m.types:
            self.type_users[t] = self.type_users.get(t, 0) + 1

    def add(self, query: QueryLike, *, name: str | None = None) -> str:
        """Add a query while running; it sees the events pushed from now on. Returns its
        name (its NAME clause, else ``name``, else ``q<n>``)."""
        self._check_open()
        c = compile_query(query, dialect=self.qs.dialect, udfs=self.qs.udfs,
                          name=name or f"q{self.next_order + 1}",
                          **{k: v for k, v in self.qs.options.items() if k != "clean_period"})
        refuse_timeouts(c)
        producers: list[str] = []
        types = _types(c)
        if (c.name in types or c.name in self.type_users
                or any(t in self.members for t in types)):
            # the new query nests (reads a running query, or is read by one): check the
            # whole set; otherwise nothing about nesting changes (O(1) per add)
            running = [m.compiled for m in self.members.values()]
            reads = nested_reads(running + [c])
            late = [n for n, r in reads.items() if c.name in r]
            if late:
                raise QueryValidationError(f"query set: {c.name!r} is an event type of the "
                                           f"running query {late[0]!r}; add a producer "
                                           "before its consumers")
            producers = reads[c.name]
        self._add_compiled(c, consumer=bool(producers))
        if producers:
            try:
                self._resolve(self.members[c.name], producers)
            except QueryValidationError:
                self._forget(c.name)
                raise
        return c.name

    def remove(self, name: str) -> None:
        """Remove a query: it emits nothing more (matches it still held are dropped) and its
        state is freed (network PMB entries with their instances, at the next cleaning)."""
        m = self.members.get(name)
        if m is None:
            raise QueryValidationError(f"query set: no query named {name!r}; running: "
                                       f"{', '.join(self.members) or 'none'}")
        self._forget(name)
        if m.network is not None:
            net = self.networks[m.network]
            net.remove(m.qid)
            if not net.queries:
                del self.networks[m.network]
        m.runtime = None

    def _forget(self, name: str) -> None:
        """Drop a member from the set's bookkeeping (its state is freed by the caller)."""
        m = self.members.pop(name)
        for t in m.types:
            left = self.type_users[t] - 1
            if left:
                self.type_users[t] = left
            else:
                del self.type_users[t]

    @property
    def names(self) -> list[str]:
        """The running queries, in set order."""
        return list(self.members)

    def stored_instances(self) -> int:
        """Event instances stored by the shared network(s) (one copy per event)."""
        return sum(n.stored() for n in self.networks.values())

    # ------------------------------------------------------------------ streaming
    def push(self, batch: EventBatch) -> list[Match]:
        """Add events; returns the matches they complete, in the set's output order."""
        return self._push(batch, None)

    def _push(self, batch: EventBatch, lazy: _Lazy | None) -> list[Match]:
        """:meth:`push`; with ``lazy``, the outputs of the queries on their own plan are left
        in it unread (for :meth:`push_to`) and the rest is returned sorted, uncounted."""
        self._check_open()
        if self.time is None:
            self.time = batch.time
        t = batch.table
        if t.num_rows == 0:
            return []
        if not self.lateness:
            # late as in Runtime: behind the newest event before it (this or an earlier push)
            # or an advance(); the events kept are then in order
            from .runtime.engine import late_mask  # the engines load only when a set runs

            ts = t.column(TS).to_numpy()
            late = late_mask(ts, self.max_seen, self.frontier, 0)
            if late.any():
                self.late_count += int(late.sum())
                self.late_events.append(t.filter(pa.array(late)))
                t = t.filter(pa.array(~late))
                ts = ts[~late]
                if t.num_rows == 0:
                    return []
            self.max_seen = max(self.max_seen, int(ts[-1]))
            self.frontier = max(self.frontier, int(ts[-1]))
        gpos0 = self.next_gpos
        self.next_gpos += t.num_rows
        produced: Produced = []
        runtimes = [m for m in self.members.values() if m.runtime is not None]
        if len(self.networks) == 1 and not runtimes and self.placed is None:  # in order
            (net,) = self.networks.values()
            return self._count([x for _g, _o, x in net.process(t, gpos0)])
        net_out: list[tuple[int, int, Match]] = []
        for net in self.networks.values():
            net_out += net.process(t, gpos0)
        for g, qo, x in net_out:
            produced.append((x.end, g, (), qo, x))
        if runtimes:
            self._remember(t, gpos0)
            sub = EventBatch(t, batch.time)
            for mem in runtimes:
                if mem.reads:
                    continue
                if lazy is not None:
                    lazy.add(mem, mem.runtime.push(sub))
                else:
                    self._collect(mem, mem.runtime.push(sub), produced)
            consumers = [m for m in runtimes if m.reads]
            if consumers:
                if len(self.networks) > 1:
                    net_out.sort(key=itemgetter(0, 1))  # (position, query place), stable
                self._consume(consumers, t, gpos0, net_out, batch.time, produced)
        return self._finish(produced, lazy)

    def advance(self, watermark_us: int) -> list[Match]:
        """Promise no event below ``watermark_us`` will come (see Runtime.advance)."""
        return self._advance(watermark_us, None)

    def _advance(self, watermark_us: int, lazy: _Lazy | None) -> list[Match]:
        self._check_open()
        produced: Produced = []
        for m in list(self.members.values()):
            if m.runtime is not None:
                self._take(m, m.runtime.advance(watermark_us), produced, lazy)
        self.frontier = max(self.frontier, int(watermark_us))
        return self._finish(produced, lazy)

    def close(self) -> list[Match]:
        """End of stream: flush every query."""
        return self._close(None)

    def _close(self, lazy: _Lazy | None) -> list[Match]:
        self._check_open()
        produced: Produced = []
        for m in list(self.members.values()):
            if m.runtime is not None:
                self._take(m, m.runtime.close(), produced, lazy)
        self.closed = True
        return self._finish(produced, lazy)

    def _take(self, m: _Member, out: list[Match], produced: Produced,
              lazy: _Lazy | None) -> None:
        if lazy is not None and not m.reads:
            lazy.add(m, out)
        else:
            self._collect(m, out, produced)

    # streaming output: the same calls, the matches written to a sink in bounded pieces
    def push_to(self, batch: EventBatch, sink: Sink, *, chunk: int = SINK_CHUNK) -> int:
        """:meth:`push`, with the call's matches written to ``sink`` in the set's output
        order, in pieces of at most ``chunk`` matches (``MatchColumns`` or lists of
        ``Match``, as ``Runtime.push_to``); returns how many. The outputs of the queries on
        their own plan are read a piece at a time and merged with the rest by completing
        event: where a query's plan describes its matches compactly (the chain plan's
        blocks), memory stays flat in its output size (docs/engine.md, "Streaming output").
        The pieces concatenated are what :meth:`push` returns; counters are the same.

        Example:
            >>> import kleene
            >>> qs = kleene.compile_many(["NAME k PATTERN SEQ(A a, B+ b[], C c)",
            ...                           "NAME s PATTERN SEQ(A a, C c)"])
            >>> pieces: list[Any] = []
            >>> rt = qs.start()
            >>> rt.push_to(EventBatch.from_records([{"type": t, "ts": i} for i, t in
            ...                                     enumerate("ABBC")]), pieces.append)
            4
        """
        return self._to_sink(lambda lazy: self._push(batch, lazy), sink, chunk)

    def advance_to(self, watermark_us: int, sink: Sink, *, chunk: int = SINK_CHUNK) -> int:
        """:meth:`advance`, with the matches written to ``sink`` (see :meth:`push_to`)."""
        return self._to_sink(lambda lazy: self._advance(watermark_us, lazy), sink, chunk)

    def close_to(self, sink: Sink, *, chunk: int = SINK_CHUNK) -> int:
        """:meth:`close`, with the matches written to ``sink`` (see :meth:`push_to`)."""
        return self._to_sink(self._close, sink, chunk)

    def _to_sink(self, call: Callable[[_Lazy | None], list[Match]], sink: Sink,
                 chunk: int) -> int:
        if isinstance(chunk, bool) or not isinstance(chunk, Integral) or chunk < 1:
            raise EngineError(f"chunk must be a positive number of matches, not {chunk!r}")
        chunk = int(chunk)
        if (self.lateness or self.placed is not None or self.rt_options.get("count_only")
                or not any(m.runtime is not None and not m.reads
                           for m in self.members.values())):
            # the lists of push (positions of late-sorted events, placeholders, the Spark
            # task's entries): written in pieces
            out = call(None)
            for i in range(0, len(out), chunk):
                sink(out[i:i + chunk])
            return len(out)
        lazy = _Lazy()
        flags = [(m.runtime, m.runtime.columnar) for m in self.members.values()
                 if m.runtime is not None and not m.reads]
        for rt, _was in flags:
            rt.columnar = True  # blocks and columns, read only when written
        try:
            eager = call(lazy)
        finally:
            for rt, was in flags:
                rt.columnar = was
        return self._merge_to(eager, lazy, sink, chunk)

    def _merge_to(self, eager: list[Any], lazy: _Lazy, sink: Sink, chunk: int) -> int:
        """Write the call's output: ``eager`` (sorted output entries) merged with each lazy
        query's output, read a piece at a time, by the set's order key (completing event's
        time and position, derived label, query place)."""
        cursors: list[_Cursor] = []
        if eager:
            cursors.append(_Cursor(iter([eager]), self))
        for m, out in lazy.outputs:
            if len(out):
                cursors.append(_Cursor(self._pieces(m, out, chunk), self))
        cursors = [c for c in cursors if c.load()]
        pending: list[Match] = []
        n = 0

        def flush() -> None:
            nonlocal pending
            if pending:
                self._count(pending)
                sink(pending)
                pending = []

        while cursors:
            if len(cursors) == 1:
                c, bound = cursors[0], None
            else:
                heads = sorted(((c.head(), i) for i, c in enumerate(cursors)))
                c, bound = cursors[heads[0][1]], heads[1][0]
            if c.cols is not None:
                k = c.run_length(bound)
                flush()
                piece = c.cols.slice(c.i, c.i + k) if k < len(c.cols) - c.i or c.i else c.cols
                self.counts[piece.query] += k
                sink(piece)
                n += k
                c.i += k
            else:
                entries = c.entries
                assert entries is not None
                i = c.i
                while i < len(entries) and (bound is None or entries[i][:4] < bound):
                    pending.append(entries[i][4])
                    i += 1
                    if len(pending) == chunk:
                        flush()
                n += i - c.i
                c.i = i
            if c.done() and not c.load():
                cursors.remove(c)
        flush()
        return n

    def _pieces(self, m: _Member, out: list[Match],
                chunk: int) -> Iterator[MatchColumns | Produced]:
        """A lazy query's output a piece at a time: column pieces as they are, lists as
        output entries (keyed as :meth:`push` keys them)."""
        for part in (out.parts if isinstance(out, MatchTable) else [out]):
            for piece in parts_in_chunks(part, chunk):
                if isinstance(piece, MatchColumns):
                    yield piece
                else:
                    entries: Produced = []
                    self._collect(m, piece, entries)
                    yield entries

    @property
    def late(self) -> EventBatch | None:
        """Events that arrived behind the frontier (counted, never matched)."""
        lates = list(self.late_events)
        # with allowed lateness every query has its own runtime, all fed the same batches:
        # any one of them holds the set's late events (without it, the set filters them)
        for m in self.members.values():
            if m.runtime is not None and m.runtime.late is not None:
                lates.append(m.runtime.late.table)
                break
        if not lates:
            return None
        return EventBatch(pa.concat_tables(lates, promote_options="default"),
                          self.time or TimeInfo())

    # ------------------------------------------------------------------ output order
    def _remember(self, t: pa.Table, gpos0: int) -> None:
        """Arrival positions of this call's events (and the previous call's), to place the
        completing event of a match from a query running on its own plan."""
        ids = t.column(ID).to_pylist()
        ts = t.column(TS).to_numpy().tolist()
        self._seen = [self._seen[1], {i: (s, gpos0 + k)
                                      for k, (i, s) in enumerate(zip(ids, ts, strict=True))}]
        self._seen_lo = self._seen_from[1]
        self._seen_from = (self._seen_from[1], gpos0)

    def _seen_start(self) -> None:
        """The first position :meth:`_remember` still holds (after a restore)."""
        firsts = [min(v[1] for v in d.values()) for d in self._seen if d]
        self._seen_lo = firsts[0] if firsts else 0
        self._seen_from = (self._seen_lo, firsts[-1] if firsts else 0)

    def _collect(self, m: _Member, matches: list[Match], produced: Produced) -> None:
        if m.reads:
            self._collect_consumer(m, matches, produced)
            return
        old, new = self._seen
        name = m.compiled.name
        placeholder = None
        for x in matches:
            if x.query != name:  # a count-mode placeholder: label it with the query
                placeholder = placeholder or Match(name, {}, x.start, x.end)
                x = placeholder
            best = (x.end, -1)
            for b in x.bindings.values():
                for i in (b if isinstance(b, tuple) else (b,)):
                    p = new.get(i) or old.get(i)
                    if p is not None and p > best:
                        best = p
            produced.append((best[0], best[1], (), m.order, x))

    def _finish(self, produced: Produced, lazy: _Lazy | None = None) -> list[Match]:
        produced.sort(key=_key4)
        if lazy is not None:
            return produced  # type: ignore[return-value]  # entries, merged by _merge_to
        if self.placed is not None:
            self.placed.extend(produced)
        return self._count([e[4] for e in produced])

    # ------------------------------------------------------------------ nested queries
    def _consume(self, consumers: list[_Member], t: pa.Table, gpos0: int,
                 net_out: list[tuple[int, int, Match]], time: TimeInfo,
                 produced: Produced) -> None:
        """Each consumer's stream for this call (docs/semantics.md §17): the input events and
        its producers' derived events, each right after its completing event; bound events
        map back to their ids (input) or labels (derived)."""
        n = t.num_rows
        labels: dict[int, str] = {}  # id(match) -> its label
        seen = dict.fromkeys(self.counts, 0)
        for _g, _qo, x in net_out:
            seen[x.query] = seen.get(x.query, 0) + 1
            labels[id(x)] = f"{x.query}#{self.counts.get(x.query, 0) + seen[x.query]}"
        ids_in = t.column(ID)
        ts_in = t.column(TS).to_numpy()
        has_id = "id" in t.column_names
        for mem in consumers:
            st = mem.consumer
            assert st is not None
            rows = [(g, qo, x) for g, qo, x in net_out if x.query in mem.reads]
            nd = len(rows)
            sid0 = st.next_sid
            st.next_sid += n + nd
            dg = np.array([g - gpos0 for g, _o, _x in rows], dtype=np.int64)
            in_at = np.arange(n, dtype=np.int64) + np.searchsorted(dg, np.arange(n),
                                                                   side="left")
            d_at = np.arange(nd, dtype=np.int64) + dg + 1
            part = t.set_column(t.column_names.index(ID), ID,
                               pa.array(sid0 + in_at, pa.int64()))
            if not has_id:
                part = part.append_column("id", ids_in)
            tables = [part]
            if nd:
                cols: dict[str, Any] = {
                    ID: pa.array(sid0 + d_at, pa.int64()),
                    TS: pa.array([x.end for _g, _o, x in rows], pa.int64()),
                    TYPE: pa.array([x.query for _g, _o, x in rows], pa.string())}
                # a derived event's attributes: its producer's key attributes, read on the
                # completing event (all of the match's events agree on them)
                keys_of = {p: self.members[p].key_attrs if p in self.members else ()
                           for p in mem.reads}
                for a in dict.fromkeys(a for p in mem.reads for a in keys_of[p]):
                    if a not in t.column_names:
                        continue
                    col = t.column(a).take(pa.array(dg))
                    own = pa.array([a in keys_of[x.query] for _g, _o, x in rows])
                    cols[a] = pc.if_else(own, col, pa.nulls(nd, col.type))
                if not has_id:
                    cols["id"] = pa.nulls(nd, ids_in.type)
                tables.append(pa.table(cols))
            merged = pa.concat_tables(tables, promote_options="default")
            order = np.empty(n + nd, dtype=np.int64)
            order[in_at] = np.arange(n)
            order[d_at] = np.arange(n, n + nd)
            merged = merged.take(pa.array(order))
            # remember what each stream id stands for (types the consumer reads only)
            keep = st.types
            tin = t.column(TYPE).to_pylist()
            idl = ids_in.to_pylist()
            for i in range(n):
                if keep is None or tin[i] in keep:
                    st.ids[sid0 + int(in_at[i])] = (idl[i], int(ts_in[i]), gpos0 + i, ())
            for j, (g, qo, x) in enumerate(rows):
                k = int(labels[id(x)].rsplit("#", 1)[1])
                st.ids[sid0 + int(d_at[j])] = (labels[id(x)], x.end, g, (qo, k))
            self._collect(mem, mem.runtime.push(EventBatch(merged, time)), produced)
            st.prune(int(ts_in[-1]))

    def _collect_consumer(self, m: _Member, matches: list[Match], produced: Produced) -> None:
        st = m.consumer
        assert st is not None
        for x in matches:
            best: tuple[int, int, tuple[int, ...]] | None = None
            bindings: dict[str, Any] = {}
            for v, b in x.bindings.items():
                many = isinstance(b, tuple)
                out = []
                for i in (b if isinstance(b, tuple) else (b,)):
                    e = st.ids.get(i)  # type: ignore[arg-type]  # the stream ids are ints
                    if e is None:
                        raise EngineError(f"query {m.compiled.name!r}: nested query state "
                                          f"lost event {i!r} (internal)")
                    out.append(e[0])
                    if best is None or e[1:] > best:
                        best = e[1:]
                bindings[v] = tuple(out) if many else out[0]
            y = Match(x.query, bindings, x.start, x.end, x.values)
            if best is None:
                produced.append((x.end, -1, (), m.order, y))
            else:
                produced.append((best[0], best[1], best[2], m.order, y))

    def _count(self, out: list[Match]) -> list[Match]:
        counts = self.counts
        for x in out:
            counts[x.query] += 1
        return out

    def _check_open(self) -> None:
        if self.closed:
            raise EngineError("the query set's runtime is closed")

    # ------------------------------------------------------------------ snapshot / restore
    def snapshot(self) -> bytes:
        """The whole set's state as plain bytes; restore it into a runtime of the same set
        (the same queries added and removed, so names and places agree)."""
        data = {
            "version": 1,
            "members": [(n, m.order, m.qid, m.network is not None)
                        for n, m in self.members.items()],
            "networks": {k: net.dump() for k, net in self.networks.items()},
            "runtimes": {n: m.runtime.snapshot() for n, m in self.members.items()
                         if m.runtime is not None},
            "next_gpos": self.next_gpos, "frontier": self.frontier, "max_seen": self.max_seen,
            "counts": dict(self.counts), "late_count": self.late_count,
            "seen": [list(d.items()) for d in self._seen],
            "consumers": {n: (m.consumer.next_sid, list(m.consumer.ids.items()))
                          for n, m in self.members.items() if m.consumer is not None},
        }
        return pickle.dumps(data, protocol=5)

    def restore(self, blob: bytes) -> None:
        """Replace the state with a :meth:`snapshot` of a runtime of the same set."""
        from .runtime.engine import _safe_loads

        data = _safe_loads(blob)
        if not isinstance(data, dict) or data.get("version") != 1 or "members" not in data:
            raise EngineError("not a kleene query-set snapshot")
        mine = [(n, m.order, m.qid, m.network is not None) for n, m in self.members.items()]
        if [tuple(x) for x in data["members"]] != mine:
            raise EngineError("snapshot is of a different query set (names, order or plans "
                              "differ)")
        for k, d in data["networks"].items():
            self.networks[tuple(k)].load(d)
        for n, b in data["runtimes"].items():
            self.members[n].runtime.restore(b)
        self.next_gpos = data["next_gpos"]
        self.frontier = data["frontier"]
        self.max_seen = data["max_seen"]
        self.counts = dict(data["counts"])
        self.late_count = data["late_count"]
        self._seen = [{(tuple(k) if isinstance(k, list) else k): tuple(v) for k, v in d}
                      for d in data["seen"]]
        self._seen_start()
        for n, (sid, ids) in data.get("consumers", {}).items():
            st = self.members[n].consumer
            if st is not None:
                st.next_sid = sid
                st.ids = {k: (v[0], v[1], v[2], tuple(v[3])) for k, v in ids}


class _Lazy:
    """The unread outputs of a call's queries on their own plan (for ``push_to``)."""

    __slots__ = ("outputs",)

    def __init__(self) -> None:
        self.outputs: list[tuple[_Member, list[Match]]] = []

    def add(self, m: _Member, out: list[Match]) -> None:
        self.outputs.append((m, out))


class _Cursor:
    """One sorted source of a call's output, a piece at a time: output entries, or a column
    piece of one query with its order keys as arrays (completing time, position)."""

    __slots__ = ("pieces", "rt", "entries", "cols", "ts", "pos", "place", "i")

    def __init__(self, pieces: Iterator[Any], rt: QuerySetRuntime) -> None:
        self.pieces = pieces
        self.rt = rt
        self.entries: Produced | None = None
        self.cols: MatchColumns | None = None
        self.ts: np.ndarray[Any, Any] = np.empty(0, np.int64)
        self.pos: np.ndarray[Any, Any] = np.empty(0, np.int64)
        self.place = 0
        self.i = 0

    def load(self) -> bool:
        """The next non-empty piece; False when there is none."""
        for p in self.pieces:
            if not len(p):
                continue
            self.i = 0
            if isinstance(p, MatchColumns):
                m = self.rt.members[p.query]
                # the query's runtime saw the set's events from its start: its positions
                # are the set's, shifted (no lateness: push_to keeps push's lists then)
                pos = p.last_gpos.astype(np.int64) + (self.rt.next_gpos - m.runtime.next_gpos)
                self.pos = np.where(pos >= self.rt._seen_lo, pos, -1)
                self.ts = np.asarray(p.end, dtype=np.int64)
                self.place = m.order
                self.cols, self.entries = p, None
            else:
                self.entries, self.cols = p, None
            return True
        self.cols = self.entries = None
        return False

    def done(self) -> bool:
        return self.i >= len(self.cols if self.cols is not None else self.entries or ())

    def head(self) -> tuple[Any, ...]:
        if self.cols is not None:
            return (int(self.ts[self.i]), int(self.pos[self.i]), (), self.place)
        assert self.entries is not None
        return self.entries[self.i][:4]

    def run_length(self, bound: tuple[Any, ...] | None) -> int:
        """How many column matches from the cursor on sort before ``bound``."""
        ts, pos = self.ts[self.i:], self.pos[self.i:]
        if bound is None:
            return len(ts)
        a = int(np.searchsorted(ts, bound[0], "left"))
        b = int(np.searchsorted(ts, bound[0], "right"))
        if ((), self.place) < (bound[2], bound[3]):  # ties on the completing event
            return a + int(np.searchsorted(pos[a:b], bound[1], "right"))
        return a + int(np.searchsorted(pos[a:b], bound[1], "left"))


__all__ = ["PLANS", "QuerySet", "QuerySetRuntime", "check_unique", "compile_many",
           "nested_reads"]
