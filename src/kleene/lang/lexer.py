"""Lexer: query text -> a list of tokens with spans.

Hand-written (sqlglot style) so that every token carries a :class:`~kleene.diagnostics.Span`
and bad input becomes a :class:`~kleene.errors.QuerySyntaxError` with a caret, never a crash.
Keywords are not a separate token kind: the parser compares identifier text case-insensitively,
which keeps attribute names such as ``a.type`` or ``e.end`` usable.
"""

from __future__ import annotations

import enum

from ..diagnostics import Span
from ..errors import QuerySyntaxError
from ..frozen import dataclass
from ..syntax import IDENT_CHARS, IDENT_START, is_identifier

_DIGITS = frozenset("0123456789")


class Tok(enum.Enum):
    """Token kinds."""

    IDENT = "identifier"
    """A name: ``[A-Za-z_][A-Za-z0-9_]*`` (keywords too; the parser decides)."""
    NUMBER = "number"
    """An integer or decimal literal, optionally with an exponent."""
    STRING = "string"
    """A quoted string (``'...'`` or ``"..."``; the quote is doubled to escape it)."""
    STRATEGY = "strategy"
    """One of the hyphenated selection strategy names, e.g. ``skip-till-any-match``."""
    OP = "operator"
    """Punctuation and operators."""
    EOF = "end of query"
    """End of the text."""


@dataclass(frozen=True, slots=True)
class Token:
    """One token. ``value`` is the decoded text (strings without quotes)."""

    kind: Tok
    value: str
    span: Span
    raw: str = ""
    quote: str = ""

    def describe(self) -> str:
        """How the token is shown in an error message."""
        if self.kind is Tok.EOF:
            return "end of query"
        if self.kind is Tok.STRING:
            return f"string {self.raw}"
        return f"'{self.raw or self.value}'"


STRATEGY_NAMES = (
    "strict-contiguity",
    "partition-contiguity",
    "skip-till-next-match",
    "skip-till-any-match",
    "maximal-grouping",
)

# Longest first so that "<=" wins over "<".
_OPERATORS = (
    "<>", "!=", "<=", ">=", "==", "||",
    "(", ")", "[", "]", "{", "}", ",", ";", "&", "|", "!", "+", "-", "*", "/", "%",
    "=", "<", ">", ".", ":", "^", "?",
)

def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens; ``--`` starts a comment that runs to the end of the line.

    Example:
        >>> [t.value for t in tokenize("PATTERN A a -- one event")]
        ['PATTERN', 'A', 'a', '']
    """
    tokens: list[Token] = []
    i = 0
    n = len(text)
    lowered = text.lower()
    while i < n:
        c = text[i]
        if c in " \t\r\n\f\v":
            i += 1
            continue
        if text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        start = i
        if c in IDENT_START:
            strategy = _match_strategy(lowered, i)
            if strategy:
                i += len(strategy)
                tokens.append(Token(Tok.STRATEGY, strategy, Span.at(text, start, i),
                                    text[start:i]))
                continue
            while i < n and text[i] in IDENT_CHARS:
                i += 1
            word = text[start:i]
            tokens.append(Token(Tok.IDENT, word, Span.at(text, start, i), word))
            continue
        if c in _DIGITS or (c == "." and i + 1 < n and text[i + 1] in _DIGITS):
            i = _scan_number(text, i)
            raw = text[start:i]
            tokens.append(Token(Tok.NUMBER, raw, Span.at(text, start, i), raw))
            continue
        if c in "'\"":
            value, i = _scan_string(text, i)
            tokens.append(Token(Tok.STRING, value, Span.at(text, start, i), text[start:i], c))
            continue
        for op in _OPERATORS:
            if text.startswith(op, i):
                i += len(op)
                tokens.append(Token(Tok.OP, op, Span.at(text, start, i), op))
                break
        else:
            shown = repr(c)
            raise QuerySyntaxError(
                f"unexpected character {shown}", source=text, span=Span.at(text, i, i + 1),
                expected=("a name", "a number", "a quoted string", "an operator"))
    tokens.append(Token(Tok.EOF, "", Span.at(text, n, n), ""))
    return tokens


def _match_strategy(lowered: str, i: int) -> str:
    for name in STRATEGY_NAMES:
        if lowered.startswith(name, i):
            end = i + len(name)
            if end >= len(lowered) or lowered[end] not in IDENT_CHARS:
                return name
    return ""


def _scan_number(text: str, i: int) -> int:
    n = len(text)
    while i < n and text[i] in _DIGITS:
        i += 1
    if i + 1 < n and text[i] == "." and text[i + 1] in _DIGITS:
        i += 1
        while i < n and text[i] in _DIGITS:
            i += 1
    if i < n and text[i] in "eE":
        j = i + 1
        if j < n and text[j] in "+-":
            j += 1
        if j < n and text[j] in _DIGITS:
            i = j
            while i < n and text[i] in _DIGITS:
                i += 1
    return i


def _scan_string(text: str, i: int) -> tuple[str, int]:
    quote = text[i]
    start = i
    i += 1
    parts: list[str] = []
    n = len(text)
    while i < n:
        c = text[i]
        if c == quote:
            if i + 1 < n and text[i + 1] == quote:
                parts.append(quote)
                i += 2
                continue
            return "".join(parts), i + 1
        parts.append(c)
        i += 1
    raise QuerySyntaxError(
        "unterminated string", source=text, span=Span.at(text, start, start + 1),
        expected=(f"a closing {quote}",))


__all__ = ["STRATEGY_NAMES", "Tok", "Token", "is_identifier", "tokenize"]
