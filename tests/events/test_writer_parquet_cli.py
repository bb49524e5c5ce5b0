"""``kleene run ... --output x.parquet``: the matches the runs and chain plans hand the writer
as columns and blocks (no Match objects) make the file the NFA's Match objects make, byte for
byte, whole and with --stream; the demo's file holds the golden table."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from kleene.cli.main import cli
from kleene.events.matchtable import MatchColumns

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "writers"

RUNS = ("PATTERN SEQ(S a, S+ b[], S c) WHERE b[1].price > a.price "
        "AND b[i].price >= b[i-1].price AND c.price < a.price PARTITION BY sym "
        "WITHIN 9 seconds USING strict-contiguity")
"""The stock query's shape: the chooser takes the runs plan (column parts)."""

CHAIN = ("PATTERN SEQ(S a, S+ b[], S c) WHERE c.price > a.price PARTITION BY sym "
         "WITHIN 9 seconds USING skip-till-any-match")
"""The Kleene explosion: ``--plan chain`` hands over KleeneBlocks."""

SEQ3 = ("PATTERN SEQ(S a, S b, S c) PARTITION BY sym WITHIN 30 seconds "
        "USING skip-till-any-match")
"""``--plan chain`` hands over SeqBlocks."""


def _no_match_objects(self: object) -> list[object]:
    raise AssertionError("a column part was read as Match objects")


def _input(tmp_path: Path, ids: str) -> Path:
    rng = random.Random(8)
    rows = ["id,ts,sym,price"]
    for i in range(400):
        rid = f"r{i}" if ids == "str" else str(1000 + i)
        rows.append(f"{rid},{i // 2}.{rng.choice(['0', '25', '5'])},{rng.choice('xy')},"
                    f"{rng.randint(1, 9)}")
    src = tmp_path / f"in-{ids}.csv"
    src.write_text("\n".join(rows) + "\n")
    return src


def _run(src: Path, query: str, dest: Path, *extra: str) -> bytes:
    args = ["run", query, "-i", str(src), "--event-type", "S", "--id-col", "id",
            "--time-unit", "s", "-o", str(dest), "-q", *extra]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    return dest.read_bytes()


@pytest.mark.parametrize("ids", ["str", "int"])
@pytest.mark.parametrize("query, plan", [(RUNS, "runs"), (CHAIN, "chain"), (SEQ3, "chain")],
                         ids=["runs", "chain-kleene", "chain-seq"])
@pytest.mark.parametrize("stream", [False, True])
def test_parquet_from_columns_is_the_nfas_file(tmp_path: Path, query: str, plan: str,
                                               ids: str, stream: bool,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    src = _input(tmp_path, ids)
    extra = ["--stream", "--batch-size", "64"] if stream else []
    nfa = _run(src, query, tmp_path / "nfa.parquet", "--plan", "nfa", "--workers", "1", *extra)
    with monkeypatch.context() as mp:  # the plan's run builds no Match object
        mp.setattr(MatchColumns, "matches", _no_match_objects)
        got = _run(src, query, tmp_path / "plan.parquet", "--plan", plan, "--workers", "1",
                   *extra)
    assert got == nfa
    table = pq.read_table(tmp_path / "plan.parquet")
    assert table.column_names == ["query", "start", "end", "match"]
    assert table.num_rows > 20
    if not stream:  # the plan's own choice and the default workers: the same file
        default = _run(src, query, tmp_path / "default.parquet",
                       *(["--plan", plan] if plan == "chain" else []))
        assert default == nfa


def test_demo_parquet_from_the_cli_is_the_golden_table(tmp_path: Path) -> None:
    dest = tmp_path / "demo.parquet"
    res = CliRunner().invoke(cli, [
        "run", str(REPO / "examples/flight_delay_propagation.kleene"),
        "-i", str(REPO / "examples/data/nycflights13_sample.csv.gz"),
        "--time-col", "dep_time_utc", "--event-type", "Flight", "-o", str(dest), "-q"])
    assert res.exit_code == 0, res.output
    new, old = pq.read_table(dest), pq.read_table(FIXTURES / "demo.parquet")
    assert new.schema == old.schema
    assert new.to_pylist() == old.to_pylist()


GENERAL = ("PATTERN SEQ(S a, S+ b[], S c) WHERE b[i].price > a.price AND c.price < a.price "
           "PARTITION BY sym WITHIN 12 seconds USING skip-till-any-match")
"""The chain's general join (a condition between list elements and ``a``): FwdBlocks."""


@pytest.mark.parametrize("ret", ["", " RETURN a.price AS p, count(b) AS n"],
                         ids=["columns", "return"])
@pytest.mark.parametrize("stream", [False, True])
def test_parquet_of_the_general_join_is_the_nfas_file(tmp_path: Path, ret: str,
                                                      stream: bool) -> None:
    # with RETURN the forward walk's blocks are written as pieces of Match objects (their
    # values computed as they are written), without it as columns: both the NFA's file
    src = _input(tmp_path, "int")
    extra = ["--stream", "--batch-size", "64"] if stream else []
    nfa = _run(src, GENERAL + ret, tmp_path / "nfa.parquet", "--plan", "nfa", "--workers", "1",
               *extra)
    got = _run(src, GENERAL + ret, tmp_path / "chain.parquet", "--plan", "chain",
               "--workers", "1", *extra)
    assert got == nfa
    table = pq.read_table(tmp_path / "chain.parquet")
    assert table.num_rows > 64
    assert ("p" in table.column_names) == bool(ret)
