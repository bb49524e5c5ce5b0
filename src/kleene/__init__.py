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

import importlib
from typing import TYPE_CHECKING, Any

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
from .udf import udf

if TYPE_CHECKING:
    from .api import CompiledQuery, analyze, compile, match, parse, to_text
    from .events import EventBatch, Match, TimeInfo
    from .events.readers import ReadReport, iter_events, read_events
    from .events.results import Matches
    from .events.writers import write_matches
    from .queryset import QuerySet, compile_many

__version__ = "0.1.0"

# Where each name of the façade lives; a name is imported on first use (PEP 562; ``udf`` is
# eager: its submodule's import would rebind ``kleene.udf`` to the module). So
# ``import kleene`` (and the command line's ``import kleene.cli.main``) imports neither numpy
# nor pyarrow before the caller decides how they start: the CLI sets one BLAS thread first
# (kleene.cli.main, "OPENBLAS_NUM_THREADS").
_LAZY = {
    **dict.fromkeys(("CompiledQuery", "analyze", "compile", "match", "parse", "to_text"), "api"),
    **dict.fromkeys(("EventBatch", "Match", "TimeInfo"), "events"),
    **dict.fromkeys(("ReadReport", "iter_events", "read_events"), "events.readers"),
    "Matches": "events.results",
    "write_matches": "events.writers",
    **dict.fromkeys(("QuerySet", "compile_many"), "queryset"),
}


def __getattr__(name: str) -> Any:
    """The façade's names on first use (:data:`_LAZY`)."""
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'kleene' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{where}", __name__), name)
    globals()[name] = value  # later uses are plain module attributes
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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
