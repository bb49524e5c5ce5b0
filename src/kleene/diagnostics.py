"""Source spans and caret rendering for user-facing errors.

Every AST node and token carries a :class:`Span`; errors render it under the offending source
line, lark/sqlglot style::

    Line 1, column 18: expected ')' but found 'WHERE'
      PATTERN SEQ(A a WHERE a.x > 1
                       ^^^^^
"""

from __future__ import annotations

from .frozen import dataclass


@dataclass(frozen=True, slots=True)
class Span:
    """A half-open character range ``[start, end)`` in the query text, with 1-based line/col."""

    start: int
    end: int
    line: int
    col: int

    @staticmethod
    def at(text: str, start: int, end: int | None = None) -> Span:
        """Build a span from offsets, computing line and column from ``text``."""
        end = start if end is None else end
        line = text.count("\n", 0, start) + 1
        col = start - (text.rfind("\n", 0, start) + 1) + 1
        return Span(start, max(end, start), line, col)

    def merge(self, other: Span | None) -> Span:
        """The smallest span covering both."""
        if other is None:
            return self
        first, last = (self, other) if self.start <= other.start else (other, self)
        return Span(first.start, max(self.end, other.end), first.line, first.col)


def render(text: str, span: Span | None, message: str) -> str:
    """Render ``message`` with the source line of ``span`` and a caret underline.

    Example:
        >>> print(render("PATTERN A a WHERE", Span.at("PATTERN A a WHERE", 12, 17), "unexpected end"))
        Line 1, column 13: unexpected end
          PATTERN A a WHERE
                      ^^^^^
    """
    if span is None:
        return message
    lines = text.split("\n")
    line_no = min(max(span.line, 1), len(lines))
    src = lines[line_no - 1] if lines else ""
    col = max(span.col, 1)
    width = max(1, min(span.end - span.start, max(1, len(src) - col + 1)))
    if span.end - span.start <= 0:
        width = 1
    caret = " " * (col - 1) + "^" * width
    return f"Line {span.line}, column {span.col}: {message}\n  {src}\n  {caret}"
