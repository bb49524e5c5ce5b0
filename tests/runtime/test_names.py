"""RETURN items without alias are named by the canonical printer's text."""

from __future__ import annotations

import pytest

from kleene.lang import parse
from kleene.lang.printer import expr_text
from kleene.plan.names import expr_text as plan_expr_text

ITEMS = ("a.x, count(b), b[i].x, b[i-1].x, first(b).x, b[last-1].x, b[2].x, (a.x + 1) * 2, "
         "a.x - (a.y - 1), -a.x, a.x IS NOT NULL, a.x NOT IN (1, 2), a.x BETWEEN 1 AND 2, "
         "a.s LIKE 'a%', 1.5, TRUE, NULL, abs(a.x - 1), NOT (a.x > 1 OR a.y < 0), 'it''s'")


@pytest.mark.parametrize("item", parse(f"PATTERN SEQ(A a, B+ b[]) RETURN {ITEMS}").returns,
                         ids=lambda r: expr_text(r.expr))
def test_plan_names_agree_with_the_printer(item: object) -> None:
    expr = item.expr  # type: ignore[attr-defined]
    assert plan_expr_text(expr) == expr_text(expr)
