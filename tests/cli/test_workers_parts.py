"""``kleene run --workers N`` on a CSV file: each worker reads a part of the file (byte ranges
cut at line starts, kleene.events.sources.csvrange), hands the other workers the events of
their keys and matches its own (kleene.runtime.parallel.run_parts). The output is one
process's, byte for byte: ids are line indices of the whole file, bad rows are reported as
one reader reports them, an input out of order is sorted (then this process reads it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner

from kleene.cli.main import cli
from kleene.events.readers import EventStream, ReadOptions, iter_events
from kleene.events.sources.csvrange import CsvRangeSource, csv_byte_ranges
from kleene.runtime import parallel
from kleene.runtime.engine import default_workers
from kleene.runtime.parallel import MIN_EVENTS_PER_WORKER

QUERY = ("PATTERN SEQ(Stock a, Stock+ b[], Stock c) WHERE b[1].price > a.price AND "
         "b[i].price > b[i-1].price AND c.price < a.price PARTITION BY symbol "
         "WITHIN 10 minutes USING strict-contiguity")
N = 2 * MIN_EVENTS_PER_WORKER + 3000


def _lines(n: int, *, seed: int = 7, volume: bool = True) -> list[str]:
    rng = np.random.default_rng(seed)
    sym = rng.integers(0, 30, n).tolist()
    price = rng.normal(100, 5, n).round(1).tolist()
    vol = rng.integers(1, 900, n).tolist()
    head = "id,symbol,ts,price" + (",volume" if volume else "")
    return [head] + [f"{i},S{s},{i},{p}" + (f",{v}" if volume else "")
                     for i, (s, p, v) in enumerate(zip(sym, price, vol, strict=True))]


def _write(path: Path, lines: list[str], *, eol: str = "\n") -> Path:
    path.write_bytes((eol.join(lines) + eol).encode())
    return path


@dataclass(frozen=True)
class _SmallBlocks(ReadOptions):
    block_bytes: int = 1 << 16


@pytest.fixture
def parts(monkeypatch: pytest.MonkeyPatch) -> list[parallel.PartsRun]:
    """What every run_parts returned."""
    seen: list[parallel.PartsRun] = []
    run_parts = parallel.run_parts

    def spy(*a: object, **k: object) -> parallel.PartsRun:
        seen.append(run_parts(*a, **k))  # type: ignore[arg-type]
        return seen[-1]

    monkeypatch.setattr(parallel, "run_parts", spy)
    return seen


def _run(csv: Path, out: Path, *extra: str, ok: bool = True) -> tuple[bytes, str]:
    r = CliRunner().invoke(cli, ["run", QUERY, "-i", str(csv), "--event-type", "Stock",
                                 "-o", str(out), *extra])
    if ok:
        assert r.exit_code == 0, r.output
        return (out.read_bytes() if out.exists() else r.stdout.encode()), r.stderr
    assert r.exit_code != 0
    return b"", r.stderr


def _one_and_two(csv: Path, tmp: Path, *extra: str) -> tuple[bytes, bytes, str]:
    one, _ = _run(csv, tmp / "one.jsonl", "--workers", "1", *extra)
    two, err = _run(csv, tmp / "two.jsonl", "--workers", "2", *extra)
    return one, two, err


@pytest.mark.parametrize("extra", [[], ["--plan", "nfa"], ["--batch-size", "700"]])
def test_parts_give_the_output_of_one_reader(tmp_path: Path, parts: list[parallel.PartsRun],
                                             extra: list[str]) -> None:
    csv = _write(tmp_path / "stock.csv", _lines(N))
    one, two, err = _one_and_two(csv, tmp_path, *extra)
    assert one == two and one.count(b"\n") > 100
    assert "2 workers, each reading a part of the input" in err
    assert len(parts) == 1 and parts[0].run is not None and parts[0].run.workers == 2


def test_parts_keep_ids_across_crlf_and_blank_lines(tmp_path: Path,
                                                    parts: list[parallel.PartsRun]) -> None:
    """Blank lines take ids (ids are line indices of the whole file); CRLF line ends."""
    lines = _lines(N)
    for i in (5, 6, N // 2, N // 2 + 1, N - 10):
        lines.insert(i, "")
    csv = _write(tmp_path / "stock.csv", lines, eol="\r\n")
    one, two, err = _one_and_two(csv, tmp_path)
    assert one == two and one.count(b"\n") > 100
    assert "blank lines" in err and parts[0].run is not None


def test_parts_count(tmp_path: Path, parts: list[parallel.PartsRun]) -> None:
    csv = _write(tmp_path / "stock.csv", _lines(N))
    one, two, _err = _one_and_two(csv, tmp_path, "--count")
    assert one == two and int(one) > 100 and parts[0].run is not None


def test_a_bad_row_is_reported_as_one_reader_does(tmp_path: Path,
                                                  parts: list[parallel.PartsRun]) -> None:
    lines = _lines(N)
    lines[N - 100] = "oops"  # in the second part
    csv = _write(tmp_path / "stock.csv", lines)
    one, two, err = _one_and_two(csv, tmp_path, "--on-bad-row", "skip")
    assert one == two and one.count(b"\n") > 100
    assert "read in one process: a bad row" in err and "1   (1 skipped" in err
    _o, err1 = _run(csv, tmp_path / "x.jsonl", "--workers", "1", ok=False)
    _o, err2 = _run(csv, tmp_path / "y.jsonl", "--workers", "2", ok=False)
    assert err1 == err2 and f"row {N - 99}" in err1 or f"line {N - 99}" in err1


def test_an_input_out_of_order_across_parts_is_sorted(tmp_path: Path,
                                                      parts: list[parallel.PartsRun]) -> None:
    """Each part is in order, but the second starts before the first ends."""
    lines = _lines(N)
    head, rows = lines[0], lines[1:]
    half = len(rows) // 2
    shifted = [",".join([f, s, str(int(t) + 50), *rest]) for f, s, t, *rest in
               (r.split(",") for r in rows[:half])]
    csv = _write(tmp_path / "stock.csv", [head, *shifted, *rows[half:]])
    one, two, err = _one_and_two(csv, tmp_path)
    assert one == two and one.count(b"\n") > 100
    assert "read in one process: the input is out of time order" in err
    assert parts[0].run is None


def test_a_column_widened_in_a_later_part_reads_in_one_process(
        tmp_path: Path, parts: list[parallel.PartsRun], monkeypatch: pytest.MonkeyPatch) -> None:
    """Integer prices in the first block, a fraction near the end: one reader widens the
    column to floats for the whole input; the parts would not agree, so it reads alone."""
    from kleene.events import readers

    # 64 KiB blocks: the first block (which decides the types) ends long before the fraction
    monkeypatch.setattr(readers, "ReadOptions", _SmallBlocks)
    lines = _lines(N)
    lines = [lines[0]] + [",".join([*r.split(",")[:3], str(int(float(r.split(",")[3]))),
                                    r.split(",")[4]]) for r in lines[1:]]
    lines[N - 5] = lines[N - 5].rsplit(",", 2)[0] + ",101.5," + lines[N - 5].rsplit(",", 1)[1]
    csv = _write(tmp_path / "stock.csv", lines)
    one, two, err = _one_and_two(csv, tmp_path)
    assert one == two and one.count(b"\n") > 10
    assert "read in one process: a column's type widened" in err


def test_a_bad_value_in_an_unread_column_warns_as_one_reader(
        tmp_path: Path, parts: list[parallel.PartsRun]) -> None:
    lines = _lines(N)
    lines[N - 3] = lines[N - 3].rsplit(",", 1)[0] + ",nil"
    csv = _write(tmp_path / "stock.csv", lines)
    one, two, err = _one_and_two(csv, tmp_path)
    assert one == two and "volume: 1 not int64" in err


def test_an_unknown_event_type_fails_as_with_one_reader(tmp_path: Path) -> None:
    lines = ["type," + ln if i == 0 else "Stock," + ln for i, ln in enumerate(_lines(N))]
    csv = _write(tmp_path / "stock.csv", lines)
    q = QUERY.replace("Stock c", "Stok c")
    errs = []
    for w in ("1", "2"):
        r = CliRunner().invoke(cli, ["run", q, "-i", str(csv), "--workers", w,
                                     "-o", str(tmp_path / "o.jsonl")])
        assert r.exit_code != 0
        errs.append(r.stderr)
    assert errs[0] == errs[1] and "Stok" in errs[0]


@pytest.mark.parametrize("eol", ["\n", "\r\n"])
@pytest.mark.parametrize("parts_n", [2, 3, 7])
def test_byte_ranges_read_as_the_whole_file(tmp_path: Path, eol: str, parts_n: int) -> None:
    """The parts, read with the whole file's type decisions and their ids offset by the ids
    of the parts before, are the whole file's events; the last line may lack its break."""
    lines = _lines(3000, volume=False)
    lines.insert(700, "")
    csv = tmp_path / "x.csv"
    csv.write_bytes((eol.join(lines)).encode())
    opts = ReadOptions(event_type="Stock", block_bytes=4096, batch_size=500)
    whole = iter_events(csv, opts, sort_chunks=False)
    tables = [b.table for b in whole]
    decisions = whole.decisions
    cut = csv_byte_ranges(str(csv), opts, parts_n)
    assert cut is not None
    head, ranges = cut
    assert ranges[0][0] == len(head) and ranges[-1][1] == csv.stat().st_size
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    got, offset = [], 0
    for s, e in ranges:
        st = EventStream(CsvRangeSource(str(csv), opts, head, s, e), opts, sort_chunks=False,
                         decisions=decisions)  # (as the workers are given them)
        for b in st:
            t = b.table
            got.append(t.set_column(0, "__id", pa.array(t.column(0).to_numpy() + offset)))
        offset += st.report.rows_read + st.report.blank_lines
    assert pa.concat_tables(got).equals(pa.concat_tables(tables))


def test_byte_ranges_read_in_one_arrow_thread_as_the_whole_file_in_many(
        tmp_path: Path) -> None:
    """A keyed worker reads its range with Arrow's pool cut to its share of the cores (one
    thread here: typed blocks of over 1 MiB parsed in one thread); its events are those of
    the whole file read with every thread, block for block."""
    csv = _write(tmp_path / "x.csv", _lines(120_000))
    opts = ReadOptions(event_type="Stock", block_bytes=5 << 18)  # 1.25 MiB
    whole = iter_events(csv, opts, sort_chunks=False)
    want = pa.concat_tables([b.table for b in whole])
    cut = csv_byte_ranges(str(csv), opts, 2)
    assert cut is not None and csv.stat().st_size > 2 * (5 << 18)  # blocks Arrow threads
    head, ranges = cut
    threads = pa.cpu_count()
    pa.set_cpu_count(1)
    try:
        got, offset = [], 0
        for s, e in ranges:
            st = EventStream(CsvRangeSource(str(csv), opts, head, s, e), opts,
                             sort_chunks=False, decisions=whole.decisions)
            for b in st:
                t = b.table
                got.append(t.set_column(0, "__id", pa.array(t.column(0).to_numpy() + offset)))
            offset += st.report.rows_read + st.report.blank_lines
    finally:
        pa.set_cpu_count(threads)
    assert pa.concat_tables(got).equals(want) and want.num_rows == 120_000


def test_no_byte_ranges_for_compressed_or_odd_inputs(tmp_path: Path) -> None:
    gz = tmp_path / "x.csv.gz"
    gz.write_bytes(b"\x1f\x8b\x08\x00")
    noline = tmp_path / "y.csv"
    noline.write_bytes(b"ts,v")
    assert csv_byte_ranges(str(gz), ReadOptions(), 2) is None
    assert csv_byte_ranges(str(noline), ReadOptions(), 2) is None
    assert csv_byte_ranges("-", ReadOptions(), 2) is None



@pytest.mark.skipif(default_workers() < 2, reason="one core: no second worker to weigh")
def test_a_run_the_estimate_keeps_in_one_process_imports_no_worker_machinery(
        tmp_path: Path) -> None:
    """The runs plan on N events: one process by the cost estimate, said in the summary;
    neither multiprocessing nor kleene.runtime.parallel is imported (start-up time)."""
    import os
    import subprocess
    import sys

    import kleene

    run = ("import sys\nfrom kleene.cli.main import main\ntry:\n    main(['run', *sys.argv[1:]])\n"
           "except SystemExit as e:\n    assert not e.code, e.code\n"
           "print('IMPORTED', sorted(m for m in ('multiprocessing', 'kleene.runtime.parallel')"
           " if m in sys.modules))\n")
    csv = _write(tmp_path / "stock.csv", _lines(N))
    env = {**os.environ, "PYTHONPATH": str(Path(kleene.__file__).parents[1])}
    done = subprocess.run([sys.executable, "-c", run, QUERY, "-i", str(csv), "--event-type",
                           "Stock", "-o", str(tmp_path / "o.jsonl")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "1 worker: 2 workers estimated" in done.stderr
    assert done.stdout.splitlines()[-1] == "IMPORTED []"


def test_parts_to_stdout_and_with_one_key_give_the_output_of_one_reader(
        tmp_path: Path, parts: list[parallel.PartsRun]) -> None:
    """The merged lines of the workers to standard output, and when every key hashes to one
    worker (the other has no lines)."""
    csv = _write(tmp_path / "stock.csv", _lines(N))
    one, _ = _run(csv, tmp_path / "one.jsonl", "--workers", "1")
    r = CliRunner().invoke(cli, ["run", QUERY, "-i", str(csv), "--event-type", "Stock",
                                 "--workers", "2", "--quiet"])
    assert r.exit_code == 0, r.output
    assert r.stdout.encode() == one and parts[0].run is not None
    assert parts[0].run.workers == 2
    lines = _lines(N)
    single = [lines[0]] + [ln.replace(ln.split(",")[1], "S1", 1) for ln in lines[1:]]
    csv = _write(tmp_path / "one_key.csv", single)
    one, two, err = _one_and_two(csv, tmp_path)
    assert one == two and one.count(b"\n") > 10
    assert parts[-1].run is not None and parts[-1].run.workers == 1, err
    texts = parts[-1].run.texts
    assert texts is not None and sum(len(t) for t in texts) == one.count(b"\n")


def test_a_run_in_parts_imports_no_multiprocessing_shutil_or_tempfile(tmp_path: Path) -> None:
    """The part workers are forked bare (os.fork and pipes), their folder made and removed
    with os calls: a run in parts does not pay the imports of multiprocessing, shutil and
    tempfile in the calling process (start-up time), nor numpy.ma in its merge."""
    import os
    import subprocess
    import sys

    import kleene

    run = ("import sys\nfrom kleene.cli.main import main\ntry:\n    main(['run', *sys.argv[1:]])\n"
           "except SystemExit as e:\n    assert not e.code, e.code\n"
           "print('IMPORTED', sorted(m for m in sys.modules if m.startswith('multiprocessing')"
           " or m in ('shutil', 'tempfile', 'numpy.ma')))\n")
    csv = _write(tmp_path / "stock.csv", _lines(N))
    env = {**os.environ, "PYTHONPATH": str(Path(kleene.__file__).parents[1])}
    done = subprocess.run([sys.executable, "-c", run, QUERY, "-i", str(csv), "--event-type",
                           "Stock", "-o", str(tmp_path / "o.jsonl"), "--workers", "2"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "2 workers, each reading a part of the input" in done.stderr
    assert done.stdout.splitlines()[-1] == "IMPORTED []"
    one, _ = _run(csv, tmp_path / "one.jsonl", "--workers", "1")
    assert (tmp_path / "o.jsonl").read_bytes() == one


def test_a_worker_that_dies_is_an_error_of_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A part worker (forked bare) that dies after reading (here: it exits at once when it
    would hand its matches back) is the run's error, naming the worker and its exit code,
    and leaves no output file."""
    import os

    def dies(*a: object, **k: object) -> None:
        os._exit(3)

    csv = _write(tmp_path / "stock.csv", _lines(N))
    monkeypatch.setattr(parallel, "_worker_result", dies)
    r = CliRunner().invoke(cli, ["run", QUERY, "-i", str(csv), "--event-type", "Stock",
                                 "-o", str(tmp_path / "o.jsonl"), "--workers", "2"])
    assert r.exit_code != 0
    assert "worker process" in r.stderr and "died (exit code 3)" in r.stderr
    assert not list(tmp_path.glob("o.jsonl*"))


BIG = 120_000
"""Rows of a file whose first block is large enough for the sample of its first lines to
decide its types (csvfile._SAMPLE_MIN): the calling process then reads only that sample."""


@pytest.fixture
def looks(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each sample look of the CLI decided the types (cli.main._sample_look)."""
    from kleene.cli import main

    seen: list[bool] = []
    look = main._sample_look

    def spy(*a: object) -> object:
        got = look(*a)  # type: ignore[arg-type]
        seen.append(got is not None)
        return got

    monkeypatch.setattr(main, "_sample_look", spy)
    return seen


def test_parts_with_the_types_decided_by_the_sample(
        tmp_path: Path, parts: list[parallel.PartsRun], looks: list[bool]) -> None:
    csv = _write(tmp_path / "stock.csv", _lines(BIG))
    one, two, err = _one_and_two(csv, tmp_path)
    assert one == two and one.count(b"\n") > 1000
    assert looks == [True] and parts[0].run is not None and parts[0].run.workers == 2
    assert "2 workers, each reading a part of the input" in err
    small = _write(tmp_path / "small.csv", _lines(N))  # the whole first block decides
    one, two, err = _one_and_two(small, tmp_path)
    assert one == two and looks == [True, False] and parts[1].run is not None


def test_a_column_widened_after_the_sample_reads_in_one_process(
        tmp_path: Path, parts: list[parallel.PartsRun], looks: list[bool]) -> None:
    """Integer prices in the sample, a fraction later in the first block: one reader widens
    the column to floats; the parts, read with the sample's types, would not agree."""
    lines = _lines(BIG)
    lines = [lines[0]] + [",".join([*r.split(",")[:3], str(int(float(r.split(",")[3]))),
                                    r.split(",")[4]]) for r in lines[1:]]
    row = lines[40_000].split(",")
    lines[40_000] = ",".join([*row[:3], "101.5", row[4]])
    csv = _write(tmp_path / "stock.csv", lines)
    one, two, err = _one_and_two(csv, tmp_path)
    assert one == two and one.count(b"\n") > 10
    assert looks == [True] and parts[0].run is None
    assert "read in one process: a column's type widened" in err


def test_a_bad_row_in_the_sample_is_reported_as_one_reader_does(
        tmp_path: Path, parts: list[parallel.PartsRun], looks: list[bool]) -> None:
    lines = _lines(BIG)
    lines[100] = "oops"
    csv = _write(tmp_path / "stock.csv", lines)
    one, two, err = _one_and_two(csv, tmp_path, "--on-bad-row", "skip")
    assert one == two and one.count(b"\n") > 100 and looks == [False]
    assert "1   (1 skipped" in err
    _o, err1 = _run(csv, tmp_path / "x.jsonl", "--workers", "1", ok=False)
    _o, err2 = _run(csv, tmp_path / "y.jsonl", "--workers", "2", ok=False)
    assert err1 == err2 and ("row 100" in err1 or "line 101" in err1), err1


def test_a_cap_over_the_whole_input_decides_as_in_one_process(
        tmp_path: Path, parts: list[parallel.PartsRun]) -> None:
    """``max_matches_per_call`` counts the matches of one call, and a run without --stream
    is one call over the whole input: a cap that the whole input reaches but no worker's
    share does fails the run as in one process (the calling process decides)."""
    csv = _write(tmp_path / "stock.csv", _lines(N))
    one, _err = _run(csv, tmp_path / "all.jsonl", "--workers", "1")
    total = one.count(b"\n")
    cap = str(total * 3 // 4)  # above each worker's half, below the whole
    _o, err1 = _run(csv, tmp_path / "x.jsonl", "--workers", "1",
                    "--max-matches-per-call", cap, ok=False)
    _o, err2 = _run(csv, tmp_path / "y.jsonl", "--workers", "2",
                    "--max-matches-per-call", cap, ok=False)
    assert f"max_matches_per_call={cap}" in err1 and err2 == err1
    assert parts[-1].run is None and "max_matches_per_call" in str(parts[-1].why)
    assert not list(tmp_path.glob("y.jsonl*"))
    # with the cap above the whole output both give it
    one_c, two_c, err = _one_and_two(csv, tmp_path, "--max-matches-per-call", str(total + 1))
    assert one_c == two_c == one and "2 workers" in err


def test_a_part_is_matched_while_later_parts_are_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        parts: list[parallel.PartsRun]) -> None:
    """No barrier after reading: worker 0 matches the first part's events as soon as that
    part is read, while the second part is still being read. Here the second part's read
    waits (up to 20 s) for the first push of worker 0; the run records whether it came."""
    import os
    import time

    from kleene.cli import main

    csv = _write(tmp_path / "stock.csv", _lines(N))
    marker, seen = tmp_path / "pushed", tmp_path / "seen"
    size = csv.stat().st_size
    read_part = main._read_part

    def slow_second(path: str, ro: object, head: bytes, part: tuple[int, int],
                    *a: object) -> object:
        if part[0] > size // 4:  # the second part: wait for worker 0's first push
            end = time.monotonic() + 20
            while not marker.exists() and time.monotonic() < end:
                time.sleep(0.01)
            seen.write_text("yes" if marker.exists() else "no")
        return read_part(path, ro, head, part, *a)  # type: ignore[arg-type]

    monkeypatch.setattr(main, "_read_part", slow_second)
    _before_each_push(monkeypatch, lambda: marker.write_text(str(os.getpid())))
    one, _ = _run(csv, tmp_path / "one.jsonl", "--workers", "1")
    assert not seen.exists()  # (one process: no part read)
    two, _err = _run(csv, tmp_path / "two.jsonl", "--workers", "2")
    assert seen.read_text() == "yes" and two == one
    assert parts[-1].run is not None and parts[-1].run.workers == 2


def test_a_slower_worker_matches_fewer_key_buckets(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        parts: list[parallel.PartsRun]) -> None:
    """The workers take key buckets from one queue: here worker 2's every push is slowed
    (50 ms), so worker 1 matches most of the buckets (with events), and the output is still
    one reader's."""
    import time

    csv = _write(tmp_path / "stock.csv", _lines(N))
    match_buckets = parallel._match_buckets
    me: list[int] = []

    def which(w: int, *a: object, **k: object) -> object:
        me.append(w)  # (in the forked worker's own copy)
        return match_buckets(w, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(parallel, "_match_buckets", which)
    _before_each_push(monkeypatch, lambda: time.sleep(0.05) if me == [1] else None)
    one, _ = _run(csv, tmp_path / "one.jsonl", "--workers", "1")
    two, _err = _run(csv, tmp_path / "two.jsonl", "--workers", "2")
    assert two == one
    run = parts[-1].run
    assert run is not None and run.workers == 2
    fast, slow = run.cpu["worker 1 buckets"], run.cpu["worker 2 buckets"]
    assert 20 <= fast + slow <= 30  # (30 keys in 64 buckets)
    assert slow >= 1 and fast > 2 * slow


def _before_each_push(monkeypatch: pytest.MonkeyPatch, before: Callable[[], object]) -> None:
    """Every worker runtime calls ``before()`` before each ``push`` (in the forked worker)."""
    worker_runtime = parallel._worker_runtime

    def wrapped(*a: object, **k: object) -> object:
        rt = worker_runtime(*a, **k)  # type: ignore[arg-type]
        push = rt.push

        def push_after(batch: object) -> object:
            before()
            return push(batch)  # type: ignore[arg-type]

        rt.push = push_after  # type: ignore[method-assign]
        return rt

    monkeypatch.setattr(parallel, "_worker_runtime", wrapped)
