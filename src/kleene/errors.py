"""kleene's exceptions: one root, each also a Python built-in so ``except ValueError`` works.

The tree::

    KleeneError
    ├── QueryError                      (ValueError)  -- the query text or builder input is wrong
    │   ├── QuerySyntaxError                          -- cannot be parsed; has line, column, caret
    │   └── QueryValidationError                      -- parses, but means nothing valid
    ├── InputError                      (ValueError)  -- event input is wrong (file, row, column)
    │   └── LateEventError                            -- an event arrived behind the watermark
    ├── EngineError                     (RuntimeError)-- evaluation failed
    │   └── CapacityError                             -- a configured cap on runs/matches was hit
    └── MissingExtraError               (ImportError) -- an optional extra (e.g. ``spark``) is absent

The CLI maps QueryError to exit code 1, InputError to 2 and EngineError to 3.
"""

from __future__ import annotations

from .diagnostics import Span, render


class KleeneError(Exception):
    """Root of every error kleene raises on purpose."""


class QueryError(KleeneError, ValueError):
    """The query is wrong. Carries the source text and a span when known."""

    def __init__(self, message: str, *, source: str = "", span: Span | None = None,
                 expected: tuple[str, ...] = ()) -> None:
        self.message = message
        self.source = source
        self.span = span
        self.expected = expected
        full = message
        if expected:
            full += "; expected " + (expected[0] if len(expected) == 1 else
                                     "one of: " + ", ".join(expected))
        self.description = full
        super().__init__(render(source, span, full) if source else full)

    @property
    def line(self) -> int | None:
        """1-based line of the problem, if known."""
        return self.span.line if self.span else None

    @property
    def column(self) -> int | None:
        """1-based column of the problem, if known."""
        return self.span.col if self.span else None


class QuerySyntaxError(QueryError):
    """The query text cannot be parsed."""


class QueryValidationError(QueryError):
    """The query parses but is not a valid pattern (unknown variable, bad Kleene index, ...)."""


class InputError(KleeneError, ValueError):
    """Event input is malformed. The message names the file, row and column where known."""

    def __init__(self, message: str, *, path: str | None = None, row: int | None = None,
                 column: str | None = None) -> None:
        self.path = path
        self.row = row
        self.column = column
        where = []
        if path is not None:
            where.append(str(path))
        if row is not None:
            where.append(f"row {row}")
        if column is not None:
            where.append(f"column {column!r}")
        self.reason = message
        super().__init__((": ".join([", ".join(where), message])) if where else message)


class LateEventError(InputError):
    """An event arrived later than the allowed lateness and the policy is to fail."""


class EngineError(KleeneError, RuntimeError):
    """Evaluation failed at run time."""


class CapacityError(EngineError):
    """A configured cap (live runs per partition, matches per event) was exceeded.

    ``cap`` says which (``"runs"``, ``"event"``, ``"call"``; None: not said) and ``gpos`` the
    global position of the event that reached it, when known: with ``on_cap='truncate'`` the
    runtime saturates the partition there (docs/engine.md, "Bounded memory")."""

    def __init__(self, message: str, *, cap: str | None = None, gpos: int | None = None,
                 built: int = 0) -> None:
        super().__init__(message)
        self.cap = cap
        self.gpos = gpos
        self.built = built
        """Matches of the capped event already counted or built (a lower bound of its own);
        for the runs cap, the live runs."""


class MissingExtraError(KleeneError, ImportError):
    """An optional extra is not installed; the message says what to ``pip install``."""


__all__ = [
    "CapacityError",
    "EngineError",
    "InputError",
    "KleeneError",
    "LateEventError",
    "MissingExtraError",
    "QueryError",
    "QuerySyntaxError",
    "QueryValidationError",
]
