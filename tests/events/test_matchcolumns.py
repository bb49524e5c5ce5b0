"""Column parts cut, compacted, joined and reordered (kleene.events.matchtable: ``slice``,
``compact``, ``concat_columns``, ``take``; the keyed parallel stream's merge uses them) bind
the same events as the parts they come from, for each way a part binds: rows, ranges of
rows (the runs plan) and lists of rows (the chain plan's Kleene blocks)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kleene.api import analyze
from kleene.events import EventBatch, Match
from kleene.events.matchtable import MatchColumns, concat_columns
from kleene.plans.registry import start

QUERIES = {
    "chain-kleene": ("chain", "PATTERN SEQ(S a, S+ b[], S c) WHERE c.p > a.p "
                              "PARTITION BY k WITHIN 8 seconds USING skip-till-any-match"),
    "chain-seq": ("chain", "PATTERN SEQ(S a, S b, S c) WITHIN 6 seconds "
                           "USING skip-till-any-match"),
    "runs": ("runs", "PATTERN SEQ(S a, S+ b[], S c) WHERE b[i].p > b[i-1].p "
                     "PARTITION BY k WITHIN 8 seconds USING strict-contiguity"),
}


def _pieces(plan: str, q: str, text_ids: bool) -> list[MatchColumns]:
    rng = np.random.default_rng(5)
    events = EventBatch.from_records([{"id": f"e{i}" if text_ids else i, "type": "S",
                                       "ts": i, "k": int(k), "p": float(p)}
                                      for i, (k, p) in enumerate(zip(
                                          rng.integers(0, 2, 60), rng.normal(0, 1, 60),
                                          strict=True))])
    rt = start(analyze(q), plan=plan, max_matches_per_call=None, max_matches_per_event=None)
    rt.columnar = True
    pieces: list[Any] = []
    for i in range(0, 60, 20):
        rt.push_to(events.slice(i, 20), pieces.append, chunk=37)
    rt.close_to(pieces.append, chunk=37)
    cols = [p for p in pieces if isinstance(p, MatchColumns)]
    assert len(cols) >= 3 and sum(map(len, cols)) > 50
    return cols


def _m(ms: list[Match]) -> list[tuple[Any, ...]]:
    return [m.key() for m in ms]


@pytest.mark.parametrize("text_ids", [False, True])
@pytest.mark.parametrize("name", sorted(QUERIES))
def test_compacted_joined_and_reordered_parts_bind_the_same_events(name: str,
                                                                   text_ids: bool) -> None:
    pieces = _pieces(*QUERIES[name], text_ids)
    rng = np.random.default_rng(11)
    slices = []
    for p in pieces:
        i, j = sorted(rng.integers(0, len(p) + 1, 2).tolist())
        s = p.slice(i, max(j, i + 1) if i < len(p) else len(p))
        c = s.compact()
        assert _m(c.matches()) == _m(s.matches()) and len(c.ids) <= len(s.ids)
        slices.append(s)
    slices = [s for s in slices if len(s)]
    assert len({s.layout() for s in slices}) == 1
    joined = concat_columns(slices)
    every = [m for s in slices for m in s.matches()]
    assert _m(joined.matches()) == _m(every)
    assert np.array_equal(joined.last_gpos, np.concatenate([s.last_gpos for s in slices]))
    perm = rng.permutation(len(joined))
    assert _m(joined.take(perm).matches()) == _m([every[i] for i in perm.tolist()])
