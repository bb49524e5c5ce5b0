"""The pipeline façade: text or builder AST -> parse -> analyze -> a compiled query -> matches.

Each step is owned by one layer (docs/architecture.md): ``kleene.lang`` parses and prints,
``kleene.semantic`` validates and resolves, ``kleene.backends`` picks the evaluator.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import ast
from .backends import DEFAULT_BACKEND, get_backend
from .errors import QueryValidationError
from .events import EventBatch, Match
from .semantic.analyzed import AnalyzedQuery


def parse(text: str, *, dialect: str | None = None) -> ast.Query:
    """Parse query text (canonical or a seed dialect) into the AST."""
    from .lang import parse as _parse

    return _parse(text, dialect=dialect)


def to_text(query: ast.Query) -> str:
    """Print a query in the canonical language."""
    from .lang import to_text as _to_text

    return _to_text(query)


QueryLike = Any
"""Query text (any dialect), an ``ast.Query``, or a builder (anything with ``.build()``)."""


def analyze(query: QueryLike, *, dialect: str | None = None,
            udfs: Mapping[str, Callable[..., Any]] | None = None,
            name: str | None = None,
            schema: Mapping[str, Mapping[str, Any]] | None = None) -> AnalyzedQuery:
    """Parse (if text) and validate a query; fill defaults.

    ``schema`` (event type -> attribute -> kind) enables attribute and type checks.
    """
    from .semantic import analyze as _analyze

    if isinstance(query, str):
        q = parse(query, dialect=dialect)
    elif isinstance(query, ast.Query):
        q = query
    elif callable(getattr(query, "build", None)):
        q = query.build()
    else:
        raise TypeError("a query is text, a kleene.ast.Query or a kleene.builder query, "
                        f"not {type(query).__name__}")
    return _analyze(q, udfs=udfs or {}, default_name=name, schema=schema)


@dataclass(frozen=True)
class CompiledQuery:
    """A validated query bound to an evaluation backend. Immutable; run it many times."""

    analyzed: AnalyzedQuery
    engine: str = DEFAULT_BACKEND
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The query's name (NAME clause, file name, or ``"query"``)."""
        return self.analyzed.name

    def run(self, events: EventBatch) -> list[Match]:
        """Evaluate over a bounded, ordered batch; matches in the documented output order.

        The options given to :func:`compile` (caps, ``on_cap``, lateness) go to the backend; a
        backend that takes no options (the oracle) refuses them with a clear error.
        """
        fn = get_backend(self.engine)
        if not self.options:
            return fn(self.analyzed, events)
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD
                   for p in inspect.signature(fn).parameters.values()):
            raise QueryValidationError(
                f"engine {self.engine!r} takes no options; got "
                f"{', '.join(sorted(self.options))}")
        return fn(self.analyzed, events, **self.options)

    def start(self, **options: Any) -> Any:
        """Start a streaming runtime (``push``/``advance``/``close``) on the automaton engine."""
        from .runtime.engine import start

        return start(self.analyzed, **{**self.options, **options})


def compile(query: QueryLike, *, dialect: str | None = None,
            udfs: Mapping[str, Callable[..., Any]] | None = None,
            engine: str = DEFAULT_BACKEND, name: str | None = None,
            schema: Mapping[str, Mapping[str, Any]] | None = None,
            **options: Any) -> CompiledQuery:
    """Parse, validate and bind a query to a backend.

    ``udfs`` registers user functions by name (the only way a query can call Python code).

    Example:
        >>> from kleene.builder import seq, event
        >>> q = compile(seq(event("A", "a"), event("B", "b")).where("b.x > a.x"))
        >>> q.name, list(q.analyzed.variables)
        ('query', ['a', 'b'])
    """
    analyzed = analyze(query, dialect=dialect, udfs=udfs, name=name, schema=schema)
    return CompiledQuery(analyzed, engine, options)


__all__ = ["CompiledQuery", "analyze", "compile", "parse", "to_text"]
