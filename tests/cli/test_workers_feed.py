"""``kleene run --workers N`` on a bounded input: the chunks go to the workers while the
input is read (kleene.runtime.parallel.KeyedFeed), and the output is one process's, byte for
byte, also in many small chunks and when the input is out of order (then the run sorts it
and the workers start after reading, as before)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from kleene.cli.main import cli
from kleene.runtime import parallel
from kleene.runtime.parallel import MIN_EVENTS_PER_WORKER

QUERY = ("PATTERN SEQ(Stock a, Stock+ b[], Stock c) WHERE b[1].price > a.price AND "
         "b[i].price > b[i-1].price AND c.price < a.price PARTITION BY symbol "
         "WITHIN 10 minutes USING strict-contiguity")


def _csv(path: Path, n: int, *, shuffle: int = 0) -> Path:
    rng = np.random.default_rng(7)
    sym = rng.integers(0, 30, n)
    price = rng.normal(100, 5, n).round(1)
    ts = np.arange(n)
    if shuffle:  # rows near the end swapped with a neighbour: out of order after the fork
        for i in rng.integers(n - 1500, n - 1, shuffle):
            ts[i], ts[i + 1] = ts[i + 1], ts[i]
    lines = ["id,symbol,ts,price"] + [f"{i},S{s},{t},{p}" for i, (s, t, p) in
                                       enumerate(zip(sym.tolist(), ts.tolist(), price.tolist(),
                                                     strict=True))]
    path.write_text("\n".join(lines) + "\n")
    return path


def _outputs(csv: Path, tmp: Path, *extra: str) -> dict[str, bytes]:
    outs = {}
    for w in ("1", "2"):
        out = tmp / f"out{w}.jsonl"
        r = CliRunner().invoke(cli, ["run", QUERY, "-i", str(csv), "--event-type", "Stock",
                                     "--workers", w, "-o", str(out), *extra])
        assert r.exit_code == 0, r.output
        if w == "2":
            assert "2 workers" in r.stderr
        outs[w] = out.read_bytes()
    return outs


@pytest.fixture
def fed(monkeypatch: pytest.MonkeyPatch) -> list[parallel.ParallelRun | None]:
    """What every KeyedFeed.finish returned (None: run_parallel ran instead)."""
    seen: list[parallel.ParallelRun | None] = []
    finish = parallel.KeyedFeed.finish

    def spy(self: parallel.KeyedFeed) -> parallel.ParallelRun | None:
        seen.append(finish(self))
        return seen[-1]

    monkeypatch.setattr(parallel.KeyedFeed, "finish", spy)
    return seen


def test_run_workers_fed_in_many_small_chunks_writes_the_output_of_one(
        tmp_path: Path, fed: list[parallel.ParallelRun | None]) -> None:
    """A compressed file (that the workers cannot read in parts), or CSV output (JSON Lines
    and counts only are read in parts): the feed matches while the input is read."""
    csv = _csv(tmp_path / "stock.csv", 2 * MIN_EVENTS_PER_WORKER + 3000)
    gz = tmp_path / "stock.csv.gz"
    gz.write_bytes(gzip.compress(csv.read_bytes()))
    for path, extra in ((gz, ["--batch-size", "700"]),
                        (csv, ["--batch-size", "700", "--format", "csv"])):
        fed.clear()
        outs = _outputs(path, tmp_path, *extra)
        assert outs["1"] == outs["2"] and outs["1"].count(b"\n") > 100
        assert len(fed) == 1 and fed[0] is not None and fed[0].workers == 2, \
            "the workers did not match while reading"


def test_run_workers_on_an_input_out_of_order_sorts_it_and_then_matches(
        tmp_path: Path, fed: list[parallel.ParallelRun | None]) -> None:
    csv = _csv(tmp_path / "stock.csv", 2 * MIN_EVENTS_PER_WORKER + 3000, shuffle=200)
    outs = _outputs(csv, tmp_path, "--batch-size", "1000")
    assert outs["1"] == outs["2"] and outs["1"].count(b"\n") > 100
    assert fed == [], "the feed went on past the first row out of order"


def test_feed_abandoned_after_the_fork_stops_its_workers(tmp_path: Path) -> None:
    """The out-of-order chunk comes after the workers were forked: they are stopped."""
    from kleene.api import analyze
    from kleene.events.readers import iter_events, read_events
    from kleene.plans import choose

    csv = _csv(tmp_path / "stock.csv", 2 * MIN_EVENTS_PER_WORKER + 3000, shuffle=50)
    compiled = choose(analyze(QUERY))
    feed = parallel.KeyedFeed(compiled, 2, {})
    stream = iter_events(csv, event_type="Stock", batch_size=1000, sort_chunks=False)
    for b in stream:
        if stream.report.out_of_order:
            break
        feed.push(b)
    procs = [p for p, _c in feed.procs]
    assert len(procs) == 2 and all(p.is_alive() for p in procs)
    feed.abandon()
    assert all(not p.is_alive() for p in procs) and feed.finish() is None
    assert read_events(csv, event_type="Stock")[1].out_of_order > 0


def test_a_cap_the_whole_output_reaches_truncates_as_one_process(
        tmp_path: Path, fed: list[parallel.ParallelRun | None],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``--max-matches-per-call`` between each worker's share of the matches and the whole
    output, with ``--on-cap truncate``: the fed workers' result is not one process's (a
    bounded run is one call), so one process runs it -- once, not over workers again -- and
    keeps the same matches."""
    csv = _csv(tmp_path / "stock.csv", 2 * MIN_EVENTS_PER_WORKER + 3000)
    gz = tmp_path / "stock.csv.gz"
    gz.write_bytes(gzip.compress(csv.read_bytes()))
    full = tmp_path / "full.jsonl"
    r = CliRunner().invoke(cli, ["run", QUERY, "-i", str(gz), "--event-type", "Stock",
                                 "--workers", "1", "-o", str(full)])
    assert r.exit_code == 0, r.output
    cap = str(full.read_bytes().count(b"\n") * 3 // 4)
    forks = []
    run_parallel = parallel.run_parallel
    monkeypatch.setattr(parallel, "run_parallel",
                        lambda *a, **k: forks.append(a[2]) or run_parallel(*a, **k))
    outs, errs = {}, {}
    for w in ("1", "2"):
        out = tmp_path / f"cap{w}.jsonl"
        r = CliRunner().invoke(cli, ["run", QUERY, "-i", str(gz), "--event-type", "Stock",
                                     "--workers", w, "-o", str(out),
                                     "--max-matches-per-call", cap, "--on-cap", "truncate"])
        assert r.exit_code == 0, r.output
        outs[w], errs[w] = out.read_bytes(), r.stderr
    assert outs["1"] == outs["2"] and outs["1"].count(b"\n") == int(cap)
    assert len(fed) == 1 and fed[0] is None  # the workers matched, their result not taken
    assert forks == [1]  # then one process, once
    assert "2 workers" not in errs["2"] and "dropped" in errs["2"]
