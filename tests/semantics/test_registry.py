"""Every registered backend must load; the oracle must be one of them."""

from __future__ import annotations

from typing import Any

import pytest

from kleene.backends import BACKENDS


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_every_registered_backend_importable(name: str) -> None:
    fn = BACKENDS[name].load()  # raises ImportError/AttributeError loudly if missing
    assert callable(fn)


def test_oracle_is_registered() -> None:
    from kleene.testing.oracle import evaluate

    assert BACKENDS["oracle"].load() is evaluate


@pytest.mark.parametrize("name", sorted(n for n, b in BACKENDS.items() if b.batch is not None))
def test_every_declared_batch_function_importable(name: str) -> None:
    assert callable(BACKENDS[name].load_batch())


def test_the_spark_paths_are_registered() -> None:
    for name, target in (("spark", "kleene.spark.backend:evaluate"),
                         ("spark-stream", "kleene.spark.backend:evaluate_stream")):
        entry = BACKENDS[name]
        assert entry.needs_spark and entry.target == target and entry.batch is not None


def test_batched_backend_serves_prepared_pairs_and_counts_misses() -> None:
    from kleene.testing.oracle import evaluate
    from kleene.testing.timeline import BatchedBackend, events, run

    calls: list[int] = []

    def many(pairs: Any) -> list[Any]:
        calls.append(len(pairs))
        return [ValueError("boom") if "C" in str(q.query) else evaluate(q, s) for q, s in pairs]

    b = BatchedBackend("oracle", evaluate, many)
    s = events("a1@1 b1@2")
    b.prepare([("PATTERN SEQ(A a, B b)", s), ("PATTERN SEQ(A a, B b)", s),
               ("PATTERN SEQ(A a, C c)", s), ("PATTERN SEQ(A a, ", s)])
    assert calls == [2]  # one call; the duplicate and the query that does not parse left out
    assert len(run(b, "PATTERN SEQ(A a, B b)", s)) == 1
    with pytest.raises(ValueError, match="boom"):
        run(b, "PATTERN SEQ(A a, C c)", s)
    assert run(b, "PATTERN SEQ(A a, B b)", events("a1@1 b1@3")) and b.misses == [
        "PATTERN SEQ(A a, B b)"]
    assert b.hits == 2 and calls == [2]
