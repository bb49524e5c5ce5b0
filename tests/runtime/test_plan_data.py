"""Plans are plain data (issue 11, item 1): what the matchers need is compiled into the plan --
the group plan's negation tree (:class:`NotSite`) and the kernel's inline predicate sources --
and no plan carries the analyzed query."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from kleene.api import analyze
from kleene.plan.automaton import compile_plan, compile_union_plan
from kleene.plan.blocks import NotSite
from kleene.plan.groups import compile_group_plan
from kleene.plans import choose, evaluate
from kleene.runtime.engine import Runtime
from kleene.runtime.groups import GroupMatcher
from kleene.runtime.linear import LinearMatcher
from kleene.testing.oracle import evaluate as oracle

from .helpers import match_dicts, random_stream


def _sites(text: str) -> tuple[NotSite, ...]:
    return compile_group_plan(analyze(text)).not_sites


def test_not_in_a_seq_is_bounded_by_both_sides() -> None:
    (s,) = _sites("PATTERN SEQ(AND(A a, D d), NOT(B n), C c) WITHIN 4 seconds")
    assert s == NotSite(0, False, ("a", "d"), ("c",), True, (4_000_000, False),
                        ("a", "d", "c"), ())


def test_not_directly_in_an_and() -> None:
    (s,) = _sites("PATTERN AND(A a, C c, NOT(B n)) WITHIN 5 EVENTS")
    assert s == NotSite(0, True, (), ("a", "c"), True, (5, True), ("a", "c"), ())


def test_leading_not_under_a_sub_pattern_window_in_an_or_branch() -> None:
    (s,) = _sites("PATTERN OR(SEQ(NOT(B n), A a, C c) WITHIN 3 seconds, AND(D d, C e)) "
                  "WITHIN 1 minute")
    # the innermost window bounds the open left end; it applies only when its branch binds
    assert s == NotSite(0, False, (), ("a", "c"), False, (3_000_000, False), ("a", "c"),
                        (("a", "c"),))


def test_sites_in_check_order_with_nested_seqs_spliced() -> None:
    # the outer SEQ's own NOT is checked before the NOT inside its AND item; the nested
    # SEQ(C c, D f) is spliced into the outer one (docs/semantics.md 4)
    outer, inner = _sites("PATTERN SEQ(AND(A a, NOT(B m), D d), NOT(B n), SEQ(C c, D f))")
    assert (outer.index, outer.left, outer.right, outer.window) == (1, ("a", "d"), ("c", "f"),
                                                                    None)
    assert (inner.index, inner.in_and, inner.right) == (0, True, ("a", "d"))


def test_the_matcher_classifies_from_the_sites() -> None:
    m = Runtime(choose(analyze("PATTERN SEQ(AND(A a, D d), NOT(B n), C c, NOT(B k)) "
                               "WITHIN 4 seconds"))).matcher
    assert isinstance(m, GroupMatcher)
    # the middle NOT is decided in the automaton; the trailing one (empty right side) is not
    assert set(m.fast) == {0}
    assert [s[0] for s in m._slow_sites] == [1]


COMPILERS: list[tuple[Callable[[Any], Any], str]] = [
    (compile_plan, "PATTERN SEQ(A a, NOT(B n), C c) WHERE c.x > a.x WITHIN 5 seconds"),
    (compile_union_plan, "PATTERN OR(SEQ(A a, C c), SEQ(B b, C d)) WITHIN 5 seconds"),
    (compile_group_plan, "PATTERN AND(A a, NOT(B n), C c) WITHIN 5 seconds"),
]


@pytest.mark.parametrize(("compile_fn", "text"), COMPILERS)
def test_plans_do_not_carry_the_query(compile_fn: Callable[[Any], Any], text: str) -> None:
    plan = compile_fn(analyze(text))
    plans = [plan, *getattr(plan, "branches", ())]
    for p in plans:
        assert "analyzed" not in {f.name for f in dataclasses.fields(p)}
        assert not hasattr(p, "analyzed")


KLEENE = ("PATTERN SEQ(A a, B+ b[], C c) "
          "WHERE b[i].x > b[i-1].x AND c.x > a.x AND c.k = b[2].k WITHIN 6 seconds")


def test_take_predicates_carry_their_inline_source() -> None:
    plan = compile_plan(analyze(KLEENE))
    (b_iter,) = plan.vars["b"].take
    # b[i-1] is the parent run's last element; as the first element there is none
    # (a boolean ordered against a number is NULL: the type test runs when the comparison holds)
    assert b_iter.inline == (None, "((_q0b_1 := e[5]) > (_q0b_2 := B[1][-1][5]) and (_type(_q0b_1) is not _bool is not _type(_q0b_2) or _bb(_q0b_1, _q0b_2)))")
    c_x, c_k = plan.vars["c"].take
    assert c_x.inline == ("((_q1a_1 := e[5]) > (_q1a_2 := B[0][5]) and (_type(_q1a_1) is not _bool is not _type(_q1a_2) or _bb(_q1a_1, _q1a_2)))", None)
    # an element by absolute index >= 2 of another list has no inline form
    assert c_k.inline == (None, None)
    assert dict(c_x.inline_env)["_cmp"] is dict(b_iter.inline_env)["_cmp"]


def test_the_kernel_assembles_the_inline_sources() -> None:
    m = Runtime(choose(analyze(KLEENE))).matcher
    assert isinstance(m, LinearMatcher) and m.kernel is not None
    src = m.kernel.source
    assert "ok = ((_q0b_1 := e[5]) > (_q0b_2 := B[1][-1][5]) and " in src
    # c's take edge has a predicate with no inline form: the edge calls the compiled ones
    assert ":= B[0][5])" not in src
    aq = analyze(KLEENE)
    for seed in range(15):
        batch = random_stream(seed, n=30, types="ABC")
        assert match_dicts(evaluate(aq, batch)) == match_dicts(oracle(aq, batch)), seed
