"""``kleene run --dialect match_recognize`` with ALL ROWS PER MATCH (docs/semantics.md 19):
one record per row of each match, in JSON Lines and CSV, the same in a batch run, a streaming
run and on the oracle, and the same rows as the embedded engine. Real processes, real files."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import kleene

# one symbol; prices 10 8 6 7 9 5 at ts 1..6: the V 10 (8 6) (7 9), then 5 starts nothing
EVENTS = "ts,sym,price\n1,S,10\n2,S,8\n3,S,6\n4,S,7\n5,S,9\n6,S,5\n"
QUERY = """SELECT * FROM ticker MATCH_RECOGNIZE (
  PARTITION BY sym ORDER BY ts
  MEASURES STRT.price AS sp, LAST(DOWN.price) AS bottom, FINAL LAST(UP.price) AS top,
           MATCH_NUMBER() AS mno, CLASSIFIER() AS cls, COUNT(*) AS n
  ALL ROWS PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (STRT DOWN+ UP+)
  DEFINE DOWN AS DOWN.price < PREV(DOWN.price), UP AS UP.price > PREV(UP.price)
)"""
MATCH = {"STRT": 0, "DOWN": [1, 2], "UP": [3, 4]}
# running: LAST(DOWN.price) and COUNT(*) as of each row; FINAL LAST(UP.price) is 9 everywhere
ROWS = [
    {"row": 0, "sp": 10, "bottom": None, "top": 9, "mno": 1, "cls": "STRT", "n": 1},
    {"row": 1, "sp": 10, "bottom": 8, "top": 9, "mno": 1, "cls": "DOWN", "n": 2},
    {"row": 2, "sp": 10, "bottom": 6, "top": 9, "mno": 1, "cls": "DOWN", "n": 3},
    {"row": 3, "sp": 10, "bottom": 6, "top": 9, "mno": 1, "cls": "UP", "n": 4},
    {"row": 4, "sp": 10, "bottom": 6, "top": 9, "mno": 1, "cls": "UP", "n": 5},
]


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kleene", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def test_all_rows_per_match_json_lines_and_csv(tmp_path: Path) -> None:
    (tmp_path / "in.csv").write_text(EVENTS)
    texts = {}
    for name, extra in {"batch": [], "oracle": ["--engine", "oracle"],
                        "stream": ["--stream", "--batch-size", "1"]}.items():
        done = run_cli("run", "--dialect", "match_recognize", QUERY, "--input", "in.csv", "--event-type", "R",
                       "-o", f"{name}.jsonl", *extra, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        texts[name] = (tmp_path / f"{name}.jsonl").read_text()
    assert len(set(texts.values())) == 1
    recs = [json.loads(x) for x in texts["batch"].splitlines()]
    assert [r["match"] for r in recs] == [MATCH] * 5  # the rows of one match group by it
    assert [(r["start"], r["end"]) for r in recs] == [(1, 5)] * 5
    assert [r["values"] for r in recs] == ROWS

    done = run_cli("run", "--dialect", "match_recognize", QUERY, "--input", "in.csv", "--event-type", "R",
                   "-o", "out.csv", "--format", "csv", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with (tmp_path / "out.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["query", "start", "end", "match", *ROWS[0]]
    assert [json.loads(r["match"]) for r in rows] == [MATCH] * 5
    assert [{k: r[k] for k in ROWS[0]} for r in rows] == [
        {k: "" if v is None else str(v) for k, v in want.items()} for want in ROWS]

    # the embedded engine gives the same rows
    events, _ = kleene.read_events(str(tmp_path / "in.csv"), time_col="ts", event_type="R")
    found = kleene.compile(QUERY, dialect="match_recognize").run(events)
    assert [dict(m.values) for m in found] == ROWS
    assert [dict(m.bindings) for m in found] == [
        {k: tuple(v) if isinstance(v, list) else v for k, v in MATCH.items()}] * 5
    df = found.to_pandas()
    assert list(df.columns[3:]) == ["STRT", "DOWN", "UP", *ROWS[0]]
    assert df["cls"].tolist() == [r["cls"] for r in ROWS]


def test_check_prints_the_canonical_rows_query(tmp_path: Path) -> None:
    done = run_cli("check", "--dialect", "match_recognize", QUERY, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-3:] == [
        "EMIT ROWS", "AFTER MATCH SKIP PAST LAST ROW",
        "RETURN STRT.price AS sp, DOWN[last].price AS bottom, final(UP[last].price) AS top, "
        "match_number() AS mno, classifier() AS cls, coalesce(count(STRT), 0) + "
        "count(DOWN) + count(UP) "
        "AS n"]
