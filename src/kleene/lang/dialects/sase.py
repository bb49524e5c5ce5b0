"""SASE / SASE+ (as in the LinkedCEP paper): the canonical syntax, plus the selection strategy
written as a WHERE conjunct and constraints continued with ``AND`` lines.

    PATTERN SEQ(A a, B+ b[], C c)
    WHERE skip-till-any-match
    AND [symbol]
    AND b[i].val < b[i-1].val
    WITHIN 50 seconds
"""

from __future__ import annotations

from ... import ast
from ..parser import Parser


class SaseParser(Parser):
    """Canonical grammar with the strategy allowed inside WHERE."""

    dialect = "sase"
    implicit_pattern = True
    strategy_in_where = True


def parse(text: str) -> ast.Query:
    """Parse SASE query text.

    Example:
        >>> parse("PATTERN SEQ(A a, B b) WHERE skip-till-next-match AND a.x = b.x").strategy
        <Strategy.SKIP_TILL_NEXT_MATCH: 'skip-till-next-match'>
    """
    return SaseParser(text).parse_query()


__all__ = ["SaseParser", "parse"]
