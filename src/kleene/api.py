"""The pipeline façade: text or builder AST -> parse -> analyze -> a compiled query -> matches.

Each step is owned by one layer (docs/architecture.md): ``kleene.lang`` parses and prints,
``kleene.semantic`` validates and resolves, ``kleene.backends`` picks the evaluator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import ast
from .backends import DEFAULT_BACKEND, Backend, get_backend_entry
from .errors import QueryValidationError
from .events import EventBatch, Match
from .semantic.analyzed import AnalyzedQuery

if TYPE_CHECKING:
    from .plans import CompiledPlan, Stats


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
    """A validated query bound to an evaluation backend (and, for the embedded engine, to its
    compiled plan). Immutable; ``run`` and ``start`` reuse the plan: compile once, run many."""

    analyzed: AnalyzedQuery
    engine: str = DEFAULT_BACKEND
    options: Mapping[str, Any] = field(default_factory=dict)
    compiled_plan: CompiledPlan | None = None
    """The chosen plan (backends that evaluate through the plan registry)."""

    @property
    def name(self) -> str:
        """The query's name (NAME clause, file name, or ``"query"``)."""
        return self.analyzed.name

    @property
    def plan(self) -> str | None:
        """The name of the chosen plan kind (``nfa``, ``pda``, ...), if the backend has plans."""
        return None if self.compiled_plan is None else self.compiled_plan.kind.name

    @property
    def backend(self) -> Backend:
        """The backend's registry entry (what it can do: streaming, options, plans)."""
        return get_backend_entry(self.engine)

    def run(self, events: EventBatch) -> list[Match]:
        """Evaluate over a bounded, ordered batch; matches in the documented output order.

        The options given to :func:`compile` (caps, ``on_cap``, lateness) go to the backend.
        """
        if self.compiled_plan is not None:
            from .plans import evaluate

            return evaluate(self.compiled_plan, events, **self.options)
        fn = self.backend.load()
        return fn(self.analyzed, events, **self.options)

    def start(self, **options: Any) -> Any:
        """Start a streaming runtime (``push``/``advance``/``close``) on the compiled plan."""
        if not self.backend.streaming:
            raise QueryValidationError(f"engine {self.engine!r} has no streaming runtime")
        target = self.compiled_plan if self.compiled_plan is not None else self.analyzed
        return self.backend.load_start()(target, **{**self.options, **options})


def compile(query: QueryLike, *, dialect: str | None = None,
            udfs: Mapping[str, Callable[..., Any]] | None = None,
            engine: str = DEFAULT_BACKEND, name: str | None = None,
            schema: Mapping[str, Mapping[str, Any]] | None = None,
            plan: str | None = None, stats: Stats | None = None,
            **options: Any) -> CompiledQuery:
    """Parse, validate, choose a plan and bind a query to a backend.

    ``udfs`` registers user functions by name (the only way a query can call Python code).
    ``plan`` forces one plan kind (``kleene explain`` lists them); otherwise the cheapest
    supported one is chosen, estimated from ``stats`` (kleene.plans.Stats) or defaults. An
    unknown engine or plan, a plan that does not support the query, or options given to a
    backend that takes none, fail here.

    Example:
        >>> from kleene.builder import seq, event
        >>> q = compile(seq(event("A", "a"), event("B", "b")).where("b.x > a.x"))
        >>> q.name, list(q.analyzed.variables), q.plan
        ('query', ['a', 'b'], 'nfa')
    """
    backend = get_backend_entry(engine)
    analyzed = analyze(query, dialect=dialect, udfs=udfs, name=name, schema=schema)
    if options and not backend.options:
        raise QueryValidationError(
            f"engine {engine!r} takes no options; got {', '.join(sorted(options))}")
    if (plan is not None or stats is not None) and not backend.plans:
        raise QueryValidationError(f"engine {engine!r} has no plans to choose from; plan= "
                                   "and stats= are for the automaton engine")
    compiled_plan = None
    if backend.plans:
        from .plans import choose

        compiled_plan = choose(analyzed, plan=plan, stats=stats)
    return CompiledQuery(analyzed, engine, options, compiled_plan)


__all__ = ["CompiledQuery", "analyze", "compile", "parse", "to_text"]
