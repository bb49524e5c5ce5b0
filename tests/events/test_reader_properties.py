"""Property tests: any chunking of any input gives the same ordered events and counts."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kleene.events.readers import iter_events, read_events

rows_strategy = st.lists(
    st.tuples(st.integers(0, 20), st.sampled_from(["A", "B", "C"]), st.integers(-5, 5)),
    min_size=1, max_size=60)


def _brute_out_of_order(ts: list[int]) -> int:
    return sum(1 for j in range(1, len(ts)) if ts[j] < max(ts[:j]))


@settings(max_examples=40, deadline=None)
@given(rows=rows_strategy, block=st.integers(16, 400), batch=st.integers(1, 70),
       as_json=st.booleans())
def test_any_chunking_reads_the_same_events(rows: list[tuple[int, str, int]], block: int,
                                            batch: int, as_json: bool) -> None:
    with tempfile.TemporaryDirectory() as d:
        if as_json:
            p = Path(d) / "e.jsonl"
            p.write_text("".join(json.dumps({"ts": t, "type": k, "x": x}) + "\n"
                                 for t, k, x in rows))
        else:
            p = Path(d) / "e.csv"
            p.write_text("ts,type,x\n" + "".join(f"{t},{k},{x}\n" for t, k, x in rows))
        batch_out, report = read_events(str(p), block_bytes=block, batch_size=batch)
        expected = sorted(range(len(rows)), key=lambda i: (rows[i][0], i))
        assert batch_out.ids.to_pylist() == expected
        assert batch_out.ts.tolist() == [rows[i][0] * 1_000_000 for i in expected]
        assert batch_out.types.tolist() == [rows[i][1] for i in expected]
        assert batch_out.column("x").to_pylist() == [rows[i][2] for i in expected]
        assert report.out_of_order == _brute_out_of_order([t for t, _, _ in rows])
        stream = iter_events(str(p), block_bytes=block, batch_size=batch)
        chunks = list(stream)
        assert all(len(c) <= batch for c in chunks)
        assert sorted(i for c in chunks for i in c.ids.to_pylist()) == list(range(len(rows)))
        assert stream.report.out_of_order == report.out_of_order
