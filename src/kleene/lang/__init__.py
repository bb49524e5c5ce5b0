"""The query language: lexer, parser, printer and the seed dialects.

``parse(text, dialect=None)`` returns the one AST (:mod:`kleene.ast`) for every surface syntax;
``to_text(query)`` prints it in the canonical language so that ``parse(to_text(q)) == q``.
"""

from __future__ import annotations

from .. import ast
from .dialects import DIALECTS, detect_dialect, get_dialect, parse_auto
from .parser import parse_expr, parse_pattern
from .printer import to_text


def parse(text: str, *, dialect: str | None = None) -> ast.Query:
    """Parse query text in the canonical language or one of the dialects.

    ``dialect`` is one of ``canonical``, ``sase``, ``faem``, ``logpp``, ``cem``, ``snoop``;
    ``None`` auto-detects (falling back to canonical). Errors are
    :class:`~kleene.errors.QuerySyntaxError` with a caret under the problem.

    Example:
        >>> q = parse("PATTERN SEQ(A a, B+ b[]) WHERE b[i].x > b[i-1].x WITHIN 5 seconds")
        >>> print(to_text(q))
        PATTERN SEQ(A a, B+ b[])
        WHERE b[i].x > b[i-1].x
        WITHIN 5 seconds
    """
    if not isinstance(text, str):
        raise TypeError(f"query text must be a str, not {type(text).__name__}")
    if dialect is None:
        return parse_auto(text)
    return get_dialect(dialect)(text)


__all__ = ["DIALECTS", "detect_dialect", "parse", "parse_expr", "parse_pattern", "to_text"]
