"""Vectorized UDFs (kleene.udf(vectorized=True), issue 15 item 4): a function over Arrow arrays
runs once per batch in the vectorize step for a one-variable condition, on the rows the cheaper
conjuncts left; elsewhere it runs on one-row arrays. The matches are always those of the same
function applied row by row (and the oracle's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner

import kleene
from kleene.cli.main import cli
from kleene.errors import EngineError
from kleene.events import EventBatch
from kleene.runtime.parallel import MIN_EVENTS_PER_WORKER
from kleene.testing.oracle import evaluate as oracle
from kleene.udf import VectorizedUdf


def _events(n: int, *, nulls: bool = False) -> EventBatch:
    return EventBatch.from_records(
        [{"type": "AB"[i % 2], "ts": i, "x": None if nulls and i % 7 == 3 else i % 5,
          "k": i % 3} for i in range(n)])


def _keys(ms: list[Any]) -> list[Any]:
    return [(dict(m.bindings), m.start, m.end) for m in ms]


def _row_score(x: Any) -> Any:
    return None if x is None else x >= 3


def _vec_score(x: pa.Array) -> pa.Array:
    return pc.greater_equal(x, 3)


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "with-nulls"])
def test_one_variable_condition_runs_once_per_batch_with_the_row_functions_matches(
        nulls: bool) -> None:
    query = "PATTERN SEQ(A a, B b) WHERE score(b.x) AND a.k = b.k WITHIN 6 seconds"
    events = _events(200, nulls=nulls)
    rowwise = kleene.compile(query, udfs={"score": _row_score})
    want = _keys(rowwise.run(events))
    assert want == _keys(oracle(rowwise.analyzed, events)) and len(want) > 20
    vec = kleene.udf(_vec_score, vectorized=True)
    assert isinstance(vec, VectorizedUdf)
    got = _keys(kleene.compile(query, udfs={"score": vec}).run(events))
    assert got == want
    assert vec.calls == 1  # one batch, one call
    assert vec.rows == 100  # the B rows only, not the whole batch


def test_cheaper_conjuncts_go_first_and_the_udf_sees_only_surviving_rows() -> None:
    seen: list[int] = []

    def score(x: pa.Array) -> pa.Array:
        seen.append(len(x))
        return pc.greater_equal(x, 3)

    vec = kleene.udf(score, vectorized=True)
    query = "PATTERN SEQ(A a, B b) WHERE score(b.x) AND b.k = 1 WITHIN 6 seconds"
    events = _events(300)
    got = _keys(kleene.compile(query, udfs={"score": vec}).run(events))
    want = _keys(kleene.compile(query, udfs={"score": _row_score}).run(events))
    assert got == want and len(want) > 10
    b_with_k1 = sum(1 for i in range(300) if i % 2 == 1 and i % 3 == 1)
    assert seen == [b_with_k1]  # written first, evaluated last, on the k = 1 rows only


def test_two_variable_condition_calls_it_per_row_with_one_row_arrays() -> None:
    def near(x: pa.Array, y: pa.Array) -> pa.Array:
        assert isinstance(x, pa.Array) and isinstance(y, pa.Array)
        return pc.less_equal(pc.abs(pc.subtract(x, y)), 1)

    vec = kleene.udf(near, vectorized=True)
    query = "PATTERN SEQ(A a, B b) WHERE near(a.x, b.x) WITHIN 4 seconds"
    events = _events(60)
    got = _keys(kleene.compile(query, udfs={"near": vec}).run(events))
    plain = kleene.compile(query, udfs={"near": lambda x, y: abs(x - y) <= 1})
    assert got == _keys(plain.run(events)) == _keys(oracle(plain.analyzed, events))
    assert vec.calls == vec.rows > 0  # one row per call


def test_a_result_of_the_wrong_length_is_a_one_line_error() -> None:
    vec = kleene.udf(lambda x: pa.array([True]), vectorized=True)
    q = kleene.compile("PATTERN SEQ(A a, B b) WHERE bad(b.x)", udfs={"bad": vec})
    with pytest.raises(EngineError, match=r"returned 1 values for 30 rows \(it must be "
                                          r"elementwise\)"):
        q.run(_events(60))
    with pytest.raises(ValueError, match="do not combine"):
        kleene.udf(_vec_score, vectorized=True, pure=True)


def test_numpy_and_list_results_are_accepted() -> None:
    query = "PATTERN SEQ(A a, B b) WHERE score(b.x) WITHIN 3 seconds"
    events = _events(40)
    want = _keys(kleene.compile(query, udfs={"score": _row_score}).run(events))
    for fn in (lambda x: (x.to_numpy(zero_copy_only=False) >= 3),
               lambda x: [v is not None and v >= 3 for v in x.to_pylist()]):
        got = kleene.compile(query, udfs={"score": kleene.udf(fn, vectorized=True)}).run(events)
        assert _keys(got) == want


def test_cli_vectorized_flag_counts_calls_and_rows_and_workers_add_them_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "vudfs.py").write_text(
        "import pyarrow.compute as pc\n\ndef big(x):\n    return pc.greater_equal(x, 3)\n")
    n = 2 * MIN_EVENTS_PER_WORKER + 500
    csv = tmp_path / "ev.csv"
    csv.write_text("type,ts,x,k\n" + "".join(f"{'AB'[i % 2]},{i},{i % 5},{i % 7}\n"
                                            for i in range(n)))
    monkeypatch.chdir(tmp_path)
    query = "PATTERN SEQ(A a, B b) WHERE big(b.x) PARTITION BY k WITHIN 30 seconds"
    out = {}
    for w in ("1", "2"):
        r = CliRunner().invoke(cli, ["run", query, "-i", str(csv), "--udf", "vudfs:big:vectorized",
                                     "--workers", w, "--count"])
        assert r.exit_code == 0, r.output
        line = [ln for ln in r.stderr.splitlines() if ln.startswith("udf big")]
        assert len(line) == 1 and "vectorized" in line[0], r.stderr
        out[w] = (line[0].split("vectorized, ")[1], r.stdout)
    b_rows = sum(1 for i in range(n) if i % 2 == 1)
    assert out["1"][0] == out["2"][0] == f"{b_rows:,} rows)"
    assert out["1"][1] == out["2"][1]
    r = CliRunner().invoke(cli, ["run", query, "-i", str(csv), "--udf", "vudfs:big:fast"])
    assert r.exit_code == 1 and ":vectorized" in r.output
