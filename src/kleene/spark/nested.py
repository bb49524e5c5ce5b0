"""Nested query sets on Spark (docs/semantics.md §17, docs/spark.md "Query sets").

A *nested group* is a connected part of a set's read graph: producers and the consumers that
read their matches as derived events. Its queries run together (per key, or in one Spark
task), through the embedded set engine (:class:`kleene.QuerySetRuntime`); the set's other queries keep their
own plans (:func:`kleene.spark.batch.match_set`).

A group whose queries all share a key on Spark (:func:`kleene.spark.batch.group_key`) runs
per key, each key with a fresh set runtime: a consumer's stream, positions and windows are per
key then. A derived event's label ``P#k`` is global, though (``k`` numbers *all* of the
producer's matches in the producer's order), so the driver also runs each producer alone,
numbers its matches, and ships each number to its key as a *rank row* (:data:`RANK`); the task
maps the key's j-th match of P to the j-th of those numbers (:func:`relabel`). A group without
a shared key runs in one task (the whole input): exact by construction, the same engine as
``kleene.compile_many(...).run``, at the cost of parallelism for that group only.

The task's output rows carry the set's order columns: ``__end_us`` and ``__last_pos`` of the
completing *input* event, ``__set_pos`` the query's place, or ``N + the producer's place`` (N:
the number of queries in the set) for a consumer match completed by a derived event (those
come after the input event's own matches), and ``__seq`` the running number in the engine's
output order. Sorting by them (:func:`kleene.spark.in_output_order`) gives the embedded set's
order.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import EngineError, InputError, QueryValidationError
from ..events import EventBatch, Match, TimeInfo
from ..events.model import ID, TS, TYPE
from ..frozen import dataclass
from .tasks import END_US, SEQ, TaskSpec, _Out, check_events, key_groups, output_schema

RANK = "__rank"
"""A rank row's global match number ``k`` of a producer match of the row's key (keyed groups);
NULL on an event row."""
RANK_OF = "__rank_of"
"""A rank row's producer: its index in the group."""
SET_POS = "__set_pos"
"""The query's place in its set (a query set's output: docs/semantics.md §17); for a consumer
match completed by a derived event, the set's size plus the producer's place."""


def nested_groups(qs: Any) -> list[tuple[int, ...]]:
    """The places of each nested group of the :class:`kleene.QuerySet` ``qs`` (the queries
    linked by reading one another's matches), in set order; queries outside every group are
    not listed."""
    from ..queryset import nested_reads

    names = qs.names
    at = {n: i for i, n in enumerate(names)}
    parent = list(range(len(names)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    linked: set[int] = set()
    for n, producers in nested_reads(list(qs.queries)).items():
        for p in producers:
            linked |= {at[n], at[p]}
            parent[root(at[n])] = root(at[p])
    groups: dict[int, list[int]] = {}
    for i in sorted(linked):
        groups.setdefault(root(i), []).append(i)
    return sorted(tuple(g) for g in groups.values())


def union_schema(schemas: list[pa.Schema], names: list[str]) -> pa.Schema:
    """The fields of ``schemas`` by name, in order of appearance; a name two queries type
    differently is an error naming both."""
    fields: dict[str, tuple[pa.Field, str]] = {}
    for schema, name in zip(schemas, names, strict=True):
        for f in schema:
            known = fields.get(f.name)
            if known is None:
                fields[f.name] = (f, name)
            elif known[0].type != f.type:
                raise QueryValidationError(
                    f"query set on Spark: column {f.name!r} is {known[0].type} in query "
                    f"{known[1]!r} and {f.type} in {name!r}; rename it (AS) or use "
                    "output='json'")
    return pa.schema([f for f, _ in fields.values()])


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """What a nested group's task needs; pickled once into the Spark closure."""

    queries: Any
    """The group's :class:`kleene.QuerySet` (its queries in set order)."""
    places: tuple[int, ...]
    """The set place of each of the group's queries."""
    n_set: int
    """The number of queries in the whole set."""
    specs: tuple[TaskSpec, ...]
    """Per query of the group: its output (columns, RETURN fields, time)."""
    schema: pa.Schema
    """The group's output: the union of its queries' outputs, then ``__set_pos``."""
    attr_cols: tuple[str, ...]
    time: TimeInfo
    order_col: str
    options: dict[str, Any]
    """The set runtime's options (caps)."""
    text_ids: bool
    """Ids are written as text (a derived event's id is its label ``P#k``)."""
    keys: tuple[str, ...] = ()
    """A key every query of the group is partitioned by: the task runs the group per key
    (fresh state each), relabelling derived events with the producer's global match numbers
    carried by the rank rows (:data:`RANK`); ``()``: the whole input is one group."""


def as_text(m: Match) -> Match:
    """``m`` with every bound id as text."""
    bindings = {v: tuple(str(i) for i in b) if isinstance(b, tuple) else str(b)
                for v, b in m.bindings.items()}
    return replace(m, bindings=bindings)


def _load_group(blob: bytes, modules: tuple[str, ...]) -> GroupRunner:
    from .ship import load_spec

    return GroupRunner(load_spec(blob, modules))


class GroupRunner:
    """The ``mapInArrow`` function of a nested group: the whole input (one task, sorted by
    time and position) in, the group's matches out with the set's order columns."""

    def __init__(self, spec: GroupSpec) -> None:
        self.spec = spec

    def __reduce__(self) -> tuple[Any, ...]:
        from .ship import dump_spec, udf_modules

        udfs = {k: v for q in self.spec.queries.queries for k, v in q.analyzed.udfs.items()}
        return (_load_group, (dump_spec(self.spec), tuple(udf_modules(udfs))))

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        spec = self.spec
        for key, table in key_groups(batches, spec.keys):
            ranks: dict[int, list[int]] | None = None
            if spec.keys:
                is_rank = pc.is_valid(table.column(RANK))
                rk = table.filter(is_rank)
                table = table.filter(pc.invert(is_rank))
                ranks = {}
                for of, k in zip(rk.column(RANK_OF).to_pylist(), rk.column(RANK).to_pylist(),
                                 strict=True):
                    ranks.setdefault(int(of), []).append(int(k))
                for v in ranks.values():
                    v.sort()
            if table.num_rows:
                yield from self._run(key, table, ranks)

    def _run(self, key: tuple[Any, ...], table: pa.Table,
             ranks: dict[int, list[int]] | None) -> Iterator[pa.RecordBatch]:
        spec = self.spec
        ordv = check_events(table, key, spec.order_col)
        ids = table.column(ID)
        if pc.count_distinct(ids).as_py() != len(ids):
            raise InputError(f"the id column has duplicate ids in key {key!r}; ids must be "
                             "unique (omit id_col to use row numbers)")
        events = EventBatch(table.select([ID, TS, TYPE, *spec.attr_cols]), spec.time)
        rt = spec.queries.start(**spec.options)
        rt.placed = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            rt.push(events)
            rt.close()
        placed = rt.placed if ranks is None else relabel(spec, key, rt.placed, ranks)
        outs, set_pos, seqs = placed_rows(spec, placed, lambda g: int(ordv[g]))
        for i, out in enumerate(outs):
            if not out.n:
                continue
            batch = out.flush()
            cols = dict(zip(batch.schema.names, batch.columns, strict=True))
            if SEQ in cols:
                cols[SEQ] = pa.array(seqs[i], pa.int64())
                cols[SET_POS] = pa.array(set_pos[i], pa.int64())
            n = batch.num_rows
            yield pa.RecordBatch.from_arrays(
                [cols[f.name] if f.name in cols else pa.nulls(n, f.type)
                 for f in spec.schema], schema=spec.schema)


def relabel(spec: GroupSpec, key: tuple[Any, ...], placed: list[Any],
            ranks: dict[int, list[int]]) -> list[Any]:
    """A keyed group's output entries with every derived event's label ``P#j`` (its number
    among P's matches of this key) replaced by ``P#k`` (among all of P's matches):
    ``ranks[p]`` holds the global numbers of producer ``p``'s matches of this key, ascending,
    which is P's order restricted to the key (:func:`kleene.spark.batch.match_group`)."""
    names = [q.name for q in spec.queries.queries]
    local = {n: i for i, n in enumerate(names)}
    made: dict[int, int] = {}
    for _ts, _g, _d, place, _m in placed:
        made[place] = made.get(place, 0) + 1
    producers = {local[v.type] for q in spec.queries.queries
                 for v in q.analyzed.variables.values() if v.type in local}
    for p in producers:
        if made.get(p, 0) != len(ranks.get(p, ())):
            raise EngineError(f"nested group, key {key!r}: {names[p]!r} made {made.get(p, 0)} "
                              f"matches here but {len(ranks.get(p, ()))} alone (internal)")
    out = []
    for ts, g, derived, place, m in placed:
        q = spec.queries.queries[place].analyzed
        reads = {v: q.variables[v].type for v in m.bindings
                 if v in q.variables and q.variables[v].type in local}
        if reads:
            bindings = dict(m.bindings)
            for v, p in reads.items():
                assert p is not None
                ks = ranks.get(local[p], [])

                def glob(label: Any, p: str = p, ks: list[int] = ks) -> Any:
                    if isinstance(label, str) and label.startswith(p + "#") and \
                            label[len(p) + 1:].isdigit():
                        return f"{p}#{ks[int(label[len(p) + 1:]) - 1]}"
                    return label  # an input event of type P

                b = bindings[v]
                bindings[v] = tuple(glob(x) for x in b) if isinstance(b, tuple) else glob(b)
            m = replace(m, bindings=bindings)
        out.append((ts, g, derived, place, m))
    return out


class Positions:
    """A streaming nested group's map from the set runtime's positions to the input's
    positions (``__ord``): a match released in a later micro-batch (a consumer waiting on a
    trailing NOT) is still ordered by its completing input event. Pruned to two of the group's
    largest windows (as the set runtime prunes its consumers' ids); kept whole when a query
    of the group has no time window."""

    __slots__ = ("gpos", "ord", "ts", "window")

    def __init__(self, window: int | None) -> None:
        self.window = window
        self.gpos = np.zeros(0, dtype=np.int64)
        self.ord = np.zeros(0, dtype=np.int64)
        self.ts = np.zeros(0, dtype=np.int64)

    def add(self, gpos0: int, ords: Any, ts: Any) -> None:
        n = len(ords)
        self.gpos = np.concatenate([self.gpos, gpos0 + np.arange(n, dtype=np.int64)])
        self.ord = np.concatenate([self.ord, np.asarray(ords, dtype=np.int64)])
        self.ts = np.concatenate([self.ts, np.asarray(ts, dtype=np.int64)])

    def ord_of(self, g: int) -> int:
        """The input position of the set runtime's position ``g`` (-1: none)."""
        i = int(np.searchsorted(self.gpos, g))
        return int(self.ord[i]) if i < len(self.gpos) and self.gpos[i] == g else -1

    def prune(self, now_us: int) -> None:
        if self.window is None or len(self.gpos) < 4096:
            return
        keep = self.ts >= now_us - 2 * self.window - 1
        self.gpos, self.ord, self.ts = self.gpos[keep], self.ord[keep], self.ts[keep]

    def dump(self, snapshot: bytes) -> bytes:
        """The set runtime's ``snapshot`` and these positions, as one state value."""
        import pickle

        return pickle.dumps((snapshot, self.gpos.tobytes(), self.ord.tobytes(),
                             self.ts.tobytes()), protocol=5)

    def load(self, blob: bytes) -> bytes:
        """Read :meth:`dump`'s value into these positions; returns the runtime's snapshot."""
        from ..runtime.engine import _safe_loads

        snap, g, o, t = _safe_loads(blob)
        self.gpos = np.frombuffer(g, dtype=np.int64).copy()
        self.ord = np.frombuffer(o, dtype=np.int64).copy()
        self.ts = np.frombuffer(t, dtype=np.int64).copy()
        return bytes(snap)


def group_window(spec: GroupSpec) -> int | None:
    """The largest time window of the group's queries (None: one has none, or counts)."""
    out = 0
    for q in spec.queries.queries:
        w = q.analyzed.within
        if w is None or w.is_count:
            return None
        out = max(out, w.microseconds)
    return out


def placed_rows(spec: GroupSpec, placed: list[Any], ord_of: Any
                ) -> tuple[list[_Out], list[list[int]], list[list[int]]]:
    """The group's output entries (``QuerySetRuntime.placed``) as one :class:`_Out` per
    query, with each row's ``__set_pos`` and ``__seq`` (see the module docstring);
    ``ord_of(g)`` gives the input position of the set runtime's position ``g``."""
    outs = [_Out(s) for s in spec.specs]
    set_pos: list[list[int]] = [[] for _ in outs]
    seqs: list[list[int]] = [[] for _ in outs]
    for seq, (_ts, g, derived, place, m) in enumerate(placed):
        outs[place].add(as_text(m) if spec.text_ids else m, ord_of(g) if g >= 0 else -1)
        set_pos[place].append(spec.n_set + spec.places[derived[0]] if derived
                              else spec.places[place])
        seqs[place].append(seq)
    return outs, set_pos, seqs


def group_spec(qs: Any, places: tuple[int, ...], specs: list[TaskSpec], *,
               attr_cols: tuple[str, ...], time: TimeInfo, order_col: str,
               options: dict[str, Any], keys: tuple[str, ...] = ()) -> GroupSpec:
    """The task spec of the group at ``places`` of ``qs``; its set is checked here, on the
    driver (a producer the shared network does not evaluate is a one-line error now)."""
    from ..queryset import QuerySet

    group = QuerySet(tuple(qs.queries[p] for p in places), qs.plan, dict(qs.options),
                     qs.dialect, dict(qs.udfs))
    group.start(**options)  # raises the set's validation errors before the job
    text_ids = specs[0].output in ("map", "columns")
    if text_ids:
        specs = [replace(s, id_type=pa.string()) for s in specs]
    internal = specs[0].include_internal or specs[0].output in ("json", "csv")
    schemas = [output_schema(s) for s in specs]
    schema = union_schema(schemas, [qs.queries[p].name for p in places])
    if internal and END_US in schema.names:
        schema = schema.append(pa.field(SET_POS, pa.int64()))
    return GroupSpec(group, places, len(qs.queries), tuple(specs), schema, attr_cols, time,
                     order_col, options, text_ids, keys)


__all__ = ["RANK", "RANK_OF", "SET_POS", "GroupRunner", "GroupSpec", "Positions", "as_text", "group_spec",
           "group_window", "nested_groups", "placed_rows", "relabel", "union_schema"]
