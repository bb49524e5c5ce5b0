"""benchmarks.chooser's session-10 modes do what they say: ``refit-seq`` recovers the chain's
SEQ constants from times made with known ones, and ``score --verbose`` marks a wrong choice."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import chooser, linkedcep
from kleene.plans import chain
from kleene.plans.registry import Stats


def _data(a: float, b: float) -> dict[str, Any]:
    """A measure run on a small ABC stream: the NFA's time its estimate (one unit = 1 µs per
    event), the chain's ``a x events + b x matches`` units; the tree slower than both."""
    events = linkedcep.abc_stream(400)
    stats = {"abc": chooser._stats_dict(Stats.from_events(events))}
    points = []
    for w in (20, 50, 100, 200):
        for g in (0, 2, 4):
            q = linkedcep.query_groups("abc")[g][0].format(window=f"{w} seconds")
            row: dict[str, Any] = {"set": "exp2 abc", "dataset": "abc", "label": f"{g} {w}",
                                   "query": q, "count_only": False, "events": len(events),
                                   "seconds": {}}
            est = chooser.chosen(row, stats)[1]
            st = chooser._stats(stats["abc"], False)
            from kleene.api import analyze
            from kleene.plans.registry import choose

            t = chain.chain_terms(choose(analyze(q), plan="chain", stats=st).plan, st)
            nfa_s = est["nfa"] * len(events) * 1e-6
            row["seconds"] = {"nfa": nfa_s,
                              "chain": (a * t["events"] + b * t["matches"]) * len(events)
                              * 1e-6,
                              "tree": 3 * nfa_s}
            points.append(row)
    return {"stats": stats, "points": points}


def test_refit_seq_recovers_the_constants() -> None:
    a, b = 1.3, 0.4
    data = _data(a, b)
    assert all(chooser._is_seq(r, data["stats"]) for r in data["points"])
    got_a, got_b = chooser.refit_seq(data)
    assert got_a == pytest.approx(a, rel=0.02) and got_b == pytest.approx(b, rel=0.05)


def test_verbose_score_marks_the_wrong_choices(capsys: pytest.CaptureFixture[str]) -> None:
    data = _data(1.0, 0.5)
    for row in data["points"]:  # make the tree the fastest: every choice is wrong
        row["seconds"]["tree"] = 0.01 * min(row["seconds"].values())
    [(set_, ok, n)] = chooser.score(data, verbose=True)
    out = capsys.readouterr().out
    assert (set_, ok, n) == ("exp2 abc", 0, len(data["points"]))
    assert out.count(" OFF ") == n and out.count("best tree") == n


def test_seq_region_scores_the_true_constants_best() -> None:
    """With times made by known constants, those constants choose right everywhere."""
    data = _data(1.3, 0.4)
    res = chooser.seq_region(data)
    assert res[(1.3, 0.4)] == len(data["points"]) == max(res.values())
    assert min(res.values()) < len(data["points"])  # some constants choose wrong


def _fwd_data(a: float, b: float, templates: tuple[str, ...] = (
        chooser.GEN_ABC, chooser.GEN_ABC_RETURN, chooser.GEN_ABC_TWO_SHARED)) -> dict[str, Any]:
    """Like :func:`_data` for the chain's general join, forward (a condition on each list
    element): the chain's time ``a x events + b x matches`` units, the NFA's its estimate."""
    from kleene.api import analyze
    from kleene.plans.registry import choose

    events = linkedcep.abc_stream(400)
    stats = {"abc": chooser._stats_dict(Stats.from_events(events))}
    points = []
    for tmpl in templates:
        for w in (5, 10, 20, 30, 40):
            q = tmpl.format(window=f"{w} seconds")
            row: dict[str, Any] = {"set": "general abc", "dataset": "abc", "label": f"W{w}",
                                   "query": q, "count_only": False, "events": len(events),
                                   "seconds": {}}
            est = chooser.chosen(row, stats)[1]
            st = chooser._stats(stats["abc"], False)
            t = chain.chain_terms(choose(analyze(q), plan="chain", stats=st).plan, st)
            row["seconds"] = {"nfa": est["nfa"] * len(events) * 1e-6,
                              "chain": (a * t["events"] + b * t["matches"]) * len(events)
                              * 1e-6}
            points.append(row)
    return {"stats": stats, "points": points}


def test_refit_fwd_recovers_the_constants_and_scores_them_best() -> None:
    """``refit-fwd``: the points of the forward walk through Kleene states are found (one
    list, or two sharing a type; not the singles-only walk, one ``*`` closure or two lists
    of different types),
    their constants recovered, and those constants score best."""
    a, b = 6.0, 1.2
    data = _fwd_data(a, b)
    assert all(chooser._is_fwd(r, data["stats"]) for r in data["points"])
    assert not any(chooser._is_seq(r, data["stats"]) for r in data["points"])
    single = {**data["points"][0], "query": chooser.SEQ3X_ABC.format(window="20 seconds")}
    assert not chooser._is_fwd(single, data["stats"])
    star = {**data["points"][0], "query": chooser.GEN_ABC_STAR.format(window="20 seconds")}
    assert not chooser._is_fwd(star, data["stats"])  # one `*` closure: its own pair
    two = {**data["points"][0], "query": chooser.GEN_ABC_TWO.format(window="20 seconds")}
    assert not chooser._is_fwd(two, data["stats"])  # two lists, no type shared
    got_a, got_b = chooser.refit_seq(data, chooser._is_fwd)
    assert got_a == pytest.approx(a, rel=0.02) and got_b == pytest.approx(b, rel=0.05)
    res = chooser.seq_region(data, pred=chooser._is_fwd, grid=(4.0, 8.0, 0.6, 1.8, 0.2))
    assert res[(a, b)] == len(data["points"]) == max(res.values())
    assert min(res.values()) < len(data["points"])


GROUPS = {  # refit-fwd --group: the ABC points of each group of session 12's walk shapes
    "lead": (chooser.GEN_ABC_STAR_FIRST, chooser.GEN_ABC_TWO_STARS),
    "last": (chooser.GEN_ABC_STAR_LAST,),
    "both": (chooser.GEN_ABC_STAR_BOTH,),
    "not": (chooser.GEN_ABC_NOT_LATE,),
}


@pytest.mark.parametrize("group", list(GROUPS))
def test_refit_fwd_finds_each_groups_points_and_scores_their_constants_best(group: str) -> None:
    """``refit-fwd --group``: the points of a ``*`` first / last state, both, or a NOT tested
    on each match are the group's (asked of the matcher: ``walk_group``) and no other's; a
    NOT the walk decides is the walk's own group; with times made by known constants those
    constants score best (``not``: the per-event constant held at ``CHAIN_FWD_EVENT``)."""
    a, b = (chain.CHAIN_FWD_EVENT, 2.0) if group == "not" else (1.6, 1.2)
    data = _fwd_data(a, b, GROUPS[group])
    for other in (*GROUPS, "fwd", "star"):
        assert all(chooser._in_group(other)(r, data["stats"]) == (other == group)
                   for r in data["points"]), other
    decided = {**data["points"][0], "query": chooser.GEN_ABC_NOT.format(window="20 seconds")}
    assert chooser.walk_group(decided, data["stats"]) == ("fwd", False)
    names, (a0, a1, b0, b1, _step) = chooser.FWD_GROUPS[group]
    grid = (a0, a1, 0.8, 2.4, 0.2) if group == "not" else (1.0, 2.2, 0.6, 1.8, 0.2)
    res = chooser.seq_region(data, pred=chooser._in_group(group), grid=grid)
    assert res[(a, b)] == len(data["points"]) == max(res.values()), names
    assert min(res.values()) < len(data["points"])


@pytest.mark.parametrize("text", ['{"figure": 1}', "[1, 2]", "not json", None])
def test_a_file_that_is_no_measure_run_is_one_line(tmp_path: Any, text: str | None,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """``refit-seq`` / ``score`` on another file (a FAEM figure's JSON, a typo) stop with one
    line naming it, not a KeyError traceback."""
    path = tmp_path / "x.json"
    if text is not None:
        path.write_text(text)
    for mode in ("refit-seq", "score"):
        with pytest.raises(SystemExit) as err:
            chooser.main([mode, str(path)])
        msg = str(err.value)
        assert msg.startswith(f"chooser: {path}: ") and "\n" not in msg
