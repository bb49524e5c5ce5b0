"""``kleene run --timeouts PATH`` / ``EMIT TIMEOUTS`` (docs/semantics.md 20): timed-out partial
matches go to their own JSON Lines file, the same in a batch run, a streaming run at any batch
size and on the oracle, and the summary counts them. Real processes, real files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EVENTS = "ts,type,k\n1,A,u\n2,B,u\n3,A,v\n4,A,u\n6,B,u\n9,C,v\n11,A,u\n"
QUERY = "PATTERN SEQ(A a, B b) PARTITION BY k WITHIN 2 seconds"


def kleene(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kleene", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def test_timeouts_file_is_the_same_in_every_mode(tmp_path: Path) -> None:
    (tmp_path / "in.csv").write_text(EVENTS)
    runs = {"batch": [], "oracle": ["--engine", "oracle"],
            "stream1": ["--stream", "--batch-size", "1"],
            "stream100": ["--stream", "--batch-size", "100"]}
    seen = {}
    for name, extra in runs.items():
        done = kleene("run", QUERY, "--input", "in.csv", "--timeouts", f"t_{name}.jsonl",
                      "-o", f"m_{name}.jsonl", *extra, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "timeouts                   2   (partial matches whose window expired; " \
               f"written to t_{name}.jsonl)" in done.stderr
        assert "matches                    2" in done.stderr
        seen[name] = ((tmp_path / f"m_{name}.jsonl").read_text(),
                      (tmp_path / f"t_{name}.jsonl").read_text())
    assert len(set(seen.values())) == 1
    matches, timeouts = seen["batch"]
    assert [json.loads(x)["match"] for x in matches.splitlines()] == [{"a": 0, "b": 1},
                                                                      {"a": 3, "b": 4}]
    assert [json.loads(x) for x in timeouts.splitlines()] == [
        {"query": "query", "match": {"a": 2}, "start": 3, "end": 3, "expired": 5},
        {"query": "query", "match": {"a": 6}, "start": 11, "end": 11, "expired": 13}]


def test_emit_timeouts_without_a_path_stays_in_the_json_lines_output(tmp_path: Path) -> None:
    (tmp_path / "in.csv").write_text(EVENTS)
    done = kleene("run", QUERY + " EMIT TIMEOUTS", "--input", "in.csv", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    recs = [json.loads(x) for x in done.stdout.splitlines()]
    assert [("expired" in r, r["match"]) for r in recs] == [
        (False, {"a": 0, "b": 1}), (True, {"a": 2}), (False, {"a": 3, "b": 4}),
        (True, {"a": 6})]
    assert "timeouts                   2   (partial matches whose window expired; in the " \
           "output)" in done.stderr
    counted = kleene("run", QUERY, "--input", "in.csv", "--count", "--timeouts", "t.jsonl",
                     "-q", cwd=tmp_path)
    assert counted.returncode == 0 and counted.stdout.strip() == "2"
    assert len((tmp_path / "t.jsonl").read_text().splitlines()) == 2


def test_timeouts_usage_errors(tmp_path: Path) -> None:
    (tmp_path / "in.csv").write_text(EVENTS)
    csv = kleene("run", QUERY + " EMIT TIMEOUTS", "--input", "in.csv", "-o", "out.csv",
                 cwd=tmp_path)
    assert csv.returncode == 1 and "write them with --timeouts PATH" in csv.stderr
    no_window = kleene("run", "PATTERN SEQ(A a, B b)", "--input", "in.csv", "--timeouts",
                       "t.jsonl", cwd=tmp_path)
    assert no_window.returncode == 1 and "EMIT TIMEOUTS needs a time window" in no_window.stderr
    same = kleene("run", QUERY, "--input", "in.csv", "--timeouts", "in.csv", cwd=tmp_path)
    assert same.returncode == 1 and "--timeouts" in same.stderr
