"""benchmarks.parallel_keyed on a 20,000-event slice, without Flink: both worker counts run,
really fork, write byte-identical files, and the Amdahl split adds up (the full run is the
one-command benchmark of docs/benchmarks.md)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import parallel_keyed


def test_one_and_two_workers_write_the_same_bytes(tmp_path: Path) -> None:
    out = tmp_path / "res.json"
    assert parallel_keyed.main(["--events", "20000", "--pairs", "1", "--no-flink",
                                "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["byte_identical"] is True and res["matches"] > 1_000
    assert res["flink"].startswith("not run")
    one, two = res["kleene_workers_1"], res["kleene_workers_2"]
    assert one["cpu_workers"] == 0 and two["cpu_workers"] > 0  # the second run forked
    split = res["amdahl"]
    total = (split["serial_s (start-up, imports, compile)"]
             + split["parallel_s (read, match, write) at 1 worker"])
    assert abs(total - one["wall"]) < 0.01
