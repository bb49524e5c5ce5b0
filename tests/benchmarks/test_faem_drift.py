"""benchmarks.faem_drift measures what it claims: the stream drifts at its midpoint, every plan
returns the same matches (the harness refuses to report otherwise), and the adaptive run
switches after the drift; benchmarks.faem scores the chosen plan by its own measurement."""

from __future__ import annotations

import pyarrow.compute as pc

from benchmarks import faem, faem_drift
from kleene.api import analyze
from kleene.plans import evaluate


def test_the_stream_drifts_at_its_midpoint() -> None:
    ev = faem_drift.drifting(40_000, 16.0)
    assert len(ev) == 40_000
    t = ev.table
    ts = t.column("__ts").to_pylist()
    assert ts == sorted(ts) and len(set(ts)) == len(ts)
    first, second = t.slice(0, 20_000).column("__type"), t.slice(20_000).column("__type")

    def n(col: object, track: str) -> int:
        return int(pc.sum(pc.equal(col, track)).as_py())

    a, d = faem.TRACKS[0], faem.TRACKS[3]
    assert n(first, d) > 8 * n(first, a)  # the last class is dense before the drift ...
    assert n(second, a) > 8 * n(second, d)  # ... the first one after it


def test_measure_checks_agreement_and_reports_the_switches() -> None:
    ev = faem_drift.drifting(8_000, 16.0)
    q = faem_drift.drift_query(400, False, 50)
    r = faem_drift.measure(ev, q, 1)
    want = len(evaluate(analyze(q), ev, plan="nfa", max_runs_per_partition=None))
    assert r["matches"] == want > 0
    assert set(r["seconds"]) == {"left", "right", "bushy", "inner", "adaptive", "chosen", "nfa"}
    after = [s for s in r["switches"] if s["after_gpos"] >= 4_000]
    assert after and after[0]["to"] in ("right", "inner")  # the first two classes got dense
    assert after[0]["after_gpos"] < 4_000 + 400  # within one period (half the window)
    assert all(m["replayed"] >= 0 for s in r["switches"] for m in s["migrations"])


def test_chosen_is_scored_by_its_own_plan() -> None:
    point = {"chosen": "tree:right",
             "plans": {"left": {"seconds": 1.0}, "right": {"seconds": 1.05},
                       "chosen": {"seconds": 2.0}, "nfa": {"seconds": 3.0}}}
    assert faem.chosen_seconds(point) == 1.05
    assert faem.chosen_near([point]) == 1
    point["chosen"] = "chain"
    assert faem.chosen_seconds(point) == 2.0
    assert faem.chosen_near([point]) == 0
