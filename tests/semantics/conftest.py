"""The conformance suite runs every case on every registered backend (kleene.backends.BACKENDS).

A new engine joins every case by being registered there — no case is edited. Backends whose
module cannot be imported yet are left out of the parametrization, and
``test_every_registered_backend_importable`` (test_registry.py) fails loudly for them instead.
Spark backends carry the ``spark`` marker.

A backend that declares a batch function (the Spark ones: a job per call costs a second or
more) is served by a :class:`~kleene.testing.timeline.BatchedBackend`: the first test that asks
for it evaluates, in ONE batch call, every conformance :class:`Case` the session is about to
run on it (the ``Case`` parameters of the collected test items); each test then gets its own
pair's result. A call that was not prepared (a test calling ``run`` with its own stream) is a
real per-call evaluation, counted and listed in the terminal summary.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from kleene.backends import BACKENDS, BackendFn
from kleene.testing.sets import SetBackend, set_backends
from kleene.testing.timeline import (
    BatchedBackend,
    Case,
    PlanBackend,
    PlanDoesNotApply,
    importable_backends,
    plan_backends,
)

_BATCHED: dict[str, BatchedBackend] = {}
_SECONDS: dict[str, float] = {}
_PLANS: dict[str, PlanBackend | SetBackend] = {}


def backend_params(*, include_oracle: bool = True) -> list[Any]:
    """``pytest.param`` per importable backend, marked ``spark`` when it needs Spark, then one
    per registered plan kind of the automaton engine (``automaton/nfa``, ...), then the query-set
    backends of the shared network (``queryset/shared``, ...: kleene.testing.sets)."""
    return [pytest.param(name, id=name,
                         marks=[pytest.mark.spark] if BACKENDS[name].needs_spark else [])
            for name in importable_backends() if include_oracle or name != "oracle"] + [
        pytest.param(name, id=name) for name in plan_backends() + set_backends()]


def plan_backend(name: str) -> PlanBackend | SetBackend:
    """The session's :class:`PlanBackend` for ``automaton/<plan>`` or :class:`SetBackend` for
    ``queryset/...`` (each counts what it refused)."""
    if name not in _PLANS:
        _PLANS[name] = (SetBackend(name) if name.startswith("queryset/")
                        else PlanBackend(name.partition("/")[2]))
    return _PLANS[name]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A forced plan that does not support a case's query says so: the test is reported as
    skipped WITH the plan's reason (``-rs`` lists them; the terminal summary counts them)."""
    outcome = yield
    exc = outcome.excinfo
    if exc is not None and isinstance(exc[1], PlanDoesNotApply):
        outcome.force_exception(pytest.skip.Exception(str(exc[1]), _use_item_location=True))


@pytest.fixture(params=backend_params())
def backend_name(request: pytest.FixtureRequest) -> str:
    """The name of a registered, importable backend."""
    name: str = request.param
    return name


@pytest.fixture(scope="session")
def spark_for_backends() -> Iterator[Any]:
    """The local SparkSession the Spark backends run on (shared with tests/spark)."""
    from kleene.spark.backend import local_session

    yield local_session()


def _cases_for(name: str, session: pytest.Session) -> list[Case]:
    """Every Case parameter of the collected items that run on backend ``name``."""
    out = []
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or callspec.params.get("backend_name") != name:
            continue
        out += [v for v in callspec.params.values() if isinstance(v, Case)]
    return out


@pytest.fixture
def backend(backend_name: str, request: pytest.FixtureRequest) -> BackendFn:
    """A registered backend's evaluation function ``(AnalyzedQuery, EventBatch) -> matches``."""
    if "/" in backend_name:
        return plan_backend(backend_name)
    entry = BACKENDS[backend_name]
    batch = entry.load_batch()
    if batch is None:
        return entry.load()
    if entry.needs_spark:
        request.getfixturevalue("spark_for_backends")
    if backend_name not in _BATCHED:
        b = BatchedBackend(backend_name, entry.load(), batch)
        cases = _cases_for(backend_name, request.session)
        t0 = time.perf_counter()
        b.prepare([(c.query, c.stream) for c in cases])
        _SECONDS[backend_name] = time.perf_counter() - t0
        _BATCHED[backend_name] = b
    return _BATCHED[backend_name]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """How each batched backend was served: prepared in one call, hits, per-call misses; and
    per forced plan, the cases it evaluated and the ones it said it does not support."""
    for name, pb in sorted(_PLANS.items()):
        refused = sum(pb.unsupported.values())
        terminalreporter.write_line(
            f"{name}: {pb.evaluated} cases evaluated, {refused} not supported"
            + "".join(f"\n    {n} x {why}" for why, n in sorted(pb.unsupported.items())))
    for name, b in _BATCHED.items():
        terminalreporter.write_line(
            f"batched backend {name}: {b.prepared} pairs in one batch call "
            f"({_SECONDS.get(name, 0.0):.1f} s), {b.hits} served from it, "
            f"{len(b.misses)} per-call evaluations (misses)"
            + (f" {b.misses}" if b.misses else ""))
