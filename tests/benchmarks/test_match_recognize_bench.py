"""Flink's stock MATCH_RECOGNIZE text (benchmarks/flink_baseline.py, verbatim) through kleene's
match_recognize dialect gives the hand loop's match set, for both skip modes, on a 20,000-event
slice of the benchmark stream (`python -m benchmarks.match_recognize` runs the full 1M)."""

from __future__ import annotations

import pytest

from benchmarks import datasets, flink_baseline
from benchmarks import match_recognize as bench


@pytest.mark.parametrize("skip", sorted(flink_baseline.SKIPS))
def test_flink_text_gives_the_hand_loop_matches(skip: str) -> None:
    csv = datasets.stock_csv(20_000)
    got, _secs = bench.kleene_matches(csv, skip)
    want = bench.loop_matches(csv, skip)
    assert len(want) > 1_000
    assert got == want


def test_past_last_row_is_a_subset_of_next_row() -> None:
    csv = datasets.stock_csv(20_000)
    nxt, _ = bench.kleene_matches(csv, "next-row")
    past, _ = bench.kleene_matches(csv, "past-last")
    assert past < nxt


def test_recorded_flink_counts_are_read() -> None:
    counts = bench.flink_counts()
    assert counts == {"next-row": 152_420, "past-last": 108_180}
