"""Feed-and-compare helpers for tests: named events on a drawn timeline, expected matches by name.

An event's name is its id and its type is the name's letters in upper case (``a1`` is an ``A``,
``xy2`` an ``XY``); attributes are given per event name. Two ways to write a stream:

``events("a1@1 b1@2 b2@2 c1@5", b1={"x": 3})``
    compact: ``name@ts`` tokens in input order.

``timeline(diagram, b1={"x": 3})``
    a drawing whose first line starts with ``ts`` and lists the timestamps; every event name below
    sits under its timestamp (the header number its first character is closest to). Events are in
    input order by timestamp, then top line first, then left to right::

        ts   1    2    3
             a1   b1   c1
                  b2

Expected matches are dicts ``{"a": "a1", "b": ["b1", "b2"]}`` or strings ``"a=a1 b=[b1 b2]"``.

Example:
    >>> from kleene.testing.oracle import evaluate
    >>> s = timeline('''
    ...     ts  1   2   3
    ...         a1  b1  b2
    ... ''')
    >>> _ = assert_matches(evaluate, "PATTERN SEQ(A a, B b)", s, ["a=a1 b=b1", "a=a1 b=b2"])
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..events import EventBatch, Match, TimeInfo
from ..frozen import dataclass
from ..semantic.analyzed import AnalyzedQuery

if TYPE_CHECKING:
    from ..backends import BatchFn

Backend = Callable[[AnalyzedQuery, EventBatch], list[Match]]
Expected = Mapping[str, "str | Sequence[str]"] | str

_NAME = re.compile(r"[A-Za-z_]+\d*[A-Za-z_\d]*")


def type_of(name: str) -> str:
    """The type an event name stands for: its leading letters in upper case (``b12`` -> ``B``)."""
    m = re.match(r"[A-Za-z_]+", name)
    if m is None:
        raise InputError(f"event name {name!r} must start with letters (its type)")
    return m.group(0).upper()


def _batch(items: Sequence[tuple[str, float]], attrs: Mapping[str, Mapping[str, Any]],
           time: TimeInfo | None) -> EventBatch:
    unknown = set(attrs) - {n for n, _ in items}
    if unknown:
        raise InputError(f"attributes given for events not in the timeline: {sorted(unknown)}")
    seen: set[str] = set()
    records = []
    for name, ts in items:
        if name in seen:
            raise InputError(f"event {name!r} appears twice in the timeline")
        seen.add(name)
        extra = dict(attrs.get(name, {}))
        rec: dict[str, Any] = {"id": name, "type": extra.pop("type", type_of(name)), "ts": ts}
        rec.update(extra)
        records.append(rec)
    return EventBatch.from_records(records, time=time)


def events(spec: str, *, time: TimeInfo | None = None, **attrs: Mapping[str, Any]) -> EventBatch:
    """A batch from ``name@ts`` tokens in input order; ``attrs`` maps event names to attributes.

    Example:
        >>> b = events("a1@1 b1@1.5", b1={"x": 3})
        >>> b.ids.to_pylist(), b.ts.tolist(), b.column("x").to_pylist()
        (['a1', 'b1'], [1000000, 1500000], [None, 3])
    """
    items = []
    for tok in spec.split():
        name, sep, ts = tok.partition("@")
        if not sep or not _NAME.fullmatch(name):
            raise InputError(f"timeline token {tok!r} is not name@ts (e.g. a1@3)")
        items.append((name, float(ts) if "." in ts else int(ts)))
    return _batch(items, attrs, time)


def timeline(diagram: str, *, time: TimeInfo | None = None,
             **attrs: Mapping[str, Any]) -> EventBatch:
    """A batch from a drawn timeline (see the module docstring)."""
    lines = [ln for ln in diagram.splitlines() if ln.strip()]
    if not lines or not lines[0].lstrip().startswith("ts"):
        raise InputError("a timeline's first line must start with 'ts' and list timestamps")
    header = lines[0]
    start = header.index("ts") + 2
    stamps = [(m.start() + start, m.group(0)) for m in re.finditer(r"\S+", header[start:])]
    if not stamps:
        raise InputError("the timeline header lists no timestamps")
    cols = [(col, float(t) if "." in t else int(t)) for col, t in stamps]
    placed: list[tuple[float, int, int, str]] = []
    for row, line in enumerate(lines[1:]):
        for m in re.finditer(r"\S+", line):
            name = m.group(0)
            if name in (".", "-", "|"):
                continue
            if not _NAME.fullmatch(name):
                raise InputError(f"timeline row {row + 1}: {name!r} is not an event name")
            ts = min(cols, key=lambda c: abs(c[0] - m.start()))[1]
            placed.append((ts, row, m.start(), name))
    placed.sort(key=lambda p: (p[0], p[1], p[2]))
    return _batch([(n, ts) for ts, _, _, n in placed], attrs, time)


def parse_expected(m: Expected) -> dict[str, str | tuple[str, ...]]:
    """Normalise an expected match: ``"a=a1 b=[b1 b2] c=[]"`` or a dict -> bindings by name."""
    if isinstance(m, str):
        out: dict[str, str | tuple[str, ...]] = {}
        for var, lst, single in re.findall(r"(\w+)\s*=\s*(?:\[([^\]]*)\]|(\S+))", m):
            out[var] = tuple(lst.split()) if single == "" else single
        if not out and m.strip():
            raise ValueError(f"cannot read expected match {m!r}; write e.g. 'a=a1 b=[b1 b2]'")
        return out
    return {k: (v if isinstance(v, str) else tuple(v)) for k, v in m.items()}


def bindings_of(matches: Sequence[Match]) -> list[dict[str, Any]]:
    """The bindings of each match, as plain dicts (for comparison and readable diffs)."""
    return [dict(m.bindings) for m in matches]


def importable_backends() -> list[str]:
    """Names of the registered backends (kleene.backends.BACKENDS) whose module imports now.

    The conformance suite runs every case on each of them; a registered backend that cannot be
    imported is reported by its own failing test instead of silently skipping cases.
    """
    from ..backends import BACKENDS

    names = []
    for name, backend in BACKENDS.items():
        try:
            backend.load()
        except (ImportError, AttributeError):
            continue
        names.append(name)
    return names


class PlanDoesNotApply(Exception):
    """A forced plan does not support a query (the plan's own stated reason)."""


class PlanBackend:
    """The automaton engine with one plan kind forced (``automaton/<plan>``): the conformance
    suite and the differential test run over every (backend, plan) pair. A query the plan does
    not support raises :class:`PlanDoesNotApply` with the plan's reason (the suite records it),
    never a silent fallback to another plan."""

    def __init__(self, plan: str) -> None:
        self.plan = plan
        self.unsupported: dict[str, int] = {}
        self.evaluated = 0

    def reason(self, aq: AnalyzedQuery) -> str | None:
        """Why the plan does not support ``aq`` (None: it does)."""
        from ..plans import get_plan_kind

        return get_plan_kind(self.plan).supports(aq)

    def __call__(self, aq: AnalyzedQuery, events: EventBatch, **options: Any) -> list[Match]:
        from ..plans import evaluate

        why = self.reason(aq)
        if why is not None:
            self.unsupported[why] = self.unsupported.get(why, 0) + 1
            raise PlanDoesNotApply(f"plan {self.plan!r} does not apply: {why}")
        self.evaluated += 1
        return evaluate(aq, events, plan=self.plan, **options)


def plan_backends() -> list[str]:
    """``automaton/<plan>`` for every registered plan kind (kleene.plans.REGISTRY)."""
    from ..plans import plan_names

    return [f"automaton/{p}" for p in plan_names()]


class BatchedBackend:
    """A backend served from one batch evaluation of the pairs a suite is about to run.

    For backends whose every call is expensive (a Spark job) and that declare a batch function
    (``kleene.backends.Backend.batch``): :meth:`prepare` evaluates every known
    ``(query, stream)`` pair at once; a call then returns the cached matches (or raises the
    cached error) for its pair, keyed by the canonical query text and the stream's content.
    A pair that was not prepared is a *miss*: evaluated by a real call of ``fn`` and counted
    (``misses`` names them), never skipped.

    Example:
        >>> from kleene.testing.oracle import evaluate
        >>> def many(pairs):
        ...     return [evaluate(q, s) for q, s in pairs]
        >>> b = BatchedBackend("oracle", evaluate, many)
        >>> s = events("a1@1 b1@2")
        >>> b.prepare([("PATTERN SEQ(A a, B b)", s)])
        >>> bindings_of(run(b, "PATTERN SEQ(A a, B b)", s)), b.hits, len(b.misses)
        ([{'a': 'a1', 'b': 'b1'}], 1, 0)
    """

    def __init__(self, name: str, fn: Backend, batch: BatchFn) -> None:
        self.name = name
        self.fn = fn
        self.batch = batch
        self.cache: dict[tuple[str, ...], list[Match] | Exception] = {}
        self.prepared = 0
        self.hits = 0
        self.misses: list[str] = []
        """The query text of every call that was not prepared (a real per-call evaluation)."""

    @staticmethod
    def key(analyzed: AnalyzedQuery, stream: EventBatch) -> tuple[str, ...]:
        """The cache key: canonical query text, name, UDF names, and the stream's content."""
        from ..lang.printer import to_text

        t = stream.table
        return (to_text(analyzed.query), analyzed.name, repr(sorted(analyzed.udfs)),
                str(t.schema), repr(t.to_pydict()), repr(stream.time))

    def prepare(self, pairs: Sequence[tuple[str | AnalyzedQuery, EventBatch]]) -> None:
        """Evaluate every pair not cached yet with ONE call of the batch function.

        A query that does not analyze is left out: the test's own call raises that error
        before reaching the backend.
        """
        from ..api import analyze
        from ..errors import KleeneError

        todo: dict[tuple[str, ...], tuple[AnalyzedQuery, EventBatch]] = {}
        for query, stream in pairs:
            try:
                aq = analyze(query) if isinstance(query, str) else query
            except KleeneError:
                continue
            k = self.key(aq, stream)
            if k not in self.cache:
                todo.setdefault(k, (aq, stream))
        if not todo:
            return
        results = self.batch(list(todo.values()))
        if len(results) != len(todo):
            raise AssertionError(f"{self.name}: the batch function returned {len(results)} "
                                 f"results for {len(todo)} pairs")
        self.cache.update(zip(todo, results, strict=True))
        self.prepared += len(todo)

    def __call__(self, analyzed: AnalyzedQuery, stream: EventBatch) -> list[Match]:
        got = self.cache.get(self.key(analyzed, stream))
        if got is None:
            from ..lang.printer import to_text

            self.misses.append(to_text(analyzed.query))
            return self.fn(analyzed, stream)
        self.hits += 1
        if isinstance(got, Exception):
            raise got
        return list(got)


def run(backend: Backend, query: str | AnalyzedQuery, stream: EventBatch) -> list[Match]:
    """Analyze ``query`` (text in the canonical language) and evaluate it with ``backend``."""
    from ..api import analyze

    aq = analyze(query) if isinstance(query, str) else query
    return backend(aq, stream)


def assert_matches(backend: Backend, query: str | AnalyzedQuery, stream: EventBatch,
                   expected: Sequence[Expected], *,
                   values: Sequence[Mapping[str, Any]] | None = None) -> list[Match]:
    """Assert that ``backend`` finds exactly ``expected`` (bindings by event name), in order.

    ``values`` optionally gives the RETURN values of each match, in the same order.
    """
    got = run(backend, query, stream)
    want = [parse_expected(e) for e in expected]
    have = bindings_of(got)
    assert have == want, (
        "matches differ\n  expected: " + _show(want) + "\n  got:      " + _show(have))
    if values is not None:
        assert [dict(m.values) for m in got] == [dict(v) for v in values], (
            f"RETURN values differ\n  expected: {list(values)}\n"
            f"  got:      {[dict(m.values) for m in got]}")
    return got


@dataclass(frozen=True)
class Case:
    """One conformance case: a query, a drawn stream and the matches written by hand."""

    name: str
    query: str
    stream: EventBatch
    expected: tuple[Expected, ...]
    values: tuple[Mapping[str, Any], ...] | None = None

    def check(self, backend: Backend) -> list[Match]:
        """Run the case on ``backend`` and assert the matches (and RETURN values)."""
        return assert_matches(backend, self.query, self.stream, self.expected,
                              values=self.values)


def case(name: str, query: str, diagram: str, expected: Sequence[Expected], *,
         values: Sequence[Mapping[str, Any]] | None = None,
         **attrs: Mapping[str, Any]) -> Case:
    """Build a :class:`Case`; ``diagram`` is a drawn timeline or ``name@ts`` tokens."""
    stream = (timeline(diagram, **attrs) if diagram.strip().startswith("ts")  # type: ignore[arg-type]
              else events(diagram, **attrs))  # type: ignore[arg-type]
    return Case(name, query, stream, tuple(expected),
                None if values is None else tuple(values))


def _show(ms: Sequence[Mapping[str, Any]]) -> str:
    def one(m: Mapping[str, Any]) -> str:
        return " ".join(f"{k}=[{' '.join(map(str, v))}]" if isinstance(v, tuple) else f"{k}={v}"
                        for k, v in m.items())
    return "[" + ", ".join(repr(one(m)) for m in ms) + "]" if ms else "{}"


__all__ = ["Backend", "BatchedBackend", "Case", "Expected", "assert_matches", "bindings_of", "case", "events",
           "importable_backends", "parse_expected", "PlanBackend", "PlanDoesNotApply",
           "plan_backends", "run", "timeline", "type_of"]
