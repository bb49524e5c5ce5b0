"""``kleene run --plan chain`` on the Kleene explosion: the chain's matches go to the writer
as blocks, expanded a chunk at a time (docs/engine.md, "Streaming output"); the bytes are
the NFA's (JSON Lines and CSV, with and without --stream), for the forward walk's shapes too
(a `*` closure, two lists of one type, a NOT that is not trailing, a `*` last state, a `*`
first state)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from kleene.cli.main import cli

QUERY = ("PATTERN SEQ(S a, S+ b[], S c) WHERE c.price > a.price PARTITION BY sym "
         "WITHIN 9 seconds USING skip-till-any-match")


SEQ3 = ("PATTERN SEQ(S a, S b, S c) PARTITION BY sym WITHIN 30 seconds "
        "USING skip-till-any-match")


GENERAL = ("PATTERN SEQ(S a, S+ b[], S c) WHERE b[i].price >= a.price AND c.price < a.price "
           "PARTITION BY sym WITHIN 12 seconds USING skip-till-any-match")
"""The general join (a condition per list element): the forward walk's blocks."""

GENERAL_RETURN = GENERAL + " RETURN a.price AS p0, count(b) AS nb, max(b.price) AS top"
"""The same with RETURN: blocks that build Matches with values as they are written."""

STAR = ("PATTERN SEQ(S a, S* b[], S c) WHERE b[i].price >= a.price AND c.price < a.price "
        "PARTITION BY sym WITHIN 12 seconds USING skip-till-any-match")
"""A ``*`` closure (the last state's sources: the first and the list): the walk's blocks."""

TWO_LISTS = ("PATTERN SEQ(S a, S+ b[], S+ c[], S d) WHERE b[i].price >= a.price AND "
             "c[i].price <= a.price PARTITION BY sym WITHIN 8 seconds "
             "USING skip-till-any-match")
"""Two Kleene states of one type (one event in both partitions): the walk over position
sequences."""


NOT_INSIDE = ("PATTERN SEQ(S a, S+ b[], NOT S n, S c) WHERE n.price = 9 AND "
              "b[i].price >= a.price AND c.price < a.price PARTITION BY sym WITHIN 12 seconds "
              "USING skip-till-any-match")
"""A NOT that is not trailing: the walk tests each match against the history (its blocks
hold a copy of it)."""


STAR_LAST = ("PATTERN SEQ(S a, S+ b[], S* c[]) WHERE b[i].price >= a.price AND "
             "c[i].price < a.price PARTITION BY sym WITHIN 6 seconds USING skip-till-any-match")
"""A ``*`` last state: matches end in ``b`` (``c`` empty) or in ``c``."""


STAR_FIRST = ("PATTERN SEQ(S* a[], S b, S c) WHERE a[i].price >= b.price AND "
              "c.price <= b.price PARTITION BY sym WITHIN 8 seconds USING skip-till-any-match")
"""A ``*`` first state: matches start in ``a`` or (``a`` empty) in ``b``."""


@pytest.mark.parametrize("query", [QUERY, SEQ3, GENERAL, GENERAL_RETURN, STAR, TWO_LISTS,
                                   NOT_INSIDE, STAR_LAST, STAR_FIRST],
                         ids=["kleene", "seq3", "general", "general_return", "star",
                              "two_lists", "not_inside", "star_last", "star_first"])
@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
@pytest.mark.parametrize("stream", [False, True])
def test_chain_output_is_the_nfas_byte_for_byte(tmp_path: Path, fmt: str,
                                                stream: bool, query: str) -> None:
    rng = random.Random(8)
    rows = ["id,ts,sym,price"] + [f"r{i},{i // 2},{rng.choice('xy')},{rng.randint(1, 9)}"
                                  for i in range(70)]
    src = tmp_path / "in.csv"
    src.write_text("\n".join(rows) + "\n")
    outs = {}
    for plan in ("nfa", "chain"):
        dest = tmp_path / f"{plan}.{fmt}"
        args = ["run", query, "-i", str(src), "--event-type", "S", "--id-col", "id",
                "--time-unit", "s", "--plan", plan, "-o", str(dest), "--format", fmt, "-q"]
        if stream:
            args += ["--stream", "--batch-size", "16"]
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 0, res.output
        outs[plan] = dest.read_bytes()
    assert outs["chain"] == outs["nfa"]
    assert outs["nfa"].count(b"\n") > 2_000


STARTS = (
    ("PATTERN SEQ(S* a[], S* b[], S c) WHERE a[i].price > c.price AND b[i].price <= c.price "
     "PARTITION BY sym WITHIN 7 seconds USING skip-till-any-match"),
    ("PATTERN SEQ(S* a[], S b, S* c[]) WHERE a[i].price >= b.price AND c[i].price < b.price "
     "PARTITION BY sym WITHIN 6 seconds USING skip-till-any-match"),
)
"""Two leading ``*`` states (a match starts in ``a``, ``b`` or ``c``) and a ``*`` first with
a ``*`` last state (it starts in ``a`` or ``b``, ends in ``b`` or ``c``): the walk's blocks
(tests/runtime/test_chain_fwd_starts.py)."""


@pytest.mark.parametrize("query", STARTS, ids=["two_stars", "star_both"])
@pytest.mark.parametrize("stream", [False, True])
def test_several_start_states_write_the_nfas_bytes(tmp_path: Path, stream: bool,
                                                   query: str) -> None:
    rng = random.Random(13)
    rows = ["id,ts,sym,price"] + [f"r{i},{i // 2},{rng.choice('xy')},{rng.randint(1, 9)}"
                                  for i in range(70)]
    src = tmp_path / "in.csv"
    src.write_text("\n".join(rows) + "\n")
    outs = {}
    for plan in ("nfa", "chain"):
        dest = tmp_path / f"{plan}.jsonl"
        args = ["run", query, "-i", str(src), "--event-type", "S", "--id-col", "id",
                "--time-unit", "s", "--plan", plan, "-o", str(dest), "--format", "jsonl",
                "-q"]
        if stream:
            args += ["--stream", "--batch-size", "16"]
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 0, res.output
        outs[plan] = dest.read_bytes()
    assert outs["chain"] == outs["nfa"]
    assert outs["nfa"].count(b"\n") > 2_000
