"""``kleene run --dialect match_recognize`` on Flink's documented running-aggregate example
(``PATTERN (A+ B) DEFINE A AS AVG(A.price) < 15``, docs/semantics.md 21): a real process on a
real CSV file, the same matches in a batch run, a streaming run and on the oracle."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# prices 20 10 12 30 11 14 9 40 at ts 1..8 (ids are 0-based rows). From row 0 the first
# average is 20; from row 1 the averages are 10, 11, 17.3: A=[1 2], B=3; from row 4 (after
# PAST LAST ROW) 11, 12.5, 11.3, 18.5: A=[4 5 6], B=7.
EVENTS = "ts,sym,price\n1,S,20\n2,S,10\n3,S,12\n4,S,30\n5,S,11\n6,S,14\n7,S,9\n8,S,40\n"
QUERY = """SELECT * FROM ticker MATCH_RECOGNIZE (
  PARTITION BY sym ORDER BY ts
  MEASURES FIRST(A.price) AS first_price, LAST(A.price) AS last_price,
           AVG(A.price) AS avg_price, B.price AS b_price
  ONE ROW PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A+ B)
  DEFINE A AS AVG(A.price) < 15
)"""
MATCHES = [{"A": [1, 2], "B": 3}, {"A": [4, 5, 6], "B": 7}]
VALUES = [{"first_price": 10, "last_price": 12, "avg_price": 11.0, "b_price": 30},
          {"first_price": 11, "last_price": 9, "avg_price": 34 / 3, "b_price": 40}]


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kleene", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def test_flink_running_average_end_to_end(tmp_path: Path) -> None:
    (tmp_path / "in.csv").write_text(EVENTS)
    texts = {}
    for name, extra in {"batch": [], "oracle": ["--engine", "oracle"],
                        "stream": ["--stream", "--batch-size", "1"]}.items():
        done = run_cli("run", "--dialect", "match_recognize", QUERY, "--input", "in.csv",
                       "--event-type", "R", "-o", f"{name}.jsonl", *extra, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        texts[name] = (tmp_path / f"{name}.jsonl").read_text()
    assert len(set(texts.values())) == 1
    recs = [json.loads(x) for x in texts["batch"].splitlines()]
    assert [r["match"] for r in recs] == MATCHES
    assert [r["values"] for r in recs] == VALUES


def test_check_prints_the_running_aggregate(tmp_path: Path) -> None:
    done = run_cli("check", "--dialect", "match_recognize", QUERY, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "WHERE avg(A[..i].price) < 15\n" in done.stdout
