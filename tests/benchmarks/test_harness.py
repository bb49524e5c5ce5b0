"""The benchmark harness measures what it claims: peak RSS of the child, its RESULT line,
deterministic inputs, and the markdown report."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pyarrow.csv as pacsv

from benchmarks import datasets, measure, report


def test_measure_reads_peak_rss_and_result_of_the_child() -> None:
    # The child holds a 300 MB bytearray, frees it, then reports; the peak must still show it.
    code = ("import json; b = bytearray(300 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]); "
            "del b; print('noise'); print('RESULT ' + json.dumps({'answer': 42}))")
    m = measure.run([sys.executable, "-c", code])
    assert m.ok
    assert m.result == {"answer": 42}
    assert 300 <= m.peak_rss_mb < 600
    assert m.wall_s > 0
    assert len(m.load_before) == 3


def test_measure_does_not_charge_a_child_for_its_large_parent() -> None:
    # Linux carries the forking process's high-water mark over exec into the child's
    # ru_maxrss; the harness starts children from a small launcher so that a benchmark (or
    # pytest) holding 400 MB still measures a small child as small.
    held = bytearray(400 * 1024 * 1024)
    held[::4096] = b"x" * len(held[::4096])
    m = measure.run([sys.executable, "-c", "print('RESULT {}')"])
    assert m.ok and m.result == {}
    assert m.peak_rss_mb < 100
    assert len(held) == 400 * 1024 * 1024


def test_measure_timeout_kills_the_child_and_says_so() -> None:
    m = measure.run([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert not m.ok and m.returncode < 0
    assert m.wall_s < 10


def test_measure_memory_limit_turns_a_runaway_into_a_failure() -> None:
    m = measure.run([sys.executable, "-c", "b = bytearray(2 * 1024**3)"], mem_limit_mb=1000)
    assert not m.ok
    assert "MemoryError" in m.stderr_tail


def test_stock_generator_is_deterministic_and_shaped(tmp_path: Path) -> None:
    a = datasets.stock_csv(500, seed=3, symbols=5, data_dir=tmp_path / "a")
    b = datasets.stock_csv(500, seed=3, symbols=5, data_dir=tmp_path / "b")
    c = datasets.stock_csv(500, seed=4, symbols=5, data_dir=tmp_path / "c")
    digest = [hashlib.sha256(p.read_bytes()).hexdigest() for p in (a, b, c)]
    assert digest[0] == digest[1] != digest[2]
    t = pacsv.read_csv(a)
    assert t.column_names == ["id", "symbol", "ts", "price", "volume"]
    assert t.column("id").to_pylist() == list(range(500))
    assert set(t.column("symbol").to_pylist()) == {"S00", "S01", "S02", "S03", "S04"}
    ts = t.column("ts").to_pylist()
    assert all((y - x).total_seconds() == 0.1 for x, y in zip(ts, ts[1:], strict=False))
    assert a.read_text().startswith("id,symbol,ts,price,volume\n0,")


def test_markdown_report_lists_rows_and_unavailable_pieces() -> None:
    row = {"workload": "1 stock", "variant": "v", "engine": "e", "events": 1000,
           "seconds": 0.5, "events_per_s": 2000.0, "matches": 7, "peak_rss_mb": 12.3,
           "load_1min": [1.5], "status": "ok", "timing": "t", "extra": {}}
    missing = {**row, "engine": "f", "seconds": None, "events_per_s": None, "matches": None,
               "peak_rss_mb": None, "load_1min": [], "status": "not available: no engine"}
    doc = {"machine": {"date_utc": "D", "nproc": 2, "cpu": "C", "ram_gib": 1.0, "os": "O",
                       "python": "3", "java": "J", "kleene_commit": "abc"},
           "command": "python -m benchmarks", "repeats": 3, "rows": [row, missing],
           "notes": ["a note"], "checks": {"same": {"equal": True}}}
    md = report.markdown(doc)
    assert "| 1 stock | v | e | 1,000 | 0.500 | 2,000 | 7 | 12 | 1.5 |" in md
    assert "| 1 stock | v | f | 1,000 | not available: no engine |" in md
    assert "* a note" in md and '* same: `{"equal": true}`' in md
