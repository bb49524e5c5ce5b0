"""Issue 17 item 13: ``on_cap='truncate'`` bounds time as well as memory.

The dense explosion ``SEQ(S a, S+ b[], S c) WHERE c.price > a.price WITHIN 60 seconds`` over
rows of type S 10 ms apart doubles its partial matches with every event. At the runs cap the
partition is *saturated* (docs/engine.md, "Bounded memory"): kept are the matches completed up
to the event that reached the cap, and the partition's later events in the call are not
matched (``counters.events_skipped``); the dropped matches are counted exactly by the chain
plan's counter when its work is bounded, else reported as a lower bound (``truncated_exact``).
The tests assert on work done (events matched, runs at the cap), not on wall time.
"""

from __future__ import annotations

import random
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from kleene.api import analyze
from kleene.cli.main import cli
from kleene.events import EventBatch, Match
from kleene.plans import evaluate, start

QUERY = "PATTERN SEQ(S a, S+ b[], S c) WHERE c.price > a.price WITHIN 60 seconds"
RUNS_CAP = 100_000
AT_CAP = 2 ** 17 - 1
"""Live runs after the 17th event (every non-empty subset of the events so far is a run; the
runs cap is checked after each event): the first count above 100,000."""


def _rows(n: int) -> list[dict[str, object]]:
    r = random.Random(7)
    return [{"id": f"s{i}", "type": "S", "ts": i * 0.01, "price": r.randint(1, 100)}
            for i in range(n)]


def _keys(ms: list[Match]) -> list[tuple[object, ...]]:
    return [(tuple(m.bindings.items()), m.start, m.end) for m in ms]


def _run(n: int, plan: str, **opts: object) -> tuple[list[Match], object]:
    rt = start(analyze(QUERY), plan=plan, on_cap="truncate", **opts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = rt.push(EventBatch.from_records(_rows(n))) + rt.close()
    return out, rt.counters


@pytest.mark.parametrize("plan", ["nfa", "pda"])
def test_saturation_keeps_the_matches_before_the_cap_on_every_plan(plan: str) -> None:
    """20,000 rows: the plans whose runs are partial matches (nfa, pda) reach the runs cap at
    the same event and keep exactly the uncapped matches of the first 17 events; the other
    19,983 events are never matched."""
    out, c = _run(20_000, plan)
    want = evaluate(analyze(QUERY), EventBatch.from_records(_rows(17)),
                    max_runs_per_partition=None)
    assert _keys(out) == _keys(want) and len(want) > 1000
    assert c.truncated_runs == AT_CAP  # type: ignore[attr-defined]
    assert c.events_skipped == 20_000 - 17  # type: ignore[attr-defined]
    # 20,000 events: too much work for the exact counter, and the summary says so
    assert c.truncated_exact is False  # type: ignore[attr-defined]


def test_count_only_two_thousand_rows_counts_the_drop_exactly() -> None:
    """2,000 rows with count_only (``--count``): the NFA stops at the runs cap and the chain
    plan's counter gives the exact number it dropped (kept + dropped = every match)."""
    _out, c = _run(2_000, "nfa", count_only=True)
    exact = start(analyze(QUERY), plan="chain", count_only=True)
    exact.count_placeholders = False
    exact.push(EventBatch.from_records(_rows(2_000)))
    exact.close()
    total = exact.counters.matches
    assert total > 10 ** 100  # far too many to enumerate
    assert c.events_skipped == 2_000 - 17  # type: ignore[attr-defined]
    assert c.truncated_exact is True  # type: ignore[attr-defined]
    assert c.matches + c.truncated_matches == total  # type: ignore[attr-defined]
    kept = evaluate(analyze(QUERY), EventBatch.from_records(_rows(17)),
                    max_runs_per_partition=None)
    assert c.matches == len(kept)  # type: ignore[attr-defined]


def test_a_partition_starts_afresh_at_the_next_call() -> None:
    """Saturation lasts to the end of the call: a later push matches again from scratch."""
    rt = start(analyze("PATTERN SEQ(A+ a[], B b)"), max_runs_per_partition=50,
               on_cap="truncate")
    burst = EventBatch.from_records([{"id": f"a{i}", "type": "A", "ts": i} for i in range(12)])
    with pytest.warns(RuntimeWarning, match="truncate"):
        assert rt.push(burst) == []
    # no B came: the exact count says the cap dropped no complete match, only runs
    c = rt.counters
    assert (c.truncated_runs, c.truncated_matches, c.truncated_exact) == (63, 0, True)
    later = EventBatch.from_records([{"id": "a20", "type": "A", "ts": 20},
                                     {"id": "b21", "type": "B", "ts": 21}])
    out = rt.push(later) + rt.close()
    assert [m.bindings for m in out] == [{"a": ("a20",), "b": "b21"}]


def _csv(tmp_path: Path, n: int) -> str:
    path = tmp_path / f"s{n}.csv"
    path.write_text("ts,type,price\n" + "".join(
        f"{i * 10},S,{r['price']}\n" for i, r in enumerate(_rows(n))))
    return str(path)


def test_cli_truncate_says_when_the_drop_is_a_lower_bound(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["run", QUERY, "--input", _csv(tmp_path, 20_000),
                                   "--time-unit", "ms", "--on-cap", "truncate", "--count"])
    assert res.exit_code == 0, res.stderr
    want = len(evaluate(analyze(QUERY), EventBatch.from_records(_rows(17)),
                        max_runs_per_partition=None))
    assert res.stdout.splitlines()[0] == str(want)
    assert ("--on-cap truncate dropped at least 0 matches (a lower bound: they were not "
            f"enumerated) and {AT_CAP:,} partial matches (runs)") in res.stderr
