"""The streaming automaton engine: ``evaluate`` for bounded input, ``start`` for streams.

Data flow for one pushed batch (docs/architecture.md):

1. *reorder*: events behind the frontier are late (counted, kept in ``late_events``); events
   within ``allowed_lateness_us`` wait in a buffer until the frontier passes them;
2. *vectorize*: per variable, the type test and the one-variable conjuncts become a boolean
   mask over the whole batch (Arrow kernels); events in no mask are dropped here;
3. *route*: partition keys (PARTITION BY + equivalence) are encoded and the surviving events are
   grouped with one stable argsort; per-partition positions come from the same sort;
4. *match*: each partition's events run through :class:`~kleene.runtime.linear.LinearMatcher`
   (or the group matcher for AND/ANY/groups);
5. *negation and output*: complete matches are checked against negation history, held while a
   trailing negation or an earlier-sorting match is pending, put in the documented output order
   and passed through PICK, EMIT RECENT, CONSUME and RETURN.

The runtime is algorithm-neutral: the matcher comes from the compiled plan
(:mod:`kleene.plans` chooses it). Example::

    >>> import kleene
    >>> from kleene.events import EventBatch
    >>> from kleene.plans import start
    >>> rt = start(kleene.analyze("PATTERN SEQ(A a, B b) WHERE b.x > a.x"))
    >>> ev = lambda i, t, ts, x: {"id": i, "type": t, "ts": ts, "x": x}
    >>> [m.bindings for m in rt.push(EventBatch.from_records([ev(0, "A", 1, 1), ev(1, "B", 2, 5)]))]
    [{'a': 0, 'b': 1}]
    >>> [m.bindings for m in rt.push(EventBatch.from_records([ev(2, "B", 3, 0)])) + rt.close()]
    []
"""

from __future__ import annotations

import gc
import io
import os
import pickle
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import repeat
from numbers import Integral
from operator import itemgetter
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CapacityError, EngineError, InputError
from ..events import EventBatch, Match
from ..events.matchtable import MatchBlock, MatchBlocks, MatchColumns, MatchTable, parts_in_chunks
from ..events.model import ID, TS, TYPE, TimeInfo, int64_array
from ..frozen import dataclass
from ..plan.layout import GPOS
from ..vocab import Strategy
from .caps import over_budget
from .linear import Candidate, cand_state
from .matcher import Matcher, MatcherOptions, OutputSpec
from .policies import _COUNT_MATCH, Policies

_FAR_PAST = -(2 ** 62)

MAX_MATCHES_PER_CALL = 2_000_000
"""Default of ``max_matches_per_call`` (docs/engine.md, "Bounded memory": 0.4-0.9 KB per
buffered match measured, so 1-2 GB at the cap)."""

_first = itemgetter(0)

GPOS_COL = "__gpos"
"""Optional input column: the events' positions in the whole stream (kleene.runtime.parallel
gives each worker its share of the stream with it)."""


MAX_PLACEHOLDERS = 1 << 31
"""Count mode: the most placeholder matches one call returns (beyond: read the counter)."""


def count_placeholders(n: int) -> list[Match]:
    """``n`` placeholder matches of a ``count_only`` run, or :class:`EngineError` when an exact
    count is too large for a list (the chain plan counts 2**2000 matches exactly)."""
    if n > MAX_PLACEHOLDERS:
        raise EngineError(f"count_only counted about 2**{n.bit_length() - 1} matches, too many to return one "
                          "placeholder each; read the runtime's counters.matches (the CLI's "
                          "--count prints the exact number)")
    return [_COUNT_MATCH] * n


def _last_gpos(x: Any) -> int:
    """The position of a complete match's last event (a Candidate or a direct entry)."""
    return int(x[0][0]) if type(x) is tuple else int(x.last_gpos)


Sink = Callable[[MatchColumns | list[Match]], Any]
"""Where :meth:`Runtime.push_to` writes matches: called with each piece in output order."""

SINK_CHUNK = 16_384
"""Default of the most matches in one piece handed to a sink."""


def _concat(a: list[Match], b: list[Match]) -> list[Match]:
    """Two consecutive outputs of a call (lists, or :class:`MatchTable` where the runtime is
    columnar) as one, keeping a table's columns and blocks unread."""
    if not len(b):
        return a
    if not len(a):
        return b
    if isinstance(a, MatchTable) or isinstance(b, MatchTable):
        t = a if isinstance(a, MatchTable) else MatchTable([a])
        t += b
        return t
    return a + b


def _output_key(h: tuple[Any, ...]) -> tuple[Any, ...]:
    """The output order (docs/semantics.md 10, Definition 4.4.12 of parallel-cep) from a
    matcher's sort key ``(last_gpos, sorted positions[, per-variable])``: last position,
    first position, then the positions from the second-to-last down to the second (dropping
    the last event and comparing again), then the per-variable tie-break. Flat: the positions
    end with -1 (below every position, so a match whose positions run out first is earlier)
    before the tie-break, which one flat tuple sorts faster than nested ones."""
    k = h[0]
    p = k[1]
    return (k[0], p[0], *p[-2:0:-1], -1, *k[2:])


def _flat_output_key(h: tuple[Any, ...]) -> tuple[int, ...]:
    """The output-order key as the NFA kernel emits it (one flat tuple of positions: last,
    first, then the second-to-last down to the second), from a matcher's sort key."""
    k = h[0]
    p = k[1]
    return (k[0], p[0], *p[-2:0:-1])


def late_mask(ts: np.ndarray[Any, Any], max_seen: int, frontier: int,
              lateness_us: int) -> np.ndarray[Any, Any]:
    """Which events of a push are late (docs/engine.md, "Streaming rules"): behind the newest
    event before them (in this or an earlier push) minus the allowed lateness, or behind an
    explicit advance(). Decided per event, so it does not depend on how input is batched."""
    newest_before = np.empty_like(ts)
    newest_before[0] = max_seen
    if len(ts) > 1:
        np.maximum.accumulate(ts[:-1], out=newest_before[1:])
        np.maximum(newest_before, max_seen, out=newest_before)
    late: np.ndarray[Any, Any] = (ts < frontier) | (ts < newest_before - max(lateness_us, 0))
    return late


def set_late_aside(t: pa.Table, counters: Counters, late_events: list[pa.Table],
                   max_seen: int, frontier: int, lateness_us: int
                   ) -> tuple[pa.Table, np.ndarray[Any, Any]]:
    """A push's first step: count ``t``'s events in, set its late ones aside (counted, kept
    in ``late_events``: :func:`late_mask`), and return the rest with their timestamps."""
    counters.events_in += t.num_rows
    ts = t.column(TS).to_numpy()
    late = late_mask(ts, max_seen, frontier, lateness_us)
    if late.any():
        counters.late_events += int(late.sum())
        late_events.append(t.filter(pa.array(late)))
        t = t.filter(pa.array(~late))
        ts = ts[~late]
    return t, ts


def default_workers() -> int:
    """The number of cores this process may use (``--workers``' default; here, not in
    :mod:`kleene.runtime.parallel`, so that a run in one process imports no multiprocessing)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def key_codes(t: pa.Table, attrs: Sequence[str]) -> tuple[np.ndarray[Any, Any], list[Any]]:
    """Encode the key columns: per-row code and the key value (a tuple) of each code."""
    n = t.num_rows
    if not attrs:
        return np.zeros(n, dtype=np.int64), [()]
    codes = np.zeros(n, dtype=np.int64)
    dicts: list[list[Any]] = []
    for a in attrs:
        if a in t.column_names:
            col = t.column(a)
            if pa.types.is_dictionary(col.type):
                col = col.cast(col.type.value_type)
            enc = pc.dictionary_encode(col, null_encoding="encode").combine_chunks()
            idx = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            vals = enc.dictionary.to_pylist()
        else:
            idx = np.zeros(n, dtype=np.int64)
            vals = [None]
        codes = codes * len(vals) + idx
        dicts.append(vals)
    uniq, inv = np.unique(codes, return_inverse=True)
    keys: list[Any] = []
    for u in uniq.tolist():
        parts = []
        for vals in reversed(dicts):
            u, r = divmod(u, len(vals))
            parts.append(vals[r])
        keys.append(tuple(reversed(parts)))
    return inv.astype(np.int64), keys


class CompiledLike(Protocol):
    """A compiled plan as the runtime uses it (kleene.plans.registry.CompiledPlan)."""

    @property
    def plan(self) -> Any: ...

    @property
    def spec(self) -> OutputSpec: ...

    def matcher(self, options: MatcherOptions) -> Matcher: ...


class Unordered(list):  # type: ignore[type-arg]
    """A list-valued attribute (JSON ``[1, 2]``): equal to the same list and written as one,
    but an ordering comparison raises TypeError, so that the generated predicates fall back
    to their safe form, where a comparison between non-scalars is NULL (docs/semantics.md,
    values and types; issue 17 item 8). A plain Python list would compare element-wise."""

    __slots__ = ()

    def _refuse(self, other: object) -> bool:
        raise TypeError("a list value has no order")

    __lt__ = __le__ = __gt__ = __ge__ = _refuse


def _is_listlike(t: pa.DataType) -> bool:
    return bool(pa.types.is_list(t) or pa.types.is_large_list(t)
                or pa.types.is_fixed_size_list(t) or pa.types.is_list_view(t)
                or pa.types.is_large_list_view(t))


def _may_hold_bools(t: pa.DataType) -> bool:
    """Can a column of type ``t`` give Python booleans as record values? (Numbers, text,
    binary, temporal, null and list columns cannot.)"""
    if pa.types.is_dictionary(t):
        return _may_hold_bools(t.value_type)
    return not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
                or pa.types.is_string(t) or pa.types.is_large_string(t)
                or pa.types.is_binary(t) or pa.types.is_large_binary(t)
                or pa.types.is_temporal(t) or pa.types.is_null(t) or _is_listlike(t))


def _pylist(col: pa.ChunkedArray | pa.Array) -> list[Any]:
    """A column as Python values: through numpy for null-free int64 / float64 columns (the
    same ints and floats, built faster than Arrow's per-value conversion)."""
    if col.null_count == 0 and (col.type == pa.int64() or col.type == pa.float64()):
        values: list[Any] = col.to_numpy().tolist()
        return values
    plain: list[Any] = col.to_pylist()
    if _is_listlike(col.type):
        return [None if v is None else Unordered(v) for v in plain]
    return plain


@contextmanager
def _no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while a batch is matched: the engine allocates many
    small acyclic tuples, and generational scans over them cost more than the matching."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@dataclass(slots=True)
class Counters:
    """What the runtime counted (exposed as ``Runtime.counters``)."""

    events_in: int = 0
    events_processed: int = 0
    candidate_events: int = 0
    late_events: int = 0
    matches: int = 0
    truncated_runs: int = 0
    truncated_matches: int = 0
    timeouts: int = 0
    """Timed-out partial matches released (EMIT TIMEOUTS)."""
    truncated_exact: bool = True
    """``truncated_matches`` is the exact number of matches the caps dropped (False: a lower
    bound -- the dropped matches could not be counted without enumerating them)."""
    events_skipped: int = 0
    """Events of saturated partitions that were not matched (``on_cap='truncate'``)."""


class Runtime:
    """A running query: ``push`` batches, ``advance`` the watermark, ``close`` at the end.

    Matches come back from each call in the documented output order; concatenating every
    call's result equals ``evaluate`` over the whole (ordered) stream.
    """

    def __init__(self, compiled: CompiledLike, *, allowed_lateness_us: int = 0,
                 max_runs_per_partition: int | None = 100_000,
                 max_matches_per_event: int | None = 1_000_000,
                 max_matches_per_call: int | None = MAX_MATCHES_PER_CALL,
                 on_cap: str = "error", count_only: bool = False,
                 use_kernel: bool = True) -> None:
        if on_cap not in ("error", "truncate"):
            raise EngineError(f"on_cap must be 'error' or 'truncate', not {on_cap!r}")
        for opt, val in (("max_runs_per_partition", max_runs_per_partition),
                         ("max_matches_per_event", max_matches_per_event),
                         ("max_matches_per_call", max_matches_per_call)):
            if val is not None and (isinstance(val, bool) or not isinstance(val, Integral)
                                    or val < 1):
                raise EngineError(f"{opt} must be a positive integer or None (no cap), "
                                  f"not {val!r}")
        max_runs_per_partition, max_matches_per_event, max_matches_per_call = (
            None if v is None else int(v)
            for v in (max_runs_per_partition, max_matches_per_event, max_matches_per_call))
        self.compiled = compiled
        self.plan = compiled.plan
        self.spec: OutputSpec = compiled.spec
        # a truncating runtime's matcher truncates at the match caps and raises at the runs
        # cap: the runtime then saturates the partition (``_saturate``) rather than advance
        # ``max_runs`` runs per event for matches that can only be dropped
        self.matcher: Matcher = compiled.matcher(MatcherOptions(
            max_runs=max_runs_per_partition, max_matches_per_event=max_matches_per_event,
            max_matches_per_call=max_matches_per_call,
            on_cap="saturate" if on_cap == "truncate" else on_cap, count_only=count_only,
            use_kernel=use_kernel))
        self.allowed_lateness_us = int(allowed_lateness_us)
        self.max_matches_per_event = max_matches_per_event
        # the kernel's count mode builds no matches: nothing for the per-call cap to bound
        self.max_matches_per_call = None if getattr(self.matcher, "count_mode", False) \
            else max_matches_per_call
        self.no_negation = not self.plan.negations or _decides_negation(self.matcher)
        """Every NOT (if any) is decided inside the automaton: complete matches go straight
        to the output buffer (no history check, nothing waits on a trailing NOT)."""
        self.on_cap = on_cap
        self.count_only = count_only
        self.count_placeholders = True
        """In count mode, return one placeholder per counted match (False: return nothing
        and only add to ``counters.matches``, an exact integer)."""
        self.counters = Counters()
        self.policies = Policies(self.plan, self.spec)
        bind = getattr(self.matcher, "bind_consumed", None)
        if bind is not None:  # the task engine discards the tasks of consumed events
            bind(lambda: self.policies.consumed)
        bind_build = getattr(self.matcher, "bind_to_match", None)
        if bind_build is not None:  # blocks that build Matches (RETURN) when written
            bind_build(self.policies.to_match)
        self.direct = getattr(self.matcher, "direct", None) is not None
        self.keyed_direct = self.direct and bool(getattr(self.matcher, "output_keys", False))
        self.plain: bool | None = None
        """No attribute column seen so far can hold booleans (None: no column seen yet)."""
        self._plain_hook: Callable[[bool], None] | None = getattr(self.matcher, "plain_values",
                                                                  None)
        """The matcher's direct entries carry the output-order key itself (the NFA kernel):
        sorted without a key function."""
        """The matcher emits finished ``(key, Match, None)`` entries (no NOT, policies or
        RETURN)."""
        self.columnar = False
        """Return a :class:`~kleene.events.matchtable.MatchTable` (the matches as columns,
        ``Match`` objects built only when read) where the matcher hands its matches over
        as columns (the ``runs`` plan) or as blocks (the chain plan's ``SEQ(a, b+, c)``
        join); the CLI sets it, its writers format the columns."""
        self._sinking = False
        """A :meth:`push_to` / :meth:`advance_to` / :meth:`close_to` call is running."""
        self._fresh_policies = self.policies.state()
        self._init_state()
        self.strategy = self.spec.strategy
        self._warned = False
        self.needs_positions = self.spec.needs_positions
        self.timeouts = self.spec.timeouts
        """EMIT TIMEOUTS: timed-out partial matches are released with the matches, once the
        frontier passes their expiry (docs/semantics.md 20)."""
        if self.timeouts and not hasattr(self.matcher, "expired_partials"):
            raise EngineError(f"query {self.spec.name!r}: the plan's matcher does not report "
                              "timed-out partial matches (EMIT TIMEOUTS)")
        self._kill = self.timeouts and self.spec.strategy in (Strategy.STRICT_CONTIGUITY,
                                                              Strategy.PARTITION_CONTIGUITY)
        """EMIT TIMEOUTS under a contiguity strategy: the matcher learns, per key, the time
        of the event that follows its runs in their contiguity sub-stream (it may be no
        candidate at all), which kills them if it comes before their window expired."""
        self._kill_src: tuple[Any, Any, list[Any]] | None = None
        self._kill_maps: dict[Any, dict[int, int]] | None = None
        self.out_keys: list[int] | None = None
        """When a list: the global position of every released match's last event is appended
        to it, in the order of the matches returned (the keyed parallel runtime merges its
        workers by them: two partitions never share a last event)."""
        self.block_keys = True
        """With ``out_keys``: a lazily read block adds its matches' key once per match (False:
        once per block, the key of all its matches -- a keyed stream worker, which cuts the
        blocks into pieces itself, keeps no list as long as the call's output)."""

    def _init_state(self) -> None:
        """The matching state of a freshly started runtime (everything :meth:`snapshot` saves
        except the counters)."""
        self.states: dict[Any, Any] = {}
        self.pos_base: dict[Any, int] = {}  # per PARTITION BY key: next per-partition position
        self.cpos_base: dict[Any, int] = {}  # per route key (partition-contiguity)
        self.next_gpos = 0
        self.frontier = _FAR_PAST  # timestamps below it are late
        self.max_seen = _FAR_PAST
        self.buffer: list[pa.Table] = []
        self.time: TimeInfo | None = None
        self.held: list[tuple[tuple[Any, ...], Candidate, Any]] = []
        """Complete matches waiting for release: (output key, candidate, route key of the
        state that found it: a PICK group under a count window is complete by its
        partition's positions; None when not known)."""
        self.touts: list[tuple[tuple[Any, ...], Match]] = []
        """Timed-out partial matches found but not yet released (a held match sorts first)."""
        self.late_events: list[pa.Table] = []
        self._admitting: list[tuple[Any, Any, Candidate]] = []
        self._groups_done: list[Any] = []
        self._extra_runs = 0
        self._extra_matches = 0
        """Runs and matches the runtime dropped itself (saturated partitions), beside the
        matcher's own ``truncated_runs`` / ``truncated_matches``."""
        self._fresh = True
        """No event matched since the start (or :meth:`reset`): the exact count of what a cap
        dropped may count the call's batch alone."""
        self._new_call()
        self.closed = False
        self.policies.restore(self._fresh_policies)

    def _new_call(self) -> None:
        """A push / advance / close starts: caps count afresh (``on_cap='truncate'``)."""
        self._saturated: set[Any] = set()
        self._sat_call = False
        self._kept_call = 0
        self._first_call = self._fresh
        if hasattr(self.matcher, "describe"):  # blocks only where the output is read lazily
            self.matcher.describe = self.columnar or self._sinking

    def reset(self) -> None:
        """Forget all matching state, as if freshly started; counters keep accumulating.

        Cheaper than compiling again: Spark tasks reuse one runtime for every key.
        """
        self._init_state()

    # ---------------------------------------------------------------------------------------
    # public API
    def push(self, batch: EventBatch) -> list[Match]:
        """Add events (in order, or out of order within the allowed lateness)."""
        with _no_gc():
            return self._push(batch)

    def _push(self, batch: EventBatch) -> list[Match]:
        self._check_open()
        self._new_call()
        if self.time is None:
            self.time = batch.time
        t = batch.table
        if t.num_rows == 0:
            return []
        t, ts = set_late_aside(t, self.counters, self.late_events, self.max_seen,
                               self.frontier, self.allowed_lateness_us)
        if t.num_rows == 0:
            return []
        self.max_seen = max(self.max_seen, int(ts.max()))
        if self.allowed_lateness_us <= 0 and not self.buffer:
            if np.all(ts[1:] >= ts[:-1]):
                self._process(t)
                if self.on_cap == "truncate" and (self._sat_call or self.counters.truncated_runs
                                                  or self.counters.truncated_matches):
                    self._count_dropped(t)
                self.frontier = max(self.frontier, int(ts[-1]))
                self._release_trailing(self.frontier)
                return self._release(None)
        self.buffer.append(t)
        return self._flush_buffer(self.max_seen - max(self.allowed_lateness_us, 0), inclusive=True)

    def advance(self, watermark_us: int) -> list[Match]:
        """Promise that no event with a timestamp below ``watermark_us`` will come; emits the
        matches this settles (trailing negation, buffered out-of-order events)."""
        self._check_open()
        self._new_call()
        with _no_gc():
            out = self._flush_buffer(int(watermark_us) - 1, inclusive=True)
        self.frontier = max(self.frontier, int(watermark_us))
        self._release_trailing(int(watermark_us))
        return _concat(out, self._release(None))

    def close(self) -> list[Match]:
        """End of stream: flush every buffered event and every pending match."""
        self._check_open()
        self._new_call()
        with _no_gc():
            out = self._flush_buffer(None, inclusive=True)
        self._release_trailing(None)
        out = _concat(out, self._release(None, final=True))
        self.closed = True
        return out

    # streaming output: the same calls, the matches written to a sink in bounded pieces
    def push_to(self, batch: EventBatch, sink: Sink, *, chunk: int = SINK_CHUNK) -> int:
        """:meth:`push`, with the call's matches written to ``sink`` in output order, in
        pieces of at most ``chunk`` matches (:class:`~kleene.events.matchtable.MatchColumns`
        or lists of ``Match``); returns how many. Where the plan describes its matches
        compactly (the chain plan's ``SEQ(a, b+, c)`` join, its SEQs of single variables
        and its general join's forward walk) no piece exists before it is written: memory
        stays flat in the output size (docs/engine.md, "Streaming output").
        The caps mean what they mean for :meth:`push`.

        Example:
            >>> from kleene import compile
            >>> rt = compile("PATTERN SEQ(A a, B+ b[], C c)", plan="chain").start()
            >>> pieces = []
            >>> rt.push_to(EventBatch.from_records([{"type": t, "ts": i} for i, t in
            ...                                     enumerate("ABBC")]), pieces.append)
            3
        """
        return self._to_sink(lambda: self.push(batch), sink, chunk)

    def advance_to(self, watermark_us: int, sink: Sink, *, chunk: int = SINK_CHUNK) -> int:
        """:meth:`advance`, with the matches written to ``sink`` (see :meth:`push_to`)."""
        return self._to_sink(lambda: self.advance(watermark_us), sink, chunk)

    def close_to(self, sink: Sink, *, chunk: int = SINK_CHUNK) -> int:
        """:meth:`close`, with the matches written to ``sink`` (see :meth:`push_to`)."""
        return self._to_sink(self.close, sink, chunk)

    def _to_sink(self, call: Callable[[], Any], sink: Sink, chunk: int) -> int:
        if isinstance(chunk, bool) or not isinstance(chunk, Integral) or chunk < 1:
            raise EngineError(f"chunk must be a positive number of matches, not {chunk!r}")
        self._sinking = True
        try:
            out = call()
        finally:
            self._sinking = False
        n = 0
        for part in (out.parts if isinstance(out, MatchTable) else [out]):
            for piece in parts_in_chunks(part, int(chunk)):
                sink(piece)
                n += len(piece)
        return n

    @property
    def late(self) -> EventBatch | None:
        """Events that arrived behind the frontier (never silently lost)."""
        if not self.late_events:
            return None
        return EventBatch(pa.concat_tables(self.late_events, promote_options="default"),
                          self.time or TimeInfo())

    # ---------------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self.closed:
            raise EngineError(f"query {self.plan.name!r}: the runtime is closed")

    def _flush_buffer(self, upto: int | None, inclusive: bool) -> list[Match]:
        if not self.buffer:
            return []
        t = pa.concat_tables(self.buffer, promote_options="default").combine_chunks()
        ts = t.column(TS).to_numpy()
        order = np.argsort(ts, kind="stable")
        t = t.take(int64_array(order))
        ts = ts[order]
        if upto is None:
            n = len(ts)
        else:
            n = int(np.searchsorted(ts, upto, side="right" if inclusive else "left"))
        ready, rest = t.slice(0, n), t.slice(n)
        self.buffer = [rest] if rest.num_rows else []
        if ready.num_rows:
            self._process(ready)
            self.frontier = max(self.frontier, int(ts[n - 1]))
            self._release_trailing(self.frontier)
        return self._release(None)

    # ---------------------------------------------------------------------------------------
    def _key_codes(self, t: pa.Table, attrs: tuple[str, ...]) -> tuple[np.ndarray[Any, Any],
                                                                     list[Any]]:
        """Encode the key columns: per-row code and the key value of each code."""
        return key_codes(t, attrs)

    def _positions(self, codes: np.ndarray[Any, Any], keys: list[Any],
                   base: dict[Any, int], order: np.ndarray[Any, Any] | None = None
                   ) -> np.ndarray[Any, Any]:
        """Per-key running positions (0-based within each key's sub-stream); ``order`` is a
        stable argsort of ``codes`` when the caller already has one."""
        n = len(codes)
        if len(keys) == 1:
            b = base.get(keys[0], 0)
            base[keys[0]] = b + n
            return np.arange(b, b + n, dtype=np.int64)
        if order is None:
            order = np.argsort(codes, kind="stable")
        sc = codes[order]
        starts = np.flatnonzero(np.r_[True, sc[1:] != sc[:-1]])
        counts = np.diff(np.r_[starts, n])
        rank = np.arange(n, dtype=np.int64) - np.repeat(starts, counts)
        offs = np.zeros(len(keys), dtype=np.int64)
        for ci, cnt in zip(sc[starts].tolist(), counts.tolist(), strict=True):
            k = keys[ci]
            b = base.get(k, 0)
            offs[ci] = b
            base[k] = b + cnt
        pos = np.empty(n, dtype=np.int64)
        pos[order] = rank + offs[sc]
        return pos

    _CHUNK = 1 << 16
    """Rows matched per step: large batches are cut so that a step's records stay in cache."""

    def _process(self, t: pa.Table) -> None:
        n = t.num_rows
        if n <= self._CHUNK:
            self._process_chunk(t)
            return
        for off in range(0, n, self._CHUNK):
            self._process_chunk(t.slice(off, self._CHUNK))

    def _process_chunk(self, t: pa.Table) -> None:
        """Steps 2-5 of docs/architecture.md for one chunk of ordered events (step 1,
        *reorder*, happened in :meth:`push` / :meth:`_flush_buffer`)."""
        n = t.num_rows
        self.counters.events_processed += n
        self._fresh = False
        if GPOS_COL in t.column_names:
            # a worker of the keyed parallel runtime: its share of the stream, with the
            # positions the events have in the whole stream (output order compares those)
            gpos = t.column(GPOS_COL).to_numpy().astype(np.int64, copy=False)
            self.next_gpos = int(gpos[-1]) + 1
        else:
            gpos = np.arange(self.next_gpos, self.next_gpos + n, dtype=np.int64)
            self.next_gpos += n
        masks, left_rows = self._vectorize(t)
        if getattr(self.matcher, "process_table", None) is not None:
            self._process_columnar(t, masks, left_rows, gpos)
            return
        routed = self._route(t, masks, gpos)
        if self._kill:
            self._kill_maps = self._contiguity_times(t)
        if routed is None:
            if self._kill:
                self._settle_killers()
            return
        recs, bl, groups, rcodes, rkeys, wpos = routed
        self._row_fallback(recs, bl, left_rows)
        self._match(recs, bl, groups, rkeys)
        if self._kill:
            self._settle_killers()
        self._bump_last_wpos(rcodes, rkeys, wpos, t)
        self._admit_all()

    def _process_columnar(self, t: pa.Table, masks: list[np.ndarray[Any, Any]],
                          left_rows: list[tuple[int, Any, tuple[int, ...]]],
                          gpos: np.ndarray[Any, Any]) -> None:
        """Steps 3-5 for a matcher that takes the whole chunk as arrays (the ``runs`` plan,
        kleene.runtime.runs): keys and positions here, the rest in its ``process_table``."""
        rcodes, rkeys = self._key_codes(t, self.plan.key_attrs)
        order = np.argsort(rcodes, kind="stable") if len(rkeys) > 1 else None
        cpos = (self._positions(rcodes, rkeys, self.pos_base, order) if self.plan.partition_by
                else gpos)
        self.matcher.process_table(self, t, masks, left_rows, gpos,  # type: ignore[attr-defined]
                                   cpos, rcodes, rkeys, order)
        self._cap_counters()

    # 2. vectorize -----------------------------------------------------------------------------
    def _vectorize(self, t: pa.Table) -> tuple[list[np.ndarray[Any, Any]],
                                                list[tuple[int, Any, tuple[int, ...]]]]:
        """Per candidate bit of the matcher, a boolean mask over the chunk: the type test and
        the vectorized one-variable conjuncts (Arrow kernels); conjuncts Arrow could not
        evaluate are returned as ``left_rows`` for the per-row fallback."""
        n = t.num_rows
        types = t.column(TYPE)
        type_masks: dict[str | None, np.ndarray[Any, Any]] = {}

        def type_mask(tp: str | None) -> np.ndarray[Any, Any]:
            m = type_masks.get(tp)
            if m is None:
                if tp is None:
                    m = np.ones(n, dtype=bool)
                else:
                    m = pc.fill_null(pc.equal(types, tp), False).to_numpy(zero_copy_only=False)
                type_masks[tp] = m
            return m

        specs = self.matcher.mask_specs()
        masks: list[np.ndarray[Any, Any]] = [type_mask(tp).copy() for tp, _m in specs]
        left_rows: list[tuple[int, Any, tuple[int, ...]]] = []
        for i, (_tp, vp_mask) in enumerate(specs):
            if vp_mask is None or not masks[i].any():
                continue
            sub_idx = np.flatnonzero(masks[i])
            sub = t.take(int64_array(sub_idx)) if len(sub_idx) < n else t
            m, left = vp_mask.mask(sub)
            if len(sub_idx) < n:
                full = np.zeros(n, dtype=bool)
                full[sub_idx[m]] = True
                masks[i] = full
            else:
                masks[i] = m
            if left:
                left_rows.append((i, vp_mask, left))
        return masks, left_rows

    # 3. route ---------------------------------------------------------------------------------
    def _route(self, t: pa.Table, masks: list[np.ndarray[Any, Any]],
               gpos: np.ndarray[Any, Any]) -> tuple[list[Any], list[int],
                                                    Iterable[tuple[int, int, int]],
                                                    np.ndarray[Any, Any], list[Any],
                                                    np.ndarray[Any, Any]] | None:
        """Keys, positions and the candidate records in routed order (by key, then stream
        order): ``(records, candidate bits, (key code, start, end) per key, route codes of
        every event, keys, window positions)``, or None when no event is a candidate."""
        plan = self.plan
        n = t.num_rows
        anym = np.zeros(n, dtype=bool)
        for m in masks:
            anym |= m
        sel = np.flatnonzero(anym)
        self.counters.candidate_events += len(sel)
        # keys and positions (over every event: positions count all events); one stable
        # argsort of the route codes serves both the positions and the routing. When no
        # rule reads per-key positions (no contiguity, no count window) only the candidate
        # events are encoded and sorted.
        key_attrs = plan.key_attrs
        if not self.needs_positions:
            if len(sel) == 0:
                return None
            sub = t.take(int64_array(sel)) if len(sel) < n else t
            rc_sel, rkeys = self._key_codes(sub, key_attrs)
            rcodes = np.zeros(n, dtype=np.int64)
            rcodes[sel] = rc_sel
            order_all = None
            if len(rkeys) > 1:
                sel = sel[np.argsort(rc_sel, kind="stable")]
            cpos = wpos = gpos
        else:
            rcodes, rkeys = self._key_codes(t, key_attrs)
            order_all = np.argsort(rcodes, kind="stable") if len(rkeys) > 1 else None
            if plan.partition_by:
                if key_attrs == plan.partition_by:
                    ppos = self._positions(rcodes, rkeys, self.pos_base, order_all)
                else:
                    pcodes, pkeys = self._key_codes(t, plan.partition_by)
                    ppos = self._positions(pcodes, pkeys, self.pos_base)
            else:
                ppos = gpos
            wpos = ppos
            if self.strategy is Strategy.PARTITION_CONTIGUITY and key_attrs:
                cpos = ppos if key_attrs == plan.partition_by else \
                    self._positions(rcodes, rkeys, self.cpos_base, order_all)
            else:
                cpos = ppos
            if self._kill:
                self._kill_src = (cpos, rcodes, rkeys)
            if len(sel) == 0:
                self._bump_last_wpos(rcodes, rkeys, wpos, t)
                return None
        bits = np.zeros(n, dtype=np.int64)
        for i in range(len(masks)):
            bits |= masks[i].astype(np.int64) << i
        # candidate events in routed order (by key, then stream order)
        if order_all is not None:
            sel = order_all[anym[order_all]]
        n_sel = len(sel)
        ts = t.column(TS).to_numpy()
        everything = n_sel == n and len(rkeys) == 1
        sel_arr = int64_array(sel)
        g_l = gpos[sel].tolist()
        c_l = g_l if cpos is gpos else cpos[sel].tolist()
        w_l = g_l if wpos is gpos else (c_l if wpos is cpos else wpos[sel].tolist())
        cols: list[list[Any]] = [g_l, ts[sel].tolist(),
                                 _pylist(t.column(ID) if everything else
                                         t.column(ID).take(sel_arr)), c_l, w_l]
        names = t.column_names
        bools = False
        for a in plan.layout.attrs:
            if a in names:
                col = t.column(a) if everything else t.column(a).take(sel_arr)
            elif a in ("ts", "type", "id"):
                col = t.column("__" + a)
                col = col if everything else col.take(sel_arr)
            else:
                cols.append([None] * n_sel)
                continue
            if pa.types.is_timestamp(col.type):
                col = col.cast(pa.timestamp("us", col.type.tz)).cast(pa.int64())
            bools = bools or _may_hold_bools(col.type)
            cols.append(_pylist(col))
        self._values_seen(bools)
        recs = list(zip(*cols, strict=True))
        bl = bits[sel].tolist()
        groups: Iterable[tuple[int, int, int]]
        if len(rkeys) == 1:
            groups = [(0, 0, n_sel)]
        else:
            src = rcodes[sel]
            starts = np.flatnonzero(np.r_[True, src[1:] != src[:-1]])
            ends = np.r_[starts[1:], n_sel]
            groups = list(zip(src[starts].tolist(), starts.tolist(), ends.tolist(), strict=True))
        return recs, bl, groups, rcodes, rkeys, wpos

    def _values_seen(self, bools: bool) -> None:
        """Tell the matcher whether attribute values can be booleans (``plain_values``): plain
        while no attribute column seen so far can hold one, guarded for good after."""
        if self.plain is False or self._plain_hook is None:
            return
        if bools:
            self.plain = False
            self._plain_hook(False)
        elif self.plain is None:
            self.plain = True
            self._plain_hook(True)

    def _row_fallback(self, recs: list[Any], bl: list[int],
                      left_rows: list[tuple[int, Any, tuple[int, ...]]]) -> None:
        """Conjuncts Arrow could not evaluate, per candidate row (clears their bits)."""
        if not left_rows:
            return
        nslots = len(self.plan.layout.var_slots)
        for i, vm, left in left_rows:
            bit = 1 << i
            for j, r in enumerate(recs):
                if not bl[j] & bit:
                    continue
                B: list[Any] = [None] * nslots
                B[vm.slot] = (r,) if vm.is_list else r
                Bt = tuple(B)
                for k in left:
                    if vm.row_fns[k].fn(Bt, 0) is not True:
                        bl[j] &= ~bit
                        break

    # 4. match ---------------------------------------------------------------------------------
    def _match(self, recs: list[Any], bl: list[int], groups: Iterable[tuple[int, int, int]],
               rkeys: list[Any]) -> None:
        """Each key's candidate records through the matcher, against that key's state; the
        complete candidates go to the output buffer (or to the negation step, ``_admit``)."""
        matcher = self.matcher
        mm = self.max_matches_per_event
        no_negation = self.no_negation
        direct = self.direct
        sort_key = matcher.sort_key
        out = self._admitting
        groups_done = self._groups_done
        # the matches-per-call cap: every complete match buffered (held, waiting on a trailing
        # NOT, or made by this call) counts; each partition's matcher gets what is left
        cap = self.max_matches_per_call
        used = 0
        if cap is not None:
            used = len(self.held)
            if matcher.has_trailing:
                used += sum(len(x.pending) for x in self.states.values())
        kill = self._kill_maps if self._kill else None
        truncate = self.on_cap == "truncate"
        for code, s, e in groups:
            key = rkeys[code]
            if truncate and key in self._saturated:
                self._skip(key, e - s)
                continue
            groups_done.append(key)
            st = self.states.get(key)
            if st is None:
                st = self.states[key] = matcher.new_state()
            if kill is not None:
                matcher.kmap = kill.get(self._space(key), {})  # type: ignore[attr-defined]
            cands: list[Any] = []  # Candidates, or (key, Match, None) entries when direct
            extra = 0  # matches of the MatchBlocks in cands beyond one per block
            try:
                if cap is None:
                    matcher.process(st, recs[s:e], bl[s:e], cands, mm)
                    extra = getattr(matcher, "described", 0)
                else:
                    # every matcher checks the budget after each event
                    budget = cap - used if cap > used else 0
                    matcher.process(st, recs[s:e], bl[s:e], cands, mm, budget)
                    extra = getattr(matcher, "described", 0)
                    if len(cands) + extra > budget:  # safety net: at most budget
                        over_budget(matcher, None, cands, budget - extra)
            except CapacityError as exc:
                if not truncate:
                    raise
                groups_done.pop()
                self._saturate(key, cands, exc)
                if exc.gpos is not None:  # the partition's events after the capped one
                    self.counters.events_skipped += sum(1 for r in recs[s:e]
                                                        if r[GPOS] > exc.gpos)
            used += len(cands) + extra
            if truncate:
                self._kept_call += len(cands) + extra
            if cands:
                if direct:
                    self.held.extend(cands)  # already (key, Match, None)
                elif no_negation:
                    # nothing to check: straight to the output buffer with their sort keys
                    self.held.extend(zip(map(sort_key, cands), cands, repeat(key)))
                else:
                    out.extend((st, key, c) for c in cands)
        self._cap_counters()

    def _cap_counters(self) -> None:
        """The matcher's truncation counts into the counters (and one warning)."""
        matcher = self.matcher
        c = self.counters
        runs = matcher.truncated_runs + self._extra_runs
        dropped = matcher.truncated_matches + self._extra_matches
        if (runs != c.truncated_runs or dropped != c.truncated_matches
                or self._sat_call) and not self._warned:
            self._warned = True
            warnings.warn(f"query {self.spec.name!r}: a cap was reached and on_cap='truncate' "
                          "dropped runs or matches; see the runtime's counters "
                          "(truncated_runs, truncated_matches)", RuntimeWarning, stacklevel=6)
        c.truncated_runs, c.truncated_matches = runs, dropped
        if getattr(matcher, "inexact", False):
            c.truncated_exact = False

    # on_cap='truncate' --------------------------------------------------------------------------
    def _saturate(self, key: Any, cands: list[Any], exc: CapacityError) -> None:
        """A cap raised in partition ``key`` (``exc``; with ``on_cap='truncate'`` that is the
        runs cap): the partition is saturated until the end of the call. Kept: its matches
        completed up to the event that reached the cap (they are complete). Dropped: its
        partial matches and every match its later events in this call complete (none is
        built); it starts afresh at the next call (docs/engine.md, "Bounded memory")."""
        if exc.cap != "runs" and cands:
            # (a matcher that raised at a match cap: that event's matches are incomplete)
            g = exc.gpos if exc.gpos is not None else max(map(_last_gpos, cands))
            kept = [x for x in cands if _last_gpos(x) != g]
            self._extra_matches += max(len(cands) - len(kept), exc.built)
            cands[:] = kept
        st = self.states.pop(key, None)
        if exc.cap == "runs":
            self._extra_runs += exc.built
        elif st is not None:
            self._extra_runs += self._live(st)
        if st is not None:
            self._extra_matches += len(getattr(st, "pending", ()))
        self._saturated.add(key)
        self._sat_call = True
        self.counters.truncated_exact = False  # until _count_dropped counts exactly

    def _skip(self, key: Any, n: int) -> None:
        """Events of a saturated partition in the rest of the call: not matched."""
        self._saturated.add(key)
        self.counters.events_skipped += n

    def _live(self, st: Any) -> int:
        live = getattr(self.matcher, "live", None)
        if live is not None:
            try:
                return int(live(st))
            except Exception:  # noqa: BLE001 - a partial state: its size is unknown
                return 0
        return len(getattr(st, "runs", ()) or ())

    EXACT_COUNT_WORK = 2_500_000
    """The most (live start, event) steps the exact count of dropped matches may take (about
    five seconds); beyond it the count is a lower bound (``truncated_exact`` False)."""

    def _count_dropped(self, t: pa.Table) -> None:
        """After a saturated first call over a whole batch ``t``: count every match of the
        batch with the chain plan's exact counter (no match is built) when it applies and its
        work is bounded; dropped = all - kept."""
        cp = getattr(self.compiled, "exact_counter", None)
        if cp is None or not self._first_call or self.plan.negations:
            return
        counter = Runtime(cp, max_runs_per_partition=None, max_matches_per_event=None,
                          max_matches_per_call=None, count_only=True)
        m: Any = counter.matcher
        if not getattr(m, "count_mode", False):
            return
        if not (m.window_swag or m.sum_starts):
            # one step per (live start, event): bounded by the events each window holds
            ts = t.column(TS).to_numpy()
            if m.win_us is not None:
                lo = np.searchsorted(ts, ts - m.win_us, side="left")
                work = int((np.arange(len(ts)) - lo).sum())
            elif m.win_ev is not None:
                work = len(ts) * int(m.win_ev)
            else:
                work = len(ts) * len(ts) // 2
            if work > self.EXACT_COUNT_WORK:
                return
        counter.count_placeholders = False
        counter.push(EventBatch(t, self.time or TimeInfo()))
        counter.close()
        kept = self._kept_call + int(getattr(self.matcher, "counted", 0))
        # the first call: every match dropped so far was dropped in it
        self._extra_matches = counter.counters.matches - kept - self.matcher.truncated_matches
        self.counters.truncated_matches = counter.counters.matches - kept
        self.counters.truncated_exact = True

    # EMIT TIMEOUTS under a contiguity strategy ------------------------------------------------
    def _space(self, key: Any) -> Any:
        """The contiguity sub-stream of a route key: the partition (strict-contiguity) or the
        key itself (partition-contiguity)."""
        if self.spec.strategy is Strategy.STRICT_CONTIGUITY:
            return key[:len(self.plan.partition_by)]
        return key

    def _contiguity_times(self, t: pa.Table) -> dict[Any, dict[int, int]]:
        """Per contiguity sub-stream: contiguity position -> time, for every event of the
        chunk (candidates or not)."""
        assert self._kill_src is not None
        cpos, rcodes, rkeys = self._kill_src
        spaces = [self._space(k) for k in rkeys]
        out: dict[Any, dict[int, int]] = {}
        for code, cp, ts in zip(rcodes.tolist(), cpos.tolist(),
                                t.column(TS).to_numpy().tolist(), strict=True):
            out.setdefault(spaces[code], {})[cp] = ts
        return out

    def _settle_killers(self) -> None:
        """Tell every key whose runs' next event came in this chunk when it came."""
        maps = self._kill_maps or {}
        for key, st in self.states.items():
            if st.runs and st.killer is None:
                st.killer = maps.get(self._space(key), {}).get(st.runs[0][6] + 1)

    # 5. negation and release ------------------------------------------------------------------
    def _admit_all(self) -> None:
        """Complete candidates of this chunk through the negation step; prune history."""
        out, self._admitting = self._admitting, []
        for st, key, c in out:
            self._admit(st, c, key)
        done, self._groups_done = self._groups_done, []
        if self.plan.negations:
            for key in done:
                self.matcher.prune(self.states[key])

    def _bump_last_wpos(self, rcodes: np.ndarray[Any, Any], rkeys: list[Any],
                        wpos: np.ndarray[Any, Any], t: pa.Table) -> None:
        if not self.matcher.has_trailing:
            return
        for ci, k in enumerate(rkeys):
            st = self.states.get(k)
            if st is not None and st.pending:
                sel = wpos[rcodes == ci]
                if len(sel):
                    st.last_wpos = max(st.last_wpos, int(sel.max()))
                for c in self.matcher.release_pending(st, _FAR_PAST):
                    self._ready(c, k)

    def _admit(self, st: Any, c: Candidate, key: Any = None) -> None:
        m = self.matcher
        if self.no_negation:
            self.held.append((m.sort_key(c), c, key))
            return
        if not m.negation_ok(st, c) or not m.match_preds_ok(c):
            m.forget(c)
            return
        if m.needs_trailing(c):
            m.admit_pending(st, c)
            return
        m.forget(c)
        self._ready(c, key)

    def _ready(self, c: Candidate, key: Any = None) -> None:
        self.held.append((self.matcher.sort_key(c), c, key))

    def _release_trailing(self, watermark: int | None) -> None:
        if not self.matcher.has_trailing:
            return
        for key, st in self.states.items():
            for c in self.matcher.release_pending(st, watermark):
                self._ready(c, key)

    def _release(self, watermark: int | None, final: bool = False) -> list[Match]:
        del watermark
        if self.timeouts:
            return self._with_timeouts(self._release_matches(final), final)
        return self._release_matches(final)

    def _with_timeouts(self, out: list[Match], final: bool) -> list[Match]:
        """Merge the timed-out partial matches the frontier has passed into ``out``
        (docs/semantics.md 20: a timeout with expiry T after every match completed at ts <= T,
        before every later one)."""
        wm = None if final else self.frontier
        for st in self.states.values():
            self.touts.extend(self.matcher.expired_partials(st, wm))  # type: ignore[attr-defined]
        if not self.touts:
            return out
        self.touts.sort(key=_first)
        held: list[Any] = [c for _k, c, _x in self.held]  # candidates, or direct Matches
        bound = min((c.end if isinstance(c, Match) else c.last_ts for c in held), default=None)
        k = len(self.touts)
        if bound is not None:
            k = 0
            while k < len(self.touts) and self.touts[k][0][0] < bound:
                k += 1
        ready, self.touts = self.touts[:k], self.touts[k:]
        if not ready:
            return out
        self.counters.timeouts += len(ready)
        merged = out + [m for _k, m in ready]
        if self.out_keys is not None:
            # the last event's global position of each output, kept beside it in the merge
            lasts = self.out_keys[len(self.out_keys) - len(out):] + [k[1] for k, _m in ready]
            del self.out_keys[len(self.out_keys) - len(out):]
            pairs = sorted(zip(merged, lasts, strict=True), key=lambda p: _merge_key(p[0]))
            self.out_keys.extend(k for _m, k in pairs)
            return [m for m, _k in pairs]
        merged.sort(key=_merge_key)
        return merged

    def _release_matches(self, final: bool) -> list[Match]:
        m: Any = self.matcher  # count mode: matchers that count say so with ``counted``
        counted = getattr(m, "counted", 0)
        if counted:
            m.counted = 0
            self.counters.matches += counted
            # exact counts can be astronomically large: callers that read
            # ``counters.matches`` switch the placeholder list off
            return count_placeholders(counted) if self.count_placeholders else []
        take = getattr(m, "take_columns", None)
        if take is not None:  # a matcher that hands its matches over as columns (runs)
            table = MatchTable(take())
            self.counters.matches += len(table)
            if self.out_keys is not None:
                for p in table.parts:
                    self.out_keys.extend(p.last_gpos.tolist())  # type: ignore[union-attr]
            return table if self.columnar else table.to_list()  # type: ignore[return-value]
        if not self.held:
            return []
        limit: int | None = None
        if not final and self.matcher.has_trailing:
            pend = [c.last_gpos for st in self.states.values() for c in st.pending]
            if pend:
                limit = min(pend)
        # the kernel's direct entries carry their output key already (and a restored
        # snapshot's candidates are re-keyed on restore); others are keyed here
        self.held.sort(key=_first if self.keyed_direct else _output_key)
        if limit is None:
            ready, self.held = self.held, []
        else:
            k = 0
            while k < len(self.held) and self.held[k][0][0] < limit:
                k += 1
            ready, self.held = self.held[:k], self.held[k:]
        if not final and self.policies.needs_all:
            # PICK compares the matches of a group (equal but for the picked variable); a
            # group is complete once no future event can complete a new member of it
            k = 0
            while k < len(ready) and self._group_complete(ready[k][1], ready[k][2]):
                k += 1
            # a held match holds back every released one it competes with (issue 17: a
            # match released before its rival was never compared with it)
            k = self.policies.release_cut([c for _k, c, _x in ready], k)
            ready, self.held = ready[:k], ready[k:] + self.held
        cands: list[Any] = [c for _k, c, _ in ready]
        if (self.direct or self._sinking or self.columnar) and any(
                isinstance(c, MatchBlock) for c in cands):
            return self._release_blocks(ready)  # type: ignore[return-value]
        if self.direct:
            # finished Matches (a restored snapshot may still hold candidates)
            to_match = self.policies.to_match
            out = [c if type(c) is Match else to_match(c) for c in cands]
            if self.out_keys is not None:
                self.out_keys.extend(h[0][0] for h in ready)
        elif self.out_keys is None:
            out = self.policies.apply(cands, self.matcher, self.count_only)
        else:
            kept = self.policies.select(cands)
            if self.policies.rows is None:
                self.out_keys.extend(c.last_gpos for c in kept)
            else:  # EMIT ROWS: one output per row, each with its match's key
                for c in kept:
                    self.out_keys.extend([c.last_gpos] * self.policies.row_count(c))
            out = self.policies.build(kept, self.count_only)
        if len(self.policies.consumed) > self._CONSUMED_PRUNE:
            self._prune_consumed()
        self.counters.matches += len(out)
        return out

    def _group_complete(self, c: Candidate, key: Any) -> bool:
        """No future event can join ``c``'s PICK groups: the picked variable comes before a
        bound one in a SEQ (``Policies.complete_now``), or the stream is past the time window's
        end (``Policies.release_ts``) or, with a count window, the next event's window position
        is past it (``Policies.release_wpos``; per partition with PARTITION BY: ``key``, the
        route key of the state that found ``c``, starts with the partition's values)."""
        if self.policies.complete_now(c):
            return True
        w = self.spec.within
        if w is not None and w.is_count:
            at = self.policies.release_wpos(c)
            if at is None:
                return False
            pb = self.plan.partition_by
            if not pb:
                return at <= self.next_gpos
            if key is None or tuple(self.plan.key_attrs[:len(pb)]) != tuple(pb):
                return False
            nxt = self.pos_base.get(tuple(key[:len(pb)]))
            return nxt is not None and at <= nxt
        rt = self.policies.release_ts(c)
        return rt is not None and rt < self.frontier

    _CONSUMED_PRUNE = 1 << 16

    def _release_blocks(self, ready: list[Any]) -> MatchTable:
        """Direct entries, some of them :class:`MatchBlock` (only in a lazily read call), as
        a :class:`MatchTable` whose blocks are expanded when it is read."""
        to_match = self.policies.to_match
        parts: list[Any] = []
        run: list[Match] = []
        blocks: list[MatchBlock] = []
        for h in ready:
            c = h[1]
            if isinstance(c, MatchBlock):
                if run:
                    parts.append(run)
                    run = []
                blocks.append(c)
                if self.out_keys is not None:
                    self.out_keys.extend(repeat(h[0][0], len(c) if self.block_keys else 1))
                continue
            if blocks:
                parts.append(MatchBlocks(blocks))
                blocks = []
            run.append(c if type(c) is Match else to_match(c))
            if self.out_keys is not None:
                self.out_keys.append(h[0][0])
        parts.append(run if run else MatchBlocks(blocks))
        table = MatchTable(parts)
        self.counters.matches += len(table)
        return table

    def _prune_consumed(self) -> None:
        """CONSUME remembers consumed positions; those below every position a future or
        waiting match can bind are dropped (bounded memory on long streams)."""
        bound = self.next_gpos
        for st in self.states.values():
            o = self.matcher.oldest(st)
            if o is not None:
                bound = min(bound, o)
            for c in st.pending:
                bound = min(bound, c.positions[0])
        for _k, c, _x in self.held:
            bound = min(bound, c.positions[0])
        self.policies.consumed = {p for p in self.policies.consumed if p >= bound}

    def release_bound(self) -> int | None:
        """The smallest global position (of a last event) at which this runtime may still
        release a match: its earliest held match or run waiting on a trailing NOT; None when
        everything it found is out. A keyed parallel stream releases its workers' merged
        output below the smallest bound (kleene.runtime.parallel.ParallelStream), as one
        runtime would."""
        bounds = [k[0] for k, _c, _x in self.held]
        if self.matcher.has_trailing:
            bounds += [c.last_gpos for st in self.states.values() for c in st.pending]
        return min(bounds) if bounds else None

    def temporary_matches(self) -> dict[str, int] | None:
        """Temporary matches (LinkedCEP's measure) the matcher created and copied so far, and
        the partial matches it stores now (runs, or the chain plan's nodes); None when the
        matcher does not count them (the NFA counts in its interpreter, ``use_kernel=False``)."""
        m: Any = self.matcher
        if not hasattr(m, "created") or getattr(m, "kernel", None) is not None:
            return None
        live_fn = getattr(m, "live", None)
        live = sum(live_fn(st) if live_fn is not None else len(getattr(st, "runs", ()))
                   for st in self.states.values())
        return {"created": int(m.created), "copied": int(m.copied), "live": live}

    # ---------------------------------------------------------------------------------------
    def snapshot(self) -> bytes:
        """The whole runtime state as bytes (plain data only; see :meth:`restore`)."""
        if any(isinstance(c, (Match, MatchBlock)) for _k, c, _x in self.held):
            # direct mode releases every match in the call that made it, so this is a bug
            raise EngineError(f"query {self.plan.name!r}: cannot snapshot while finished "
                              "matches are unreleased (internal error)")
        states = {k: self.matcher.dump_state(st) for k, st in self.states.items()}
        buf = None
        if self.buffer:
            sink = io.BytesIO()
            tb = pa.concat_tables(self.buffer, promote_options="default")
            with pa.ipc.new_stream(sink, tb.schema) as w:
                w.write_table(tb)
            buf = sink.getvalue()
        data = {
            "version": 1, "query": self.plan.name, "states": states, "closed": self.closed,
            "pos_base": self.pos_base, "cpos_base": self.cpos_base,
            "next_gpos": self.next_gpos, "frontier": self.frontier,
            "max_seen": self.max_seen, "buffer": buf, "plain": self.plain,
            "held": [(k, cand_state(c)) for k, c, _ in self.held],
            "held_keys": [x for _k, _c, x in self.held],
            "policies": self.policies.state(),
            "timeouts": self.counters.timeouts,
            "touts": [(k, (m.query, dict(m.bindings), m.start, m.end, m.expired))
                      for k, m in self.touts],
            "counters": [self.counters.events_in, self.counters.events_processed,
                         self.counters.candidate_events, self.counters.late_events,
                         self.counters.matches, self.counters.truncated_runs,
                         self.counters.truncated_matches],
            "time": None if self.time is None else (self.time.kind, self.time.unit,
                                                    self.time.tz),
        }
        return pickle.dumps(data, protocol=5)

    def restore(self, blob: bytes) -> None:
        """Replace this runtime's state with a snapshot taken from the same query.

        Late events collected since the last restore are output, not state: they are dropped
        here (read :attr:`late` before restoring).
        """
        data = _safe_loads(blob)
        self.late_events = []
        if data.get("version") != 1 or data.get("query") != self.plan.name:
            raise EngineError(f"snapshot is not of query {self.plan.name!r}")
        self.states = {k: self.matcher.load_state(d) for k, d in data["states"].items()}
        self.pos_base = data["pos_base"]
        self.cpos_base = data["cpos_base"]
        self.next_gpos = data["next_gpos"]
        self.frontier = data["frontier"]
        self.max_seen = data["max_seen"]
        self.buffer = []
        if data["buffer"] is not None:
            with pa.ipc.open_stream(data["buffer"]) as r:
                self.buffer = [r.read_all()]
        keys = data.get("held_keys") or [None] * len(data["held"])
        self.held = [(k, Candidate(*c), x) for (k, c), x in zip(data["held"], keys, strict=True)]
        # whether attribute values so far could be booleans (an older snapshot: assume so)
        self.plain = None
        plain = data.get("plain", False)
        if plain is not None:
            self._values_seen(not plain)
        if self.keyed_direct:  # direct entries are sorted by the flat output key (_release)
            self.held = [(_flat_output_key(e), e[1], None) for e in self.held]
        self.closed = bool(data.get("closed", False))
        self.policies.restore(data["policies"])
        self.counters.timeouts = data.get("timeouts", 0)
        self.touts = [(k, Match(q, b, s, e, {}, x)) for k, (q, b, s, e, x) in
                      data.get("touts", [])]
        (self.counters.events_in, self.counters.events_processed,
         self.counters.candidate_events, self.counters.late_events, self.counters.matches,
         self.counters.truncated_runs, self.counters.truncated_matches) = data["counters"]
        if data["time"] is not None:
            self.time = TimeInfo(*data["time"])


class _PlainUnpickler(pickle.Unpickler):
    """Loads only plain data (no classes, no callables): snapshots cannot run code."""

    def find_class(self, module: str, name: str) -> Any:
        raise EngineError(f"snapshot contains a non-data object {module}.{name}")


def safe_loads(blob: bytes) -> Any:
    """Unpickle plain data only (a snapshot): anything naming a class is refused."""
    return _safe_loads(blob)


def _safe_loads(blob: bytes) -> Any:
    try:
        return _PlainUnpickler(io.BytesIO(blob)).load()
    except EngineError:
        raise
    except Exception as exc:
        raise EngineError(f"not a kleene runtime snapshot: {exc}") from exc


def _merge_key(m: Match) -> tuple[int, bool]:
    """Matches by their completing event's time, a timed-out partial match at its expiry,
    after the matches completed at that time (a stable sort keeps each kind's own order)."""
    return (m.end, False) if m.expired is None else (m.expired, True)


def _decides_negation(m: Any) -> bool:
    """Does the matcher decide every NOT inside its automaton (no history check of complete
    matches, no trailing wait)? Every matcher says so (``decides_negation``)."""
    return bool(m.decides_negation) and not m.has_trailing


def run_batch(rt: Runtime, events: EventBatch) -> list[Match]:
    """Push a bounded, ordered batch through a fresh runtime and close it."""
    if len(events) == 0:
        return rt.close()
    ts = events.ts
    if len(ts) > 1 and not np.all(ts[1:] >= ts[:-1]):
        raise InputError("events must be ordered by timestamp")
    with _no_gc():  # also between push and close (see _no_gc)
        out = rt.push(events)
        out = _concat(out, rt.close())  # (a MatchTable's columns and blocks kept unread)
    return out


__all__ = ["GPOS_COL", "Counters", "Runtime", "key_codes", "late_mask", "run_batch",
           "safe_loads"]
