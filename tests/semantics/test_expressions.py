"""Expression semantics: three-valued logic, NULLs, types, division by zero (§5)."""

from __future__ import annotations

import pytest

from kleene.backends import BackendFn
from kleene.testing.timeline import Case, case

STREAM = "a1@1 a2@2 a3@3"
ATTRS = {
    "a1": {"x": None, "y": 0, "s": "abc", "f": 1.5},
    "a2": {"x": 3, "y": 2, "s": "xbc", "f": 2.0},
    "a3": {"x": 1, "y": 1, "s": None, "f": -1.0},
}


def expr(name: str, where: str, expected: list[str]) -> Case:
    return case(name, f"PATTERN A a WHERE {where}", STREAM, [f"a={e}" for e in expected],
                **ATTRS)


CASES = [
    expr("NULL compares to nothing", "a.x > 0", ["a2", "a3"]),
    expr("NOT NULL is NULL", "NOT (a.x > 2)", ["a3"]),
    expr("NULL OR TRUE is TRUE", "a.x > 2 OR a.y = 0", ["a1", "a2"]),
    expr("NULL AND FALSE is FALSE, so NOT of it is TRUE", "NOT (a.x > 0 AND a.y = 5)",
         ["a1", "a2", "a3"]),
    expr("IS NULL", "a.x IS NULL", ["a1"]),
    expr("IS NOT NULL", "a.s IS NOT NULL", ["a1", "a2"]),
    expr("a missing column is NULL", "a.nope IS NULL", ["a1", "a2", "a3"]),
    expr("a string never equals a number", "a.s = 3 OR a.s != 3", []),
    expr("int and float compare by value", "a.f = 2", ["a2"]),
    expr("division by zero is NULL", "a.y / a.y = 1", ["a2", "a3"]),
    expr("division by zero IS NULL", "a.x / a.y IS NULL", ["a1"]),
    expr("division is true division", "a.x / 2 = 1.5", ["a2"]),
    expr("modulo follows Python (sign of the divisor)", "(a.y - 4) % 3 = 2", ["a1"]),
    expr("BETWEEN is inclusive", "a.x BETWEEN 1 AND 3", ["a2", "a3"]),
    expr("NOT BETWEEN", "a.x NOT BETWEEN 2 AND 3", ["a3"]),
    expr("IN", "a.y IN (0, 2)", ["a1", "a2"]),
    expr("NOT IN with a NULL item is never TRUE", "a.y NOT IN (5, NULL)", []),
    expr("LIKE with %", "a.s LIKE 'a%'", ["a1"]),
    expr("LIKE with _", "a.s LIKE '_bc'", ["a1", "a2"]),
    expr("NOT LIKE on NULL is NULL", "a.s NOT LIKE 'z%'", ["a1", "a2"]),
    expr("arithmetic on NULL is NULL", "a.x + 1 > 0", ["a2", "a3"]),
    expr("abs", "abs(a.f) = 1", ["a3"]),
    expr("coalesce", "coalesce(a.x, 10) >= 3", ["a1", "a2"]),
    expr("lower / upper / length", "upper(a.s) = 'XBC' OR length(a.s) = 0", ["a2"]),
    expr("ts is the event time in microseconds", "a.ts >= 2000000", ["a2", "a3"]),
    expr("type is the event type", "a.type = 'A' AND a.y >= 1", ["a2", "a3"]),
    expr("unary minus", "-a.f > 0", ["a3"]),
    expr("min / max with two arguments are scalar", "max(a.y, 1) = 1 AND min(a.f, 0) < 0",
         ["a3"]),
    expr("least with a NULL is NULL", "least(a.x, 5) IS NULL", ["a1"]),
    expr("round half to even", "round(a.f) = 2", ["a1", "a2"]),
    expr("floor / ceil", "floor(a.f) = 1 OR ceil(a.f) = -1", ["a1", "a3"]),
    expr("sqrt of a negative number is NULL", "sqrt(a.f) IS NULL", ["a3"]),
    expr("concat, substr, trim", "concat(substr(a.s, 2), '!') = 'bc!' AND trim(a.s) = a.s",
         ["a1", "a2"]),
    expr("a TIMESTAMP literal is microseconds since the epoch",
         "a.ts < TIMESTAMP '1970-01-01 00:00:02'", ["a1"]),
]

TIMES = [
    case("an INTERVAL compares with a difference of timestamps",
         "PATTERN SEQ(A a, B b) WHERE b.ts - a.ts < INTERVAL 90 seconds",
         "a1@0 b1@89 b2@90",
         ["a=a1 b=b1"]),
    case("ANY binds an event of every type",
         "PATTERN SEQ(A a, ANY e) WHERE e.x = 1",
         "a1@1 b1@2 c1@3 a2@4",
         ["a=a1 e=b1", "a=a1 e=a2"],
         b1={"x": 1}, c1={"x": 2}, a2={"x": 1}),
]


@pytest.mark.parametrize("c", TIMES, ids=lambda c: c.name)
def test_times_and_any_type(backend: BackendFn, c: Case) -> None:
    c.check(backend)


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_expressions(backend: BackendFn, c: Case) -> None:
    c.check(backend)
