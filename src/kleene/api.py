"""The pipeline façade: text or builder AST -> parse -> analyze -> a compiled query -> matches.

Each step is owned by one layer (docs/architecture.md): ``kleene.lang`` parses and prints,
``kleene.semantic`` validates and resolves, ``kleene.backends`` picks the evaluator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any

from . import ast
from .backends import DEFAULT_BACKEND, Backend, get_backend_entry
from .errors import QueryValidationError
from .events import EventBatch, Match, TimeInfo
from .events.results import Matches
from .frozen import dataclass
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


SchemaLike = Any
"""What ``schema=`` accepts: an :class:`~kleene.semantic.schema.InputSchema`, the events the
query will run on (a :class:`kleene.EventBatch`), or a mapping event type -> attribute -> kind."""


def analyze(query: QueryLike, *, dialect: str | None = None,
            udfs: Mapping[str, Callable[..., Any]] | None = None,
            name: str | None = None,
            schema: SchemaLike | None = None) -> AnalyzedQuery:
    """Parse (if text) and validate a query; fill defaults.

    ``schema`` enables attribute, type and kind checks: an ``InputSchema`` or an
    ``EventBatch`` (the columns and event types of the input: an unknown attribute, event
    type or PARTITION BY column is an error with a did-you-mean), or a mapping event type ->
    attribute -> kind.
    """
    from .semantic import analyze as _analyze
    from .semantic.schema import InputSchema, check_against

    if isinstance(schema, EventBatch):
        schema = InputSchema.of(schema)
    if isinstance(schema, InputSchema):
        analyzed = analyze(query, dialect=dialect, udfs=udfs, name=name)
        for message in check_against(analyzed, schema):
            import warnings

            warnings.warn(message, UserWarning, stacklevel=2)
        return analyzed

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

    def run(self, events: EventBatch) -> Matches:
        """Evaluate over a bounded, ordered batch; matches in the documented output order, as
        a list of :class:`Match` that converts to tables (``to_pandas()``, ``to_arrow()``,
        ``to_polars()``).

        The options given to :func:`compile` (caps, ``on_cap``, lateness) go to the backend.
        """
        if self.compiled_plan is not None:
            from .plans import evaluate

            found = evaluate(self.compiled_plan, events, **self.options)
        else:
            found = self.backend.load()(self.analyzed, events, **self.options)
        return self.matches(found, events.time)

    def matches(self, found: Iterable[Match], time: TimeInfo | None = None) -> Matches:
        """``found`` as :class:`Matches` of this query (``time``: the input's, for the
        ``start``/``end`` columns)."""
        from .semantic.analyzed import VarKind

        variables = [(v.name, v.kind is VarKind.LIST) for v in self.analyzed.variables.values()
                     if v.kind is not VarKind.NEGATED]
        return Matches(found, time=time, variables=variables,
                       returns=list(self.analyzed.output_fields()))

    def check(self, events: EventBatch) -> list[str]:
        """Check the query against the events it is about to run on: an attribute, event type
        or PARTITION BY column the events do not have, or a comparison of a string column with
        a number, raises :class:`~kleene.errors.QueryValidationError` (with a did-you-mean).
        Returns warnings (none today for a whole batch).

        Example:
            >>> q = compile("PATTERN SEQ(A a, B b) WHERE b.X > a.x")
            >>> q.check(EventBatch.from_records([{"type": "A", "ts": 1, "x": 1},
            ...                                  {"type": "B", "ts": 2, "x": 5}]))
            Traceback (most recent call last):
            ...
            kleene.errors.QueryValidationError: Line 1, column 29: the input has no column 'X' (did you mean 'x'?); ...
        """
        from .semantic.schema import InputSchema, check_against

        return check_against(self.analyzed, InputSchema.of(events))

    def start(self, **options: Any) -> Any:
        """Start a streaming runtime (``push``/``advance``/``close``) on the compiled plan."""
        if not self.backend.streaming:
            raise QueryValidationError(f"engine {self.engine!r} has no streaming runtime")
        target = self.compiled_plan if self.compiled_plan is not None else self.analyzed
        return self.backend.load_start()(target, **{**self.options, **options})


def compile(query: QueryLike, *, dialect: str | None = None,
            udfs: Mapping[str, Callable[..., Any]] | None = None,
            engine: str = DEFAULT_BACKEND, name: str | None = None,
            schema: SchemaLike | None = None,
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

        if options.get("count_only"):  # the chooser sees the output mode
            from dataclasses import replace

            from .plans import Stats
            stats = replace(stats or Stats(), count_only=True)
        compiled_plan = choose(analyzed, plan=plan, stats=stats)
    return CompiledQuery(analyzed, engine, options, compiled_plan)


def match(data: Any, query: QueryLike, *, output: str = "auto", time_col: str | None = None,
          type_col: str | None = None, event_type: str | None = None,
          id_col: str | None = None, time_unit: str = "s", time_format: str | None = None,
          column_types: Mapping[str, str] | None = None, on_bad_row: str = "fail",
          null_values: str | Sequence[str] | None = None, dialect: str | None = None, udfs: Mapping[str, Callable[..., Any]] | None = None,
          name: str | None = None, plan: str | None = None, **options: Any) -> Any:
    """The matches of ``query`` in ``data``, as a DataFrame: two lines in a notebook.

    ``data``: a pandas or polars DataFrame, a pyarrow Table or RecordBatch, an
    :class:`EventBatch`, or a file path (CSV, JSON Lines, Parquet). The reading options are
    those of :func:`kleene.read_events` (``time_col`` defaults to the first of ts, timestamp,
    time, event_time in any case; ``event_type`` gives every row one type; ``null_values``
    lists text values read as NULL, e.g. ``"nil,NA,"``). The query is checked
    against the data's columns and event types first (an unknown attribute is an error with a
    did-you-mean). ``output``: ``"auto"`` (a polars DataFrame for polars input, else pandas),
    ``"pandas"``, ``"polars"``, ``"arrow"`` or ``"matches"`` (the :class:`Matches` list).
    Further keyword arguments are the engine options of :func:`compile` (caps, ``on_cap``).

    Example:
        >>> import pandas as pd
        >>> df = pd.DataFrame({"time": pd.to_datetime(["2024-01-01 10:00", "2024-01-01 10:05",
        ...                                            "2024-01-01 10:07"]),
        ...                    "sensor": ["s1", "s1", "s1"], "speed": [80, 15, 12]})
        >>> out = match(df, "PATTERN SEQ(R a, R b) WHERE b.speed < a.speed / 2 "
        ...             "PARTITION BY sensor WITHIN 10 minutes RETURN b.speed AS slow",
        ...             event_type="R")
        >>> out[["a", "b", "slow"]].values.tolist(), str(out["end"].iloc[1])
        ([[0, 1, 15], [0, 2, 12]], '2024-01-01 10:07:00')
    """
    from .events.readers import read_events

    if output not in ("auto", "pandas", "polars", "arrow", "matches"):
        raise ValueError(f"output must be auto, pandas, polars, arrow or matches, not "
                         f"{output!r}")
    is_polars = type(data).__module__.split(".")[0] == "polars"
    if isinstance(data, EventBatch):
        events = data
    else:
        source = data.to_arrow() if is_polars else data
        events, _ = read_events(source, time_col=time_col, type_col=type_col,
                                event_type=event_type, id_col=id_col, time_unit=time_unit,
                                time_format=time_format, column_types=dict(column_types or {}),
                                on_bad_row=on_bad_row, null_values=null_values)
    compiled = compile(query, dialect=dialect, udfs=udfs, name=name, plan=plan,
                       schema=events, **options)
    found = compiled.run(events)
    if output == "matches":
        return found
    if output == "arrow":
        return found.to_arrow()
    if output == "polars" or (output == "auto" and is_polars):
        return found.to_polars()
    return found.to_pandas()


__all__ = ["CompiledQuery", "analyze", "compile", "match", "parse", "to_text"]
