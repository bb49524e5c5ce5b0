"""Differential test: every backend equals the oracle, match for match and in order.

Random canonical queries from a grammar of every feature (kleene.testing.strategies) × small
random streams with timestamp ties, two partitions, NULLs and every event type. One test per
feature group so a failure names the feature; a fixed seed (derandomize) keeps CI reproducible.

Backends with a batch function (the Spark ones: a job per call costs seconds) are not called per
example: a fixed, derandomized draw of (query, stream) pairs over every feature group is
evaluated in ONE batch call and compared with the oracle pair by pair.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

from kleene.api import analyze
from kleene.backends import BACKENDS
from kleene.events import EventBatch, Match
from kleene.testing.oracle import evaluate as oracle
from kleene.testing.sets import SetBackend, set_backends
from kleene.testing.strategies import FEATURES, describe, queries, streams
from kleene.testing.timeline import (
    PlanBackend,
    PlanDoesNotApply,
    importable_backends,
    plan_backends,
)


def _params(*, batched: bool) -> list[Any]:
    return [pytest.param(n, id=n, marks=[pytest.mark.spark] if BACKENDS[n].needs_spark else [])
            for n in importable_backends()
            if n != "oracle" and (BACKENDS[n].batch is not None) == batched]


OTHERS = _params(batched=False)
BATCHED = _params(batched=True)
EXAMPLES = 100
"""Examples per feature group and in-process backend (10 groups): well under a minute each."""
BATCH_DRAWS: dict[str, tuple[tuple[str, ...], int]] = {
    "spark": (FEATURES, 14),
    "spark-stream": (FEATURES, 14),
}
"""Per batched backend: the feature groups and pairs per group, all in ONE batch call (~140
pairs): Spark batch runs them in one stage, streaming in one streaming query with one
stateful operator (groups by pair and bucket)."""
DEFAULT_DRAWS = (FEATURES, 5)


def _key(ms: list[Match]) -> list[tuple[Any, ...]]:
    return [(m.query, dict(m.bindings), m.start, m.end, dict(m.values)) for m in ms]


@pytest.mark.parametrize("feature", FEATURES)
@pytest.mark.parametrize("name", OTHERS or [pytest.param("none", marks=pytest.mark.skip(
    reason="no backend besides the oracle is importable yet"))])
def test_backend_equals_oracle(name: str, feature: str) -> None:
    fn = BACKENDS[name].load()

    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(query=queries(feature=feature), stream=streams())
    def check(query: str, stream: EventBatch) -> None:
        note(f"query:  {query}")
        note(f"stream: {describe(stream)}")
        aq = analyze(query)
        want = _key(oracle(aq, stream))
        got = _key(fn(aq, stream))
        assert got == want, f"{name} differs from the oracle"

    check()


PLAN_EXAMPLES = 40
"""Examples per feature group and forced plan (the default plan is already covered above)."""


@pytest.mark.parametrize("feature", FEATURES)
@pytest.mark.parametrize("name", plan_backends() + set_backends())
def test_every_plan_equals_oracle(name: str, feature: str) -> None:
    """Each registered plan, forced, and the shared network in a query set (``queryset/...``)
    equal the oracle on every drawn query they support; the ones they do not support are
    counted with the plan's reason."""
    pb: PlanBackend | SetBackend = (SetBackend(name) if name.startswith("queryset/")
                                    else PlanBackend(name.partition("/")[2]))

    @settings(max_examples=PLAN_EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(query=queries(feature=feature), stream=streams())
    def check(query: str, stream: EventBatch) -> None:
        note(f"query:  {query}")
        note(f"stream: {describe(stream)}")
        aq = analyze(query)
        why = pb.reason(aq)
        if why is not None:
            pb.unsupported[why] = pb.unsupported.get(why, 0) + 1
            return
        want = _key(oracle(aq, stream))
        got = _key(pb(aq, stream))
        assert got == want, f"{name} differs from the oracle"

    check()
    if pb.evaluated == 0:
        pytest.skip(f"{name} supports none of the {feature} queries drawn: "
                    + "; ".join(sorted(pb.unsupported)))


def _draw(n: int, features: list[str], *, wild: bool = False,
          derandomize: bool = True) -> list[tuple[str, EventBatch]]:
    """``n`` (query, stream) pairs of the feature groups (with ``wild``, the wild values of
    :func:`streams`); derandomized: the same on every run."""
    pairs: list[tuple[str, EventBatch]] = []
    drawn = [queries(feature=f, wild=wild) for f in features]

    @settings(max_examples=n, derandomize=derandomize, deadline=None, database=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(query=drawn[0] if len(drawn) == 1 else st.one_of(*drawn), stream=streams(wild=wild))
    def collect(query: str, stream: EventBatch) -> None:
        pairs.append((query, stream))

    collect()
    return pairs[:n]


@pytest.mark.parametrize("name", BATCHED or [pytest.param("none", marks=pytest.mark.skip(
    reason="no batched backend is importable"))])
def test_batched_backend_equals_oracle(name: str) -> None:
    entry = BACKENDS[name]
    batch = entry.load_batch()
    assert batch is not None
    if entry.needs_spark:
        from kleene.spark.backend import local_session

        local_session()
    features, per = BATCH_DRAWS.get(name, DEFAULT_DRAWS)
    drawn = [(f, q, s) for f in features for q, s in _draw(per, [f])]
    assert len(drawn) >= max(1, per * len(features) // 2), "the strategies drew too few pairs"
    analyzed = [analyze(q) for _, q, _ in drawn]
    got = batch([(aq, s) for aq, (_, _, s) in zip(analyzed, drawn, strict=True)])
    assert len(got) == len(drawn)
    bad = []
    for aq, (feature, query, stream), result in zip(analyzed, drawn, got, strict=True):
        want = _key(oracle(aq, stream))
        have: Any = result if isinstance(result, Exception) else _key(result)
        if have != want:
            bad.append(f"[{feature}] query:  {query}\n  stream: {describe(stream)}\n"
                       f"  oracle: {want}\n  {name}: {have!r}")
    assert not bad, (f"{name} differs from the oracle on {len(bad)} of {len(drawn)} random "
                     "pairs:\n" + "\n".join(bad))


WILD_CASES = int(os.environ.get("KLEENE_DIFF_CASES", "60"))
"""Random cases of the wild-values test (the long-run mode: ``KLEENE_DIFF_CASES=100000``)."""
WILD_SECONDS = float(os.environ.get("KLEENE_DIFF_SECONDS", "inf"))
"""Long run only: stop drawing new chunks of cases after this many seconds."""
WILD_CHUNK = 2_000
WILD_PER_TARGET = int(os.environ.get("KLEENE_DIFF_PER_TARGET", "0"))
"""Long run only: keep drawing until every target has evaluated this many cases. A drawn query
that no target still short of it supports is discarded before the oracle runs, and targets that
already reached it are not run, so the rare shapes (the union plan's top-level OR, the shared
network's queries) are reached without evaluating millions of others."""
WILD_TARGETS = [t for t in os.environ.get("KLEENE_DIFF_TARGETS", "").split(",") if t]
"""Long run only: evaluate only these targets (e.g. ``automaton/union``), so a long run can be
split over processes."""
WILD_FEATURES = [f for f in os.environ.get("KLEENE_DIFF_FEATURES", "mixed").split(",") if f]
"""Long run only: the feature groups queries are drawn from (one of them per draw)."""
WILD_STREAMS = int(os.environ.get("KLEENE_DIFF_STREAMS", "3"))
"""Long run only: streams drawn per example (drawing one costs about as much as a case)."""
WILD_QUERIES = int(os.environ.get("KLEENE_DIFF_QUERIES", "3"))
"""Long run only: queries drawn per example; each is run on each of the example's streams."""


def _same(x: Any) -> Any:
    """A result with NaN replaced by a marker, so that NaN equals NaN when results compare."""
    if isinstance(x, float) and x != x:
        return "<NaN>"
    if isinstance(x, dict):
        return {k: _same(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return type(x)(_same(v) for v in x)
    return x


BATCH_WILD = 40
"""Wild-value pairs per batched backend in CI (one derandomized batch call each)."""
BATCH_CASES = int(os.environ.get("KLEENE_DIFF_BATCH_CASES", "0"))
"""Long run of a batched backend: random wild-value pairs until this many were compared
(``KLEENE_DIFF_BATCH_CASES=100000``; docs/reliability.md)."""
BATCH_CHUNK = int(os.environ.get("KLEENE_DIFF_BATCH_CHUNK", "3000"))
"""Long run: pairs per batch call (one Spark job or streaming query each)."""


@pytest.mark.parametrize("name", BATCHED or [pytest.param("none", marks=pytest.mark.skip(
    reason="no batched backend is importable"))])
def test_wild_values_batched_backend_equals_oracle(name: str) -> None:
    """The wild values (overflow-prone int64, NULLs, NaN, infinities, strings, booleans,
    lists) through a batched backend: 40 derandomized pairs in one batch call in CI.

    Long run (docs/reliability.md): ``KLEENE_DIFF_BATCH_CASES=100000
    KLEENE_DIFF_REPORT=/tmp/spark.json pytest ... -k 'wild_values_batched and spark-stream'``:
    random (not derandomized) chunks of ``KLEENE_DIFF_BATCH_CHUNK`` pairs, one batch call per
    chunk, until that many pairs were compared (or ``KLEENE_DIFF_SECONDS``), every
    disagreement collected, the report rewritten after each chunk."""
    entry = BACKENDS[name]
    batch = entry.load_batch()
    assert batch is not None
    if entry.needs_spark:
        from kleene.spark.backend import local_session

        local_session()
    long_run = BATCH_CASES > 0
    started = time.perf_counter()
    cases = errors = 0
    bad: list[str] = []
    features = WILD_FEATURES if long_run else ["mixed"]
    while True:
        n = min(BATCH_CHUNK, BATCH_CASES - cases) if long_run else BATCH_WILD
        drawn = _draw(n, features, wild=True, derandomize=not long_run)
        analyzed = [analyze(q) for q, _ in drawn]
        got = batch([(aq, s) for aq, (_, s) in zip(analyzed, drawn, strict=True)])
        assert len(got) == len(drawn)
        for aq, (query, stream), result in zip(analyzed, drawn, got, strict=True):
            try:
                want: Any = _same(_key(oracle(aq, stream)))
            except Exception as exc:  # noqa: BLE001 - the oracle's error is the expected one
                want = f"{type(exc).__name__}: {exc}"
            if isinstance(result, Exception):
                errors += 1
                have: Any = f"{type(result).__name__}: {result}"
            else:
                have = _same(_key(result))
            cases += 1
            if have != want:
                bad.append(f"query:  {query}\n  stream: {describe(stream)}\n"
                           f"  oracle: {want}\n  {name}: {have}")
        path = os.environ.get("KLEENE_DIFF_REPORT")
        if path:
            with open(path, "w") as f:
                json.dump({"backend": name, "cases": cases, "errors (equal on both sides)":
                           errors, "seconds": round(time.perf_counter() - started, 1),
                           "disagreements": len(bad), "first": bad[:30]}, f, indent=1)
        if (not long_run or cases >= BATCH_CASES
                or time.perf_counter() - started >= WILD_SECONDS):
            break
    assert cases >= (BATCH_CASES if long_run and WILD_SECONDS == float("inf") else 1)
    assert not bad, (f"{name} differs from the oracle on {len(bad)} of {cases} wild pairs:\n"
                     + "\n".join(bad[:10]))


def test_wild_values_every_backend_and_plan_equal_oracle() -> None:
    """Overflow-prone int64 values, NULLs, NaN, infinities, strings, booleans and lists (one
    type per column and stream, compared across columns and with literals beyond int64): each
    drawn (query, stream) is evaluated once by the oracle and by every in-process backend and
    every forced plan.

    Long run (docs/reliability.md): ``KLEENE_DIFF_CASES=100000 KLEENE_DIFF_SECONDS=3600
    KLEENE_DIFF_REPORT=/tmp/diff.json``: random (not derandomized) chunks of 2,000 cases until
    either limit, every disagreement collected (no shrinking), the report rewritten after each
    chunk, the test failing at the end if there was one."""
    targets: dict[str, Any] = {n: BACKENDS[n].load() for n in importable_backends()
                               if n != "oracle" and BACKENDS[n].batch is None}
    targets.update({n: PlanBackend(n.partition("/")[2]) for n in plan_backends()})
    targets.update({n: SetBackend(n) for n in set_backends()})
    if WILD_TARGETS:
        assert set(WILD_TARGETS) <= set(targets), f"KLEENE_DIFF_TARGETS: known {sorted(targets)}"
        targets = {n: targets[n] for n in WILD_TARGETS}
    evaluated = dict.fromkeys(targets, 0)
    unsupported = dict.fromkeys(targets, 0)
    bad: list[str] = []
    started = time.perf_counter()
    long_run = "KLEENE_DIFF_CASES" in os.environ or WILD_PER_TARGET > 0
    cases = 0
    discarded = 0

    def needed() -> list[str]:
        return [n for n, k in evaluated.items() if k < WILD_PER_TARGET]

    def supporting(aq: Any) -> list[str]:
        """The targets that support a drawn query (fixed by the query alone, so that a long
        run's draws never depend on how far it got: Hypothesis replays draws)."""
        return [n for n in targets
                if not hasattr(targets[n], "reason") or targets[n].reason(aq) is None]

    def select(aq: Any) -> list[str]:
        """The targets to run a drawn query on: every one, or (per-target mode) those still
        short of their count that support it."""
        if not WILD_PER_TARGET:
            return list(targets)
        return [n for n in supporting(aq) if evaluated[n] < WILD_PER_TARGET]

    def case(query: str, aq: Any, names: list[str], stream: EventBatch) -> None:
        nonlocal cases
        want = _same(_key(oracle(aq, stream)))
        cases += 1
        failed = []
        for name in names:
            fn = targets[name]
            try:
                got: Any = _same(_key(fn(aq, stream)))
            except PlanDoesNotApply:
                unsupported[name] += 1
                continue
            except Exception as exc:  # noqa: BLE001 - an engine error is a disagreement too
                got = f"{type(exc).__name__}: {exc}"
            evaluated[name] += 1
            if got != want:
                failed.append(name)
                bad.append(f"{name}\n  query:  {query}\n  stream: {describe(stream)}\n"
                           f"  oracle: {want}\n  {name}: {got}")
        if not long_run:
            assert not failed, f"{failed} differ from the oracle"

    def check(query: str, stream: EventBatch) -> None:
        note(f"query:  {query}")
        note(f"stream: {describe(stream)}")
        aq = analyze(query)
        case(query, aq, select(aq), stream)

    def check_long(data: st.DataObject) -> None:
        """Long run: ``WILD_QUERIES`` queries first (one a run's targets do not support is
        discarded before any stream is drawn), then ``WILD_STREAMS`` streams, and every
        (query, stream) pair is a case (a draw costs about as much as an evaluation)."""
        nonlocal discarded
        drawn_queries = []
        for _ in range(WILD_QUERIES):
            query = data.draw(drawn)
            aq = analyze(query)
            if WILD_PER_TARGET and not supporting(aq):
                discarded += 1
                continue
            drawn_queries.append((query, aq))
        if not drawn_queries:
            return
        for _ in range(WILD_STREAMS):
            stream = data.draw(streams(wild=True))
            for query, aq in drawn_queries:
                names = select(aq)
                if names:
                    case(query, aq, names, stream)

    def report() -> None:
        path = os.environ.get("KLEENE_DIFF_REPORT")
        if path:
            with open(path, "w") as f:
                json.dump({"cases": cases, "discarded draws": discarded,
                           "per target": WILD_PER_TARGET or None,
                           "seconds": round(time.perf_counter() - started, 1),
                           "evaluated": evaluated, "unsupported": unsupported,
                           "disagreements": len(bad), "first": bad[:30]}, f, indent=1)

    drawn = st.one_of(*(queries(feature=f, wild=True) for f in WILD_FEATURES))
    if not long_run:
        settings(max_examples=WILD_CASES, derandomize=True, deadline=None, database=None,
                 suppress_health_check=list(HealthCheck))(given(
                     query=queries(feature="mixed", wild=True), stream=streams(wild=True))(
                     check))()

    def more() -> bool:
        if time.perf_counter() - started >= WILD_SECONDS:
            return False
        return bool(needed()) if WILD_PER_TARGET else cases < WILD_CASES

    while long_run and more():
        chunk = WILD_CHUNK // 10 if WILD_PER_TARGET else max(1, min(
            WILD_CHUNK, (WILD_CASES - cases) // (WILD_STREAMS * WILD_QUERIES)))
        settings(max_examples=chunk, derandomize=False,
                 deadline=None, database=None, phases=[Phase.generate],
                 suppress_health_check=list(HealthCheck))(given(data=st.data())(check_long))()
        report()
    report()
    assert not bad, f"{len(bad)} disagreements with the oracle:\n" + "\n".join(bad[:10])
    assert max(evaluated.values()) > 0
