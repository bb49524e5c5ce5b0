"""analyze(): variables in pattern order with their kinds, defaults, WHERE split, UDFs."""

from __future__ import annotations

import pytest

from kleene import ast
from kleene.errors import QueryValidationError
from kleene.lang import parse
from kleene.semantic import AnalyzedQuery, VarInfo, VarKind, analyze


def run(text: str, **kw: object) -> AnalyzedQuery:
    return analyze(parse(text), **kw)  # type: ignore[arg-type]


def test_variables_in_pattern_order_with_kinds() -> None:
    aq = run("PATTERN SEQ(A a, B+ b[], NOT(C c), SEQ(D d, E e)+, ANY x) WITHIN 5 s")
    assert list(aq.variables.values()) == [
        VarInfo(name="a", type="A", kind=VarKind.SINGLE, order=0),
        VarInfo(name="b", type="B", kind=VarKind.LIST, order=1),
        VarInfo(name="c", type="C", kind=VarKind.NEGATED, order=2),
        VarInfo(name="d", type="D", kind=VarKind.LIST, order=3),
        VarInfo(name="e", type="E", kind=VarKind.LIST, order=4),
        VarInfo(name="x", type=None, kind=VarKind.SINGLE, order=5),
    ]
    assert aq.positive_vars() == ["a", "b", "d", "e", "x"]


def test_or_and_any_branches_are_marked() -> None:
    aq = run("PATTERN SEQ(A a, OR(B b, C c), ANY(1, D d, E e), ANY(2, F f, G g))")
    assert {n: v.in_or_branch for n, v in aq.variables.items()} == {
        "a": False, "b": True, "c": True, "d": True, "e": True, "f": False, "g": False}


def test_predicates_may_relate_branches_of_any_k_greater_than_one() -> None:
    run("PATTERN ANY(2, A a, B b, C c) WHERE a.x = b.x")
    with pytest.raises(QueryValidationError, match="different branches"):
        run("PATTERN ANY(1, A a, B b) WHERE a.x = b.x")


def test_defaults_are_filled() -> None:
    aq = run("PATTERN SEQ(A a, B b)")
    assert aq.strategy is ast.Strategy.SKIP_TILL_ANY_MATCH
    assert aq.emit is ast.Emit.ALL
    assert aq.name == "query"
    assert aq.conjuncts == () and aq.equivalence == ()


def test_explicit_strategy_and_emit_are_kept() -> None:
    aq = run("PATTERN SEQ(A a, B b) USING strict-contiguity EMIT RECENT")
    assert aq.strategy is ast.Strategy.STRICT_CONTIGUITY
    assert aq.emit is ast.Emit.RECENT


def test_name_clause_then_default_name_then_query() -> None:
    assert run("NAME rise PATTERN A a", default_name="file").name == "rise"
    assert run("PATTERN A a", default_name="file").name == "file"
    assert run("PATTERN A a").name == "query"


def test_where_is_split_into_conjuncts_and_equivalence() -> None:
    aq = run("PATTERN SEQ(A a, B b) WHERE [symbol] AND a.x > 1 AND (b.y < 2 OR b.y > 5) "
             "AND [venue, symbol]")
    x_gt_1 = ast.Binary(">", ast.AttrRef("a", "x"), ast.Literal(1))
    y_or = ast.Binary("or", ast.Binary("<", ast.AttrRef("b", "y"), ast.Literal(2)),
                      ast.Binary(">", ast.AttrRef("b", "y"), ast.Literal(5)))
    assert aq.conjuncts == (x_gt_1, y_or)
    assert aq.equivalence == ("symbol", "venue")


def test_chained_comparison_becomes_two_conjuncts() -> None:
    aq = run("PATTERN A a WHERE 20 < a.p < 50")
    assert aq.conjuncts == (ast.Binary("<", ast.Literal(20), ast.AttrRef("a", "p")),
                            ast.Binary("<", ast.AttrRef("a", "p"), ast.Literal(50)))


def test_udfs_are_resolved_and_kept() -> None:
    def similarity(x: str, y: str) -> float:
        return 1.0

    aq = run("PATTERN SEQ(A a, B b) WHERE similarity(a.t, b.t) > 0.5",
             udfs={"similarity": similarity})
    assert aq.udfs == {"similarity": similarity}


def test_udf_may_take_whole_events() -> None:
    run("PATTERN SEQ(A a, B b) WHERE speed(a, b) > 5", udfs={"speed": lambda a, b: 0})


@pytest.mark.parametrize(("udfs", "message"), [
    ({"not ok": len}, "UDF name 'not ok' must be an identifier"),
    ({"abs": len}, "UDF name 'abs' clashes with the built-in function 'abs'"),
    ({"f": 3}, "UDF 'f' is not callable (int)"),
])
def test_bad_udf_registrations(udfs: dict[str, object], message: str) -> None:
    with pytest.raises(QueryValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run("PATTERN A a", udfs=udfs)


def test_udf_names_are_case_sensitive() -> None:
    with pytest.raises(QueryValidationError, match="unknown function 'Sim'"):
        run("PATTERN SEQ(A a, B b) WHERE Sim(a.t, b.t) > 0.5", udfs={"sim": len})


def test_min_max_with_two_arguments_are_scalar() -> None:
    run("PATTERN SEQ(A a, B b) WHERE max(a.x, b.x) > 1 AND min(a.x, 1, 2) < 0")


def test_windows_on_negation_satisfy_the_negation_rule() -> None:
    run("PATTERN SEQ(A a, SEQ(B b, NOT(C c)) WITHIN 5 seconds)")
    run("PATTERN SEQ(NOT(C c), B b) WITHIN 5 events")
    run("PATTERN SEQ(A a, SEQ(NOT(C c), B b))")  # A bounds it from the left


def test_schema_checks_accept_well_typed_queries() -> None:
    schema = {"Stock": {"price": float, "symbol": "string", "ts": "timestamp"}}
    run("PATTERN SEQ(Stock a, Stock+ b[]) WHERE a.symbol = 'IBM' AND avg(b.price) > a.price "
        "AND a.ts < TIMESTAMP '2024-01-01 00:00:00' AND b[i].price > b[i-1].price * 1.1 "
        "AND lower(a.symbol) LIKE 'i%'", schema=schema)


def test_analyze_needs_a_query() -> None:
    with pytest.raises(TypeError):
        analyze("PATTERN A a")  # type: ignore[arg-type]


def test_analyzed_query_is_picklable() -> None:
    import pickle

    aq = run("PATTERN SEQ(A a, B+ b[]) WHERE [s] AND a.x > 1")
    again = pickle.loads(pickle.dumps(aq))
    assert again.query == aq.query and again.variables == aq.variables


def test_api_analyze_and_compile_use_this_layer() -> None:
    from kleene import api

    aq = api.analyze("PATTERN Google; Microsoft+ WITHIN 5 UNIT", name="stocks")
    assert aq.name == "stocks"
    assert aq.variables["Microsoft"].kind is VarKind.LIST
    assert aq.within == ast.Window(5, ast.TimeUnit.EVENTS)


def test_a_window_on_a_not_itself_is_rejected_like_the_oracle_does() -> None:
    """Found while making plans plain data: this query was accepted, then the engine failed
    with a bare AssertionError while the oracle rejected it."""
    import pytest

    from kleene.api import analyze
    from kleene.errors import QueryValidationError

    with pytest.raises(QueryValidationError, match=r"NOT\(B n\).* is inside WITHIN; a negation "
                                                   r"is only allowed inside SEQ or AND"):
        analyze("PATTERN SEQ(A a, NOT(B n) WITHIN 5 seconds, C c)")
    # a window on a sub-pattern that holds a NOT stays valid
    analyze("PATTERN SEQ(A a, SEQ(B b, NOT(C n), D d) WITHIN 5 seconds, E e)")
