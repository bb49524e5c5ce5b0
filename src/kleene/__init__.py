"""kleene: complex event processing for Python, embedded or on Spark.

Example:
    >>> import kleene
    >>> q = kleene.compile("PATTERN SEQ(A a, B b) WHERE b.x > a.x WITHIN 10 seconds")
    >>> events = kleene.EventBatch.from_records([
    ...     {"type": "A", "ts": 1, "x": 1}, {"type": "B", "ts": 2, "x": 5}])
    >>> [m.bindings for m in q.run(events)]
    [{'a': 0, 'b': 1}]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .api import CompiledQuery, analyze, compile, match, parse, to_text
from .errors import (
    CapacityError,
    EngineError,
    InputError,
    KleeneError,
    LateEventError,
    MissingExtraError,
    QueryError,
    QuerySyntaxError,
    QueryValidationError,
)
from .events import EventBatch, Match, TimeInfo
from .events.readers import ReadReport, iter_events, read_events
from .events.results import Matches
from .events.writers import write_matches
from .udf import udf

if TYPE_CHECKING:
    from .queryset import QuerySet, compile_many

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """Query sets on first use (``kleene run`` of one query does not import them)."""
    if name in ("QuerySet", "compile_many"):
        from . import queryset

        return getattr(queryset, name)
    raise AttributeError(f"module 'kleene' has no attribute {name!r}")

__all__ = [
    "CapacityError",
    "CompiledQuery",
    "EngineError",
    "EventBatch",
    "InputError",
    "KleeneError",
    "LateEventError",
    "Match",
    "Matches",
    "MissingExtraError",
    "QueryError",
    "QuerySet",
    "QuerySyntaxError",
    "QueryValidationError",
    "ReadReport",
    "TimeInfo",
    "analyze",
    "compile",
    "compile_many",
    "iter_events",
    "match",
    "parse",
    "read_events",
    "to_text",
    "udf",
    "write_matches",
]
