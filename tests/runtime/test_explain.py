"""explain(): the automaton as text and as Graphviz DOT."""

from __future__ import annotations

from kleene.api import analyze
from kleene.plans.explain import explain

STOCK = ("PATTERN SEQ(Stock a, Stock+ b[], Stock c) WHERE b[1].price > a.price AND "
         "b[i].price > b[i-1].price AND c.price < a.price AND a.volume > 10 "
         "PARTITION BY symbol WITHIN 10 minutes USING strict-contiguity")


def test_text_shows_states_edges_predicates_and_masks() -> None:
    text = explain(analyze(STOCK))
    assert "state 0: single Stock a" in text
    assert "state 1: kleene {1,} Stock b" in text
    assert "vectorized mask a: a.volume > 10" in text
    assert "b[i].price > b[i-1].price" in text
    assert "proceed [c]: c.price < a.price" in text
    assert "partitioned by symbol" in text
    assert "never (the next event must be taken)" in text


def test_dot_is_a_digraph_with_edges() -> None:
    dot = explain(analyze(STOCK), dot=True)
    assert dot.startswith("digraph kleene {")
    assert "s0 -> s1" in dot and "s1 -> s1" in dot and "s2 -> accept" in dot
    assert dot.rstrip().endswith("}")


def test_logical_blocks_are_explained() -> None:
    text = explain(analyze("PATTERN AND(A a, SEQ(B b, C c), NOT(D d)) WHERE a.x > c.x"))
    assert "AND block (pushdown: proceed when all 2 items hold)" in text
    assert "on completion: a.x > c.x" in text
    assert "negation D d" in text


def test_logical_blocks_as_dot_tree() -> None:
    dot = explain(analyze("PATTERN SEQ(AND(A a, B b), C c) WITHIN 2 seconds"), dot=True,
                  plan="pda")
    assert dot.startswith("digraph kleene {")
    assert '[label="AND block (pushdown: proceed when all 2 items hold)"]' in dot
    assert '[label="take C c", shape=ellipse]' in dot
    assert "n0 -> n1" in dot
