"""Pure UDFs (kleene.udf, issue 15): memoized per distinct argument tuple in a bounded cache,
the same matches as the plain function, calls and cache hits counted (API, CLI, workers)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import kleene
from kleene.cli.main import cli
from kleene.events import EventBatch
from kleene.runtime.parallel import MIN_EVENTS_PER_WORKER
from kleene.udf import PureUdf

QUERY = "PATTERN SEQ(A a, B b) WHERE near(a.x, b.x) WITHIN 100 seconds"


def _events(n: int) -> EventBatch:
    return EventBatch.from_records([{"type": "AB"[i % 2], "ts": i, "x": i % 5, "k": i % 7}
                                    for i in range(n)])


def test_pure_udf_gives_the_same_matches_with_one_call_per_distinct_arguments() -> None:
    seen: list[tuple[int, int]] = []

    def near(x: int, y: int) -> bool:
        seen.append((x, y))
        return abs(x - y) <= 1

    events = _events(60)
    plain = kleene.compile(QUERY, udfs={"near": near}).run(events)
    evaluations = len(seen)
    seen.clear()
    memo = kleene.udf(near, pure=True)
    got = kleene.compile(QUERY, udfs={"near": memo}).run(events)
    assert [m.key() for m in got] == [m.key() for m in plain] and len(plain) > 50
    assert memo.calls == len(seen) == len(set(seen)) <= 25  # x in 0..4: at most 25 pairs
    assert memo.calls + memo.hits == evaluations


def test_the_cache_is_bounded_and_least_recently_used_goes_first() -> None:
    calls: list[int] = []
    f = kleene.udf(pure=True, cache_size=2)(lambda x: calls.append(x) or x * 2)
    assert isinstance(f, PureUdf)
    assert [f(1), f(2), f(1), f(3), f(2), f(1)] == [2, 4, 2, 6, 4, 2]
    # 1 2 (hit 1) 3 evicts 2 -> 2 again evicts 1 -> 1 again
    assert calls == [1, 2, 3, 2, 1] and (f.calls, f.hits) == (5, 1)
    assert len(f._cache) == 2


def test_unhashable_arguments_are_called_every_time() -> None:
    f = kleene.udf(lambda xs: len(xs), pure=True)
    assert f([1, 2]) == 2 and f([1, 2]) == 2 and (f.calls, f.hits) == (2, 0)


def test_udf_without_pure_is_the_function_itself() -> None:
    def g(x: int) -> int:
        return x

    assert kleene.udf(g) is g
    with pytest.raises(TypeError):
        kleene.udf(3, pure=True)  # type: ignore[call-overload]


def test_cli_pure_flag_counts_calls_and_hits_and_workers_add_them_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "myudfs.py").write_text("def near(x, y):\n    return abs(x - y) <= 1\n")
    n = 2 * MIN_EVENTS_PER_WORKER + 500
    csv = tmp_path / "ev.csv"
    csv.write_text("type,ts,x,k\n" + "".join(f"{'AB'[i % 2]},{i},{i % 5},{i % 7}\n"
                                            for i in range(n)))
    monkeypatch.chdir(tmp_path)
    query = ("PATTERN SEQ(A a, B b) WHERE near(a.x, b.x) PARTITION BY k WITHIN 30 seconds")
    lines = {}
    for w in ("1", "2"):
        r = CliRunner().invoke(cli, ["run", query, "-i", str(csv), "--udf", "myudfs:near:pure",
                                     "--workers", w, "--count"])
        assert r.exit_code == 0, r.output
        udf_line = [ln for ln in r.stderr.splitlines() if ln.startswith("udf near")]
        assert len(udf_line) == 1, r.stderr
        lines[w] = udf_line[0]
    # the same number of evaluations; two workers each fill their own cache
    total = [ln.split("of ")[1] for ln in lines.values()]
    assert total[0] == total[1]
    assert "cache hits" in lines["1"]
    r = CliRunner().invoke(cli, ["run", query, "-i", str(csv), "--udf", "myudfs:near:fast"])
    assert r.exit_code != 0 and "unknown flag 'fast'" in r.output


def test_releases_gil_is_declared_without_changing_the_function() -> None:
    from kleene.udf import udf_releases_gil

    def f(x: int) -> int:
        return x + 1

    g = kleene.udf(f, releases_gil=True)
    assert g is not f and g(1) == 2 and g.__name__ == "f"
    assert (udf_releases_gil(g), udf_releases_gil(f)) == (True, None)
    assert udf_releases_gil(kleene.udf(f, pure=True, releases_gil=False)) is False
    assert udf_releases_gil(kleene.udf(f, vectorized=True, releases_gil=True)) is True
    assert udf_releases_gil(kleene.udf(len, releases_gil=False)) is False  # a builtin
    with pytest.raises(TypeError, match="releases_gil is True, False or None"):
        kleene.udf(f, releases_gil="yes")  # type: ignore[call-overload]


def test_cli_gil_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kleene.cli.main import load_udfs
    from kleene.errors import QueryError
    from kleene.udf import udf_releases_gil

    (tmp_path / "gudfs.py").write_text("def near(x, y):\n    return abs(x - y) <= 1\n")
    monkeypatch.chdir(tmp_path)
    got = load_udfs(["a=gudfs:near:releases-gil", "b=gudfs:near:pure:holds-gil",
                     "c=gudfs:near"])
    assert [udf_releases_gil(got[k]) for k in "abc"] == [True, False, None]
    assert isinstance(got["b"], PureUdf)
    with pytest.raises(QueryError, match="contradict"):
        load_udfs(["gudfs:near:releases-gil:holds-gil"])
