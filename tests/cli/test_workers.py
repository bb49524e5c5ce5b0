"""``kleene run --workers N``: a PARTITION BY query over N processes writes exactly the
output of one process (issue 15), and the summary says how many worked."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa
from click.testing import CliRunner

from kleene.cli.main import cli
from kleene.runtime.parallel import MIN_EVENTS_PER_WORKER, key_workers

QUERY = ("PATTERN SEQ(Stock a, Stock+ b[], Stock c) WHERE b[1].price > a.price AND "
         "b[i].price > b[i-1].price AND c.price < a.price PARTITION BY symbol "
         "WITHIN 10 minutes USING strict-contiguity")


def _csv(path: Path, n: int) -> Path:
    rng = np.random.default_rng(3)
    sym = rng.integers(0, 30, n)
    price = rng.normal(100, 5, n).round(1)
    lines = ["id,symbol,ts,price"] + [f"{i},S{s},{i},{p}" for i, (s, p) in
                                       enumerate(zip(sym.tolist(), price.tolist(), strict=True))]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_run_workers_two_writes_the_output_of_one(tmp_path: Path) -> None:
    csv = _csv(tmp_path / "stock.csv", 2 * MIN_EVENTS_PER_WORKER + 2000)
    outs = {}
    for w in ("1", "2"):
        out = tmp_path / f"out{w}.jsonl"
        r = CliRunner().invoke(cli, ["run", QUERY, "-i", str(csv), "--event-type", "Stock",
                                     "--workers", w, "-o", str(out)])
        assert r.exit_code == 0, r.output
        outs[w] = out.read_bytes()
        if w == "2":
            assert "2 workers" in r.stderr
    assert outs["1"] == outs["2"] and outs["1"].count(b"\n") > 100


def test_run_workers_on_an_unpartitioned_query_says_why_it_used_one(tmp_path: Path) -> None:
    csv = _csv(tmp_path / "stock.csv", 300)
    r = CliRunner().invoke(cli, ["run", "PATTERN SEQ(Stock a, Stock b) WHERE b.price > "
                                 "a.price + 12", "-i", str(csv), "--event-type", "Stock",
                                 "--workers", "2"])
    assert r.exit_code == 0, r.output
    assert "1 worker: no PARTITION BY" in r.stderr


def test_run_workers_two_to_stdout_and_csv_write_the_output_of_one(tmp_path: Path) -> None:
    """The workers format JSON Lines themselves (also to stdout); CSV output still goes
    through the matches: both as one process writes them."""
    csv = _csv(tmp_path / "stock.csv", 2 * MIN_EVENTS_PER_WORKER + 2000)
    for extra in ([], ["--format", "csv"]):
        outs = {}
        for w in ("1", "2"):
            r = CliRunner().invoke(cli, ["run", QUERY, "-i", str(csv), "--event-type", "Stock",
                                         "--workers", w, "-q", *extra])
            assert r.exit_code == 0, r.output
            outs[w] = r.stdout
        assert outs["1"] == outs["2"] and outs["1"].count("\n") > 100


def test_run_stream_workers_two_writes_the_output_of_one(tmp_path: Path) -> None:
    """``--stream --workers 2``: chunks go to two worker processes as they are read; the
    output is the one-process stream's, byte for byte."""
    csv = _csv(tmp_path / "stock.csv", 6000)
    outs = {}
    for w in ("1", "2"):
        out = tmp_path / f"out{w}.jsonl"
        r = CliRunner().invoke(cli, ["run", QUERY, "-i", str(csv), "--event-type", "Stock",
                                     "--stream", "--batch-size", "700", "--workers", w,
                                     "-o", str(out)])
        assert r.exit_code == 0, r.output
        outs[w] = out.read_bytes()
        if w == "2":
            assert "2 workers" in r.stderr
    assert outs["1"] == outs["2"] and outs["1"].count(b"\n") > 30


def test_run_default_keeps_the_runs_plan_in_one_process(tmp_path: Path) -> None:
    """Without --workers the runs plan (chosen for this query) stays in one process on a
    small input: the cost estimate says so, in the summary; --workers 2 still spreads it
    (its workers reading the file in parts), with the same bytes."""
    csv = _csv(tmp_path / "stock.csv", 2 * MIN_EVENTS_PER_WORKER + 2000)
    outs = {}
    for extra in ([], ["--workers", "2"]):
        out = tmp_path / f"out{len(extra)}.jsonl"
        r = CliRunner().invoke(cli, ["run", QUERY, "-i", str(csv), "--event-type", "Stock",
                                     *extra, "-o", str(out)])
        assert r.exit_code == 0, r.output
        outs[len(extra)] = out.read_bytes()
        if not extra:
            assert "1 worker: 2 workers estimated" in r.stderr
            assert "with the runs plan" in r.stderr
        else:
            assert "2 workers, each reading a part of the input" in r.stderr
    assert outs[0] == outs[2] and outs[0].count(b"\n") > 100


def test_run_stream_workers_two_streams_an_explosion_into_the_file(tmp_path: Path) -> None:
    """``--stream --workers 2`` writes through ``push_to``: one chunk of 34 events makes
    262k matches (two partitions, one per worker, chain plan), written to the file as the
    workers' pieces come -- the process's traced peak stays ~10 MB (``push`` held every
    match: ~165 MB) -- and the file is one process's, byte for byte."""
    names = [f"S{i}" for i in range(10)]
    dest = key_workers(pa.table({"symbol": names}), ["symbol"], 2)
    pick = [names[int(np.flatnonzero(dest == w)[0])] for w in (0, 1)]
    csv = tmp_path / "two.csv"
    csv.write_text("id,symbol,ts,price\n" + "".join(f"{i},{pick[i % 2]},{i},1.0\n"
                                                    for i in range(34)))
    q = ("PATTERN SEQ(Stock a, Stock+ b[], Stock c) PARTITION BY symbol WITHIN 1 minute "
         "USING skip-till-any-match")
    outs, peaks = {}, {}
    for w in ("1", "2"):
        out = tmp_path / f"out{w}.jsonl"
        tracemalloc.start()
        try:
            r = CliRunner().invoke(cli, ["run", q, "-i", str(csv), "--event-type", "Stock",
                                         "--plan", "chain", "--stream", "--workers", w,
                                         "-o", str(out)])
            peaks[w] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert r.exit_code == 0, r.output
        outs[w] = out.read_bytes()
    assert "2 workers" in r.stderr
    assert outs["1"] == outs["2"] and outs["1"].count(b"\n") == 261_836
    assert peaks["2"] < 32 * 2 ** 20, f"{peaks['2'] / 2 ** 20:.0f} MB"
