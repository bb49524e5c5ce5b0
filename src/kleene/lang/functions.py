"""The catalog of built-in scalar functions and aggregates (names and arities).

Lives in the language layer because the parser normalises built-in names to lower case; the
semantic layer (``kleene.semantic``) uses it to resolve calls and check arities. Implementations
belong to the evaluators, not here.
"""

from __future__ import annotations

#: Aggregates over a Kleene variable: ``count(v)``, ``sum(v.x)``, ``avg``, ``min``, ``max``.
AGGREGATES: dict[str, tuple[int, int]] = {
    "count": (1, 1),
    "sum": (1, 1),
    "avg": (1, 1),
    "min": (1, 1),
    "max": (1, 1),
}

#: Scalar built-ins: name -> (min args, max args); ``-1`` means any number.
SCALARS: dict[str, tuple[int, int]] = {
    "abs": (1, 1),
    "sqrt": (1, 1),
    "floor": (1, 1),
    "ceil": (1, 1),
    "round": (1, 2),
    "lower": (1, 1),
    "upper": (1, 1),
    "length": (1, 1),
    "ln": (1, 1),
    "log": (1, 2),
    "exp": (1, 1),
    "power": (2, 2),
    "sign": (1, 1),
    "coalesce": (1, -1),
    "nullif": (2, 2),
    "greatest": (1, -1),
    "least": (1, -1),
    "substr": (2, 3),
    "trim": (1, 1),
    "concat": (1, -1),
    "match_number": (0, 0),
    "classifier": (0, 0),
    "final": (1, 1),
}
"""``match_number()`` is only valid in RETURN of an AFTER MATCH SKIP query; ``classifier()``
and ``final(x)`` only in RETURN of an ``EMIT ROWS`` query (docs/semantics.md 19)."""

#: Every built-in name (scalars and aggregates); calls to these are lower-cased by the parser.
BUILTINS: frozenset[str] = frozenset(AGGREGATES) | frozenset(SCALARS)

__all__ = ["AGGREGATES", "BUILTINS", "SCALARS"]
