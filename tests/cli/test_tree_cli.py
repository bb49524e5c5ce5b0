"""``--tree SHAPE`` on ``kleene run`` and ``kleene explain``: the tree plan's shape (left,
right, bushy, inner, adaptive or a bracket string); a bad shape is a one-line error, exit 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kleene.cli.main import cli

QUERY = "PATTERN SEQ(A a, B b, C c, D d) WHERE a.x < d.x WITHIN 10 EVENTS"
EVENTS = "ts,type,x\n1,A,1\n2,B,2\n3,C,3\n4,A,0\n5,D,4\n6,C,1\n7,D,9\n8,B,1\n9,C,2\n10,D,5\n"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(("shape", "tree"), [
    ("left", "(((a;b);c);d)"), ("right", "(a;(b;(c;d)))"), ("bushy", "((a;b);(c;d))"),
    ("inner", "(a;((b;c);d))"), ("((a;(b;c));d)", "((a;(b;c));d)")])
def test_explain_shows_the_forced_shape(shape: str, tree: str) -> None:
    code, out, err = invoke("explain", QUERY, "--tree", shape)
    assert (code, err) == (0, "")
    assert "plan: tree (forced" in out
    assert f"shape {shape} (forced):" in out
    # the forced shape is the one marked, and its tree is printed node by node
    marked = [ln for ln in out.splitlines() if ln.startswith("  * tree:")]
    assert len(marked) == 1 and tree in marked[0]
    assert f"SEQ {tree}" in out


def test_explain_adaptive() -> None:
    code, out, _ = invoke("explain", QUERY, "--tree", "adaptive")
    assert code == 0
    assert ("(adaptive: the starting shape, re-estimated every 5 events from the observed "
            "event mix; switches to a shape estimated at least 20% cheaper, migrating the "
            "live window):") in out


@pytest.mark.parametrize("shape", ["left", "right", "bushy", "inner", "adaptive",
                                   "((a;b);(c;d))"])
def test_run_with_every_shape_gives_the_oracle_matches(tmp_path: Path, shape: str) -> None:
    p = tmp_path / "e.csv"
    p.write_text(EVENTS)
    code, want, _ = invoke("run", QUERY, "-i", str(p), "--engine", "oracle", "-q")
    assert code == 0 and len(want.splitlines()) == 8
    code, got, err = invoke("run", QUERY, "-i", str(p), "--tree", shape)
    assert code == 0
    assert [json.loads(x) for x in got.splitlines()] == [json.loads(x) for x in
                                                          want.splitlines()]
    assert f"plan tree:{shape}" in err  # the summary names the shape


@pytest.mark.parametrize(("args", "message"), [
    (["--tree", "zig"], "kleene: query error: unknown tree shape 'zig'; use left, right, bushy, "
                        "inner, adaptive or a bracket string over the pattern's items such as "
                        "((a;b);(c;d))\n"),
    (["--tree", "((a;b);(c;x))"], "kleene: query error: tree '((a;b);(c;x))': 'x' is not an "
                                  "item of the pattern (a, b, c, d)\n"),
    (["--tree", "((a;b);c)"], "kleene: query error: tree '((a;b);c)' must name every item of "
                              "the pattern once (a, b, c, d)\n"),
    (["--tree", "((a;b);(c;d)"], "kleene: query error: tree '((a;b);(c;d)': expected ')'; a "
                                 "node joins exactly two children\n"),
    (["--tree", "((a&b);(c;d))"], "kleene: query error: tree: '&' joins items of a SEQ; use "
                                  "';'\n"),
    (["--tree", " "], "kleene: usage error: --tree: empty shape; use left, right, bushy, inner, "
                      "adaptive or a bracket string such as '((a;b);(c;d))'\n"),
    (["--tree", "left", "--plan", "nfa"], "kleene: usage error: --tree is a shape of the tree "
                                          "plan; it cannot be combined with --plan nfa\n"),
])
def test_bad_shapes_exit_1_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    p = tmp_path / "e.csv"
    p.write_text(EVENTS)
    for cmd in (["explain", QUERY], ["run", QUERY, "-i", str(p)]):
        code, out, err = invoke(*cmd, *args)
        assert (code, out, err) == (1, "", message), cmd


def test_tree_flag_refusals(tmp_path: Path) -> None:
    p = tmp_path / "e.csv"
    p.write_text(EVENTS)
    code, _, err = invoke("run", QUERY, "-i", str(p), "--tree", "left", "--engine", "oracle")
    assert (code, err) == (1, "kleene: usage error: --tree chooses among the automaton "
                              "engine's plans; engine 'oracle' has none\n")
    code, _, err = invoke("explain", "PATTERN SEQ(A a, NOT(B b), C c)", "--tree", "left")
    assert (code, err) == (1, "kleene: query error: plan 'tree' does not support query "
                              "'query': NOT (the tree keeps no negation buffers yet)\n")
    code, _, err = invoke("explain", QUERY, "--tree", "left", "--spark")
    assert (code, err) == (1, "kleene: usage error: --tree explains one query on the embedded "
                              "engine (not a query set, not --spark)\n")
    code, _, err = invoke("run", QUERY, "PATTERN SEQ(A a, B b)", "-i", str(p), "--tree", "left")
    assert (code, err) == (1, "kleene: usage error: --tree is for one query on the embedded "
                              "engine (not a query set, not --spark)\n")
    # --plan tree with --tree is the same as --tree alone
    code, out, _ = invoke("explain", QUERY, "--plan", "tree", "--tree", "right")
    assert code == 0 and "shape right (forced):" in out
