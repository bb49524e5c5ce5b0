"""Surface syntaxes of the five seed systems, each parsing into the canonical AST.

One module per dialect; each exposes ``parse(text) -> ast.Query``:

=========  ==========================================================================
canonical  kleene's own language (docs/language.md)
sase       SASE/SASE+ (LinkedCEP paper): strategy inside WHERE
faem       FAEM: ``PATTERN Google; Microsoft+ ... WITHIN 5 UNIT``
logpp      Log++ (LogCEP): ``SELECT ... PATTERN (A, (B & C; 5 seconds), !D, E+)``
cem        SCEMon: ``PATTERN Sequence WITH A, B, C``
snoop      Extended SNOOP: ``SELECT * FROM SEQ(E1; E2) WHERE FILTER ... PICK ... CONSUMING``
match_recognize  SQL row pattern recognition: ``MATCH_RECOGNIZE (PARTITION BY ... PATTERN ...)``
=========  ==========================================================================

:func:`detect_dialect` recognises a dialect from unambiguous markers; text with none of them
is tried as canonical first and then as each dialect in turn (:func:`parse_auto`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ... import ast
from ...errors import QuerySyntaxError
from .. import parser as _canonical
from . import cem, faem, logpp, match_recognize, sase, snoop

DialectParser = Callable[[str], ast.Query]

DIALECTS: dict[str, DialectParser] = {
    "canonical": _canonical.parse,
    "sase": sase.parse,
    "faem": faem.parse,
    "logpp": logpp.parse,
    "cem": cem.parse,
    "snoop": snoop.parse,
    "match_recognize": match_recognize.parse,
}

_ALIASES = {"kleene": "canonical", "sase+": "sase", "log++": "logpp", "logcep": "logpp",
            "scemon": "cem", "extended-snoop": "snoop", "tesla": "snoop",
            "match-recognize": "match_recognize", "sql": "match_recognize"}

_MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("match_recognize", re.compile(r"\bMATCH_RECOGNIZE\b", re.IGNORECASE)),
    ("snoop", re.compile(r"^\s*SELECT\b.*?\bFROM\b", re.IGNORECASE | re.DOTALL)),
    ("logpp", re.compile(r"^\s*SELECT\b.*?\bPATTERN\b", re.IGNORECASE | re.DOTALL)),
    ("cem", re.compile(r"\bPATTERN\s+(Sequence|Conjunction|Disjunction)\s+WITH\b",
                       re.IGNORECASE)),
    ("sase", re.compile(r"\bWHERE\s+(strict-contiguity|partition-contiguity|"
                        r"skip-till-next-match|skip-till-any-match)\b", re.IGNORECASE)),
    ("faem", re.compile(r"\bWITHIN\s+[0-9.]+\s+UNITS?\b", re.IGNORECASE)),
)
_FALLBACK = ("sase", "faem", "logpp", "snoop", "cem")


def get_dialect(name: str) -> DialectParser:
    """The parse function of dialect ``name``; unknown names raise QuerySyntaxError."""
    key = _ALIASES.get(name.lower(), name.lower())
    if key == "auto":
        return parse_auto
    if key not in DIALECTS:
        raise QuerySyntaxError(f"unknown dialect {name!r}; choose one of: "
                               + ", ".join(DIALECTS))
    return DIALECTS[key]


def detect_dialect(text: str) -> str | None:
    """The dialect whose marker ``text`` carries (e.g. ``PATTERN Sequence WITH``), or None."""
    for name, marker in _MARKERS:
        if marker.search(text):
            return name
    return None


def parse_auto(text: str) -> ast.Query:
    """Parse text of an unnamed dialect.

    The dialect whose marker the text carries is tried first, then canonical, then every other
    dialect; if none accepts the text, the error of the first attempt is raised (so a canonical
    query with a typo gets the canonical message).
    """
    hinted = detect_dialect(text)
    order = ([hinted] if hinted else []) + [
        d for d in ("canonical", *_FALLBACK) if d != hinted]
    first: QuerySyntaxError | None = None
    for name in order:
        try:
            return DIALECTS[name](text)
        except QuerySyntaxError as err:
            if first is None:
                first = err
    assert first is not None
    raise first


__all__ = ["DIALECTS", "DialectParser", "detect_dialect", "get_dialect", "parse_auto"]
