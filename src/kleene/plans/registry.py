"""The plan registry and the cost-based chooser.

A *plan kind* is one evaluation algorithm: it says whether it supports a query (by compiling
it, or raising :class:`Unsupported` with the reason), compiles it to an immutable plan,
estimates its cost from :class:`Stats`, explains itself, and builds the
:class:`~kleene.runtime.matcher.Matcher` the shared runtime drives. Each kind lives in its own
module and is registered by one line of :data:`REGISTRY`::

    REGISTRY = (
        "kleene.plans.nfa:PLAN",
        ...
    )

:func:`choose` compiles the query with every registered kind, estimates each supported one and
takes the cheapest (ties: registry order); ``plan=NAME`` forces one, and a kind that does not
support the query is then a :class:`~kleene.errors.QueryValidationError` naming the reason.
The result, a :class:`CompiledPlan`, is what ``kleene.compile`` keeps: ``run`` and ``start``
reuse it (compile once, run many).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field, replace
from typing import TYPE_CHECKING, Any

from .. import ast
from ..errors import EngineError, QueryValidationError
from ..frozen import dataclass
from ..plan.automaton import Unsupported
from ..plan.expr import has_running
from ..runtime.matcher import (
    AfterMatchSpec,
    ConsumeSpec,
    MatcherOptions,
    OutputSpec,
    PickSpec,
    PreferNode,
)
from ..semantic.analyzed import AnalyzedQuery
from ..vocab import Emit, Strategy

if TYPE_CHECKING:
    from ..events import EventBatch
    from ..runtime.matcher import Matcher

REGISTRY: tuple[str, ...] = (
    "kleene.plans.nfa:PLAN",
    "kleene.plans.union:PLAN",
    "kleene.plans.pda:PLAN",
    "kleene.plans.chain:PLAN",
    "kleene.plans.tasks:PLAN",
    "kleene.plans.tree:PLAN",
    "kleene.plans.runs:PLAN",
)
"""Every plan kind, as ``"module:attribute"`` (imported on first use). Order breaks cost ties."""


# --------------------------------------------------------------------------------------------
# Statistics and cost
# --------------------------------------------------------------------------------------------

DEFAULT_EVENTS_IN_WINDOW = 1_000.0
"""Events assumed inside a window when the query has none, or when no rate is known."""


@dataclass(frozen=True, slots=True)
class Stats:
    """What the chooser knows of the input: event-type shares, the event rate and a default
    predicate selectivity. From a sample of the input (:meth:`from_events`) or defaults."""

    type_share: Mapping[str, float] = field(default_factory=dict)
    """Fraction of events of each type (missing types: :attr:`default_share`)."""
    events_per_second: float | None = None
    selectivity: float = 0.5
    """Fraction of candidate events a predicate keeps (per conjunct, assumed independent)."""
    default_share: float = 0.25
    source: str = "defaults"
    count_only: bool = False
    """The output mode: True when only the number of matches is wanted (``count_only``), so
    no plan builds a match; the costs differ (the chain plan counts without joining)."""
    distinct: Mapping[str, float] = field(default_factory=dict)
    """Distinct values of each attribute in the sample: a PARTITION BY (or equivalence) key
    spreads a time window's events over that many keys (:meth:`events_in`)."""

    def share(self, event_type: str | None) -> float:
        """The fraction of events a variable of this type can take (``None``: any type)."""
        if event_type is None:
            return 1.0
        return self.type_share.get(event_type, self.default_share if not self.type_share
                                   else 0.0)

    def events_in(self, window_us: int | None, window_events: int | None,
                  keys: Sequence[str] = ()) -> float:
        """Expected number of events inside a window (of one key: ``keys`` are the attributes
        that route events, and a time window's events spread over their distinct values)."""
        if window_events is not None:
            return float(window_events)
        if window_us is not None and self.events_per_second:
            spread = max((self.distinct.get(k, 1.0) for k in keys), default=1.0)
            return max(1.0, self.events_per_second * window_us / 1e6 / spread)
        return DEFAULT_EVENTS_IN_WINDOW

    def knows_keys(self, keys: Sequence[str]) -> bool:
        """Are the distinct values of every key attribute measured?"""
        return all(k in self.distinct for k in keys)

    @classmethod
    def from_events(cls, events: EventBatch, *, sample: int = 100_000) -> Stats:
        """Type shares and the event rate measured on (the first ``sample`` events of) a batch."""
        import pyarrow as pa
        import pyarrow.compute as pc

        from ..events.model import TS, TYPE

        t = events.table.slice(0, sample)
        n = t.num_rows
        if n == 0:
            return cls()
        counts = pc.value_counts(t.column(TYPE)).to_pylist()
        shares = {c["values"]: c["counts"] / n for c in counts if c["values"] is not None}
        ts = t.column(TS)
        lo, hi = pc.min(ts).as_py(), pc.max(ts).as_py()
        rate = n / ((hi - lo) / 1e6) if hi is not None and lo is not None and hi > lo else None
        distinct = {}
        for name in t.column_names:
            if name in (TS, TYPE) or pa.types.is_floating(t.schema.field(name).type):
                continue
            try:
                distinct[name] = float(pc.count_distinct(t.column(name)).as_py())
            except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
                continue  # a column type without a distinct count: not a key
        return cls(type_share=shares, events_per_second=rate, source=f"sample of {n:,} events",
                   distinct=distinct)


ORDERED = True
"""The NFA's and the chain's estimates count only the choices of events that come in the
pattern's order (:func:`_prefixes`); False restores the count of every choice (an ablation
for ``benchmarks/chooser.py``)."""


def _prefixes(steps: Sequence[tuple[float, bool, int]], in_window: float,
              strategy: Strategy, ordered: bool = False) -> list[float]:
    """Expected partial matches of the first ``j`` steps, ``j = 1 .. len(steps) - 1`` (at
    least the first step). ``ordered``: under skip-till-any-match, only the choices whose
    events come in the steps' order count (``1/j!`` of them: events at random positions of
    the window)."""
    out = []
    prefix = 1.0
    for j, (share, kleene, conjuncts) in enumerate(steps[:-1] if len(steps) > 1 else steps, 1):
        cand = max(share * in_window * (0.5 ** conjuncts), 1e-9)
        if strategy is Strategy.SKIP_TILL_ANY_MATCH:
            prefix *= (2.0 ** min(cand, 60.0) - 1.0) if kleene else cand
            if ordered:
                prefix /= j
        else:
            prefix *= min(cand, 1.0) if prefix >= 1.0 else cand
        prefix = min(prefix, 1e30)
        out.append(prefix)
    return out


def runs_estimate(steps: Sequence[tuple[float, bool, int]], in_window: float,
                  strategy: Strategy, ordered: bool = False) -> float:
    """Expected live partial matches of a sequence of steps, ``(share, kleene, conjuncts)``
    each, with ``in_window`` events per window: a run of the first ``j`` steps exists for
    every choice of their events inside the window (skip-till-any-match; Kleene steps choose
    any subset), fewer under the other strategies (one run per start); ``ordered``: see
    :func:`_prefixes`."""
    return min(sum(_prefixes(steps, in_window, strategy, ordered)), 1e18)


def matches_estimate(steps: Sequence[tuple[float, bool, int]], in_window: float,
                     strategy: Strategy, ordered: bool = False) -> float:
    """Expected complete matches per input event: the partial matches of every step but the
    last (:func:`runs_estimate`'s last prefix) times the chance that an event completes one
    (the last step's share and conjuncts)."""
    if len(steps) < 2:
        share, _k, conjuncts = steps[0]
        return share * (0.5 ** conjuncts)
    share, _k, conjuncts = steps[-1]
    return min(_prefixes(steps, in_window, strategy, ordered)[-1] * share * (0.5 ** conjuncts),
               1e18)


# --------------------------------------------------------------------------------------------
# Plan kinds
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlanKind:
    """One registered evaluation algorithm."""

    name: str
    description: str
    compile: Callable[[AnalyzedQuery], Any]
    """Query -> immutable plan data; raises :class:`Unsupported` (with the reason) otherwise."""
    matcher: Callable[[CompiledPlan, MatcherOptions], Matcher]
    """Builds the matcher for a compiled plan (it may cache generated code in ``memo``)."""
    cost: Callable[[Any, Stats], float]
    """Estimated CPU work per input event, on one scale across kinds (docs/benchmarks.md,
    "The plan chooser's scale"): one unit is the NFA's fitted cost of one input event;
    :attr:`Stats.count_only` gives the output mode."""
    explain: Callable[[Any], list[str]]
    """The plan as text lines (``kleene explain``)."""
    coverage: bool = False
    """Computes ``EMIT COVERAGE`` itself (the runtime's policies do not)."""
    after_match: bool = False
    """The kind's matcher hands every candidate to the runtime's policies, which apply AFTER
    MATCH SKIP (docs/semantics.md 19); kinds that do not declare it refuse such queries."""
    timeouts: bool = False
    """Reports timed-out partial matches (``EMIT TIMEOUTS``, docs/semantics.md 20)."""
    running: bool = False
    """Evaluates running aggregates (``avg(v[..i].x)``, docs/semantics.md 21)."""
    one_process: bool = False
    """Fastest in one process: its matcher takes whole chunks as arrays and hands its matches
    over as columns, which keyed workers would turn into ``Match`` objects to send back (the
    CLI's default is then one worker; ``--workers N`` still spreads it)."""

    configure: Callable[[Any, str, AnalyzedQuery], Any] | None = None
    """``plan="NAME:OPTION"``: the compiled plan with an option applied (the tree plan's
    shape); None if the kind takes no option."""

    def compile_checked(self, analyzed: AnalyzedQuery) -> Any:
        """:attr:`compile`, refusing what the kind does not declare (EMIT COVERAGE)."""
        if analyzed.emit is Emit.COVERAGE and not self.coverage:
            raise Unsupported("EMIT COVERAGE is computed by the chain plan only")
        if analyzed.query.after_match is not None and not self.after_match:
            raise Unsupported("AFTER MATCH SKIP (SQL's preferred match per start row, "
                              "docs/semantics.md 19) is run by the nfa, union and pda plans only")
        if analyzed.query.timeouts and not self.timeouts:
            raise Unsupported("EMIT TIMEOUTS is computed by the nfa plan only")
        if not self.running and has_running(analyzed.conjuncts):
            raise Unsupported("a running aggregate (avg(v[..i].x), docs/semantics.md 21) is "
                              "evaluated by the nfa, union and pda plans only")
        return self.compile(analyzed)

    def supports(self, analyzed: AnalyzedQuery) -> str | None:
        """None if this kind evaluates the query, else the reason it does not."""
        try:
            self.compile_checked(analyzed)
        except Unsupported as exc:
            return str(exc)
        return None


_KINDS: dict[str, PlanKind] | None = None


def plan_kinds() -> dict[str, PlanKind]:
    """Every registered plan kind by name, in registry order."""
    global _KINDS
    if _KINDS is None:
        kinds: dict[str, PlanKind] = {}
        for target in REGISTRY:
            module, _, attr = target.partition(":")
            kind = getattr(importlib.import_module(module), attr)
            if not isinstance(kind, PlanKind):
                raise TypeError(f"{target} is not a PlanKind")
            if kind.name in kinds:
                raise ValueError(f"two plan kinds named {kind.name!r}")
            kinds[kind.name] = kind
        _KINDS = kinds
    return _KINDS


def register(target: str) -> None:
    """Add a plan kind (``"module:attribute"``) after the registered ones, e.g. from a plugin
    or a test; :func:`unregister` removes it again."""
    global REGISTRY, _KINDS
    if target not in REGISTRY:
        REGISTRY = (*REGISTRY, target)
        _KINDS = None


def unregister(target: str) -> None:
    """Remove a plan kind added by :func:`register`."""
    global REGISTRY, _KINDS
    REGISTRY = tuple(t for t in REGISTRY if t != target)
    _KINDS = None


def plan_names() -> list[str]:
    """Names of the registered plan kinds."""
    return list(plan_kinds())


def get_plan_kind(name: str) -> PlanKind:
    """A registered kind by name; an unknown name is a clear error."""
    kinds = plan_kinds()
    if name not in kinds:
        raise QueryValidationError(f"unknown plan {name!r}; available: {', '.join(kinds)}")
    return kinds[name]


# --------------------------------------------------------------------------------------------
# Choosing and compiling
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Candidate:
    """One row of the chooser's table: a kind, its estimated cost or why it does not apply."""

    name: str
    cost: float | None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Choice:
    """What the chooser decided and why."""

    chosen: str
    why: str
    candidates: tuple[Candidate, ...]
    stats: Stats


@dataclass(frozen=True)
class CompiledPlan:
    """A query compiled by one plan kind: everything the runtime needs, as data.

    ``memo`` caches what a matcher factory generates per option set (the NFA's kernel), so a
    compiled query builds its code once however often it runs.
    """

    kind: PlanKind
    plan: Any
    spec: OutputSpec
    choice: Choice
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)
    exact_counter: CompiledPlan | None = field(default=None, compare=False, repr=False)
    """The same query compiled by the chain plan when that compiles (None otherwise): a
    truncating runtime counts what its caps dropped with it, exactly, where the chain plan's
    count mode applies (docs/engine.md, "Bounded memory")."""

    @property
    def name(self) -> str:
        """The query's name."""
        return self.spec.name

    def matcher(self, options: MatcherOptions) -> Matcher:
        """A fresh matcher (per runtime) for this plan."""
        return self.kind.matcher(self, options)

    def explain(self) -> list[str]:
        """The plan as text lines."""
        return self.kind.explain(self.plan)


def output_spec(analyzed: AnalyzedQuery) -> OutputSpec:
    """The policies and routing facts of a query, as plain data."""
    q = analyzed.query
    picks = tuple(PickSpec(p.var, p.mode, p.from_var, p.within) for p in q.picks)
    consume = None if q.consume is None else ConsumeSpec(q.consume.all_vars,
                                                         tuple(q.consume.vars))
    am = None
    if q.after_match is not None:
        am = AfterMatchSpec(q.after_match.mode.value, q.after_match.var,
                            _prefer_node(analyzed.pattern), tuple(q.partition_by), q.rows)
    return OutputSpec(name=analyzed.name, strategy=analyzed.strategy, emit=analyzed.emit,
                      picks=picks, consume=consume, within=analyzed.within,
                      needs_positions=_needs_positions(analyzed), after_match=am,
                      timeouts=q.timeouts)


def _prefer_node(p: ast.Pattern) -> PreferNode:
    """The pattern as plain data for the preference order (SEQ / OR / Kleene / events)."""
    if isinstance(p, ast.EventPattern):
        return ("e", p.var)
    if isinstance(p, ast.Within):
        return _prefer_node(p.body)
    if isinstance(p, ast.Kleene):
        return ("k", _prefer_node(p.body), p.min, p.max, p.reluctant)
    if isinstance(p, ast.Seq):
        return ("s", tuple(_prefer_node(i) for i in p.items))
    if isinstance(p, ast.Or):
        return ("o", tuple(_prefer_node(i) for i in p.items))
    raise Unsupported(f"AFTER MATCH SKIP over {type(p).__name__.upper()}")


def _needs_positions(analyzed: AnalyzedQuery) -> bool:
    """Does any rule read per-key positions (contiguity, count windows)?"""
    if analyzed.strategy in (Strategy.STRICT_CONTIGUITY, Strategy.PARTITION_CONTIGUITY):
        return True
    q = analyzed.query
    if q.within is not None and q.within.is_count:
        return True
    if any(pk.within is not None and pk.within.is_count for pk in q.picks):
        return True

    def counts(p: ast.Pattern) -> bool:
        if isinstance(p, ast.Within):
            return p.window.is_count or counts(p.body)
        if isinstance(p, ast.EventPattern):
            return False
        if isinstance(p, ast.Kleene | ast.Not):
            return counts(p.body)
        return any(counts(i) for i in p.items)
    return counts(q.pattern)


def choose(analyzed: AnalyzedQuery, *, plan: str | None = None,
           stats: Stats | None = None) -> CompiledPlan:
    """Compile ``analyzed`` with the cheapest supported plan kind (or the one named)."""
    stats = stats or Stats()
    kinds = plan_kinds()
    option: str | None = None
    if plan is not None and ":" in plan:
        plan, _, option = plan.partition(":")
    if plan is not None:
        get_plan_kind(plan)  # unknown name: clear error
    rows: list[Candidate] = []
    best: tuple[float, int, PlanKind, Any] | None = None
    forced: tuple[PlanKind, Any] | None = None
    by_kind: dict[str, tuple[PlanKind, Any]] = {}
    for i, kind in enumerate(kinds.values()):
        try:
            compiled = kind.compile_checked(analyzed)
        except Unsupported as exc:
            rows.append(Candidate(kind.name, None, str(exc)))
            if kind.name == plan:
                raise QueryValidationError(
                    f"plan {plan!r} does not support query {analyzed.name!r}: {exc}") from None
            continue
        if kind.name == plan and option is not None:
            if kind.configure is None:
                raise QueryValidationError(f"plan {plan!r} takes no option (got {option!r})")
            compiled = kind.configure(compiled, option, analyzed)
        by_kind[kind.name] = (kind, compiled)
        cost = float(kind.cost(compiled, stats))
        if math.isnan(cost):
            cost = math.inf
        rows.append(Candidate(kind.name, cost))
        if kind.name == plan:
            forced = (kind, compiled)
        if best is None or (cost, i) < (best[0], best[1]):
            best = (cost, i, kind, compiled)
    if forced is not None:
        kind, compiled = forced
        why = "forced (plan=...)"
    elif best is None:
        reasons = "; ".join(f"{r.name}: {r.reason}" for r in rows)
        raise EngineError(f"the automaton engine does not support query {analyzed.name!r} yet "
                          f"(no plan applies: {reasons}); use --engine oracle on small inputs")
    else:
        _c, _i, kind, compiled = best
        others = [r for r in rows if r.cost is not None and r.name != kind.name]
        why = ("the only plan that supports the query" if not others
               else "lowest estimated cost")
    choice = Choice(kind.name, why, tuple(rows), stats)
    spec = output_spec(analyzed)
    counter = None
    if "chain" in by_kind and spec.plain:
        ck, cc = by_kind["chain"]
        counter = CompiledPlan(ck, cc, spec, Choice(ck.name, "counts what caps drop", (), stats))
    return CompiledPlan(kind, compiled, spec, choice, exact_counter=counter)


def choice_text(compiled: CompiledPlan) -> list[str]:
    """The chooser's table for ``kleene explain``."""
    ch = compiled.choice
    mode = "counting only" if ch.stats.count_only else "enumerating matches"
    out = [f"plan: {ch.chosen} ({ch.why}; statistics: {ch.stats.source}; {mode})"]
    for r in ch.candidates:
        mark = "*" if r.name == ch.chosen else " "
        if r.cost is None:
            out.append(f"  {mark} {r.name:<8} does not apply: {r.reason}")
        else:
            out.append(f"  {mark} {r.name:<8} estimated cost {_fmt_cost(r.cost)} per event")
    return out


def _fmt_cost(c: float) -> str:
    if math.isinf(c):
        return "unbounded"
    if c >= 1e6:
        return f"{c:.2e}"
    return f"{c:,.1f}"


# --------------------------------------------------------------------------------------------
# Entry points used by the backends, the API and the Spark tasks
# --------------------------------------------------------------------------------------------

_RUNTIME_OPTIONS = frozenset({"allowed_lateness_us", "max_runs_per_partition",
                              "max_matches_per_event", "max_matches_per_call", "on_cap",
                              "count_only", "use_kernel"})


def start(query: AnalyzedQuery | CompiledPlan, *, plan: str | None = None,
          stats: Stats | None = None, **options: Any) -> Any:
    """Start a streaming runtime (``push`` / ``advance`` / ``close``) for a validated query
    or an already compiled plan.

    Options: ``allowed_lateness_us`` (default 0), ``max_runs_per_partition`` (default
    100000; ``None`` for no cap), ``max_matches_per_event`` (default 1000000),
    ``max_matches_per_call`` (default 2000000: complete matches buffered by one
    ``push`` / ``advance`` / ``close``), ``on_cap`` (``"error"`` or ``"truncate"``),
    ``count_only``, ``use_kernel``; ``workers=N``: a PARTITION BY query streams over N
    processes (kleene.runtime.parallel.ParallelStream, the output of one runtime).
    """
    from ..runtime.engine import Runtime

    workers = options.pop("workers", None)
    unknown = set(options) - _RUNTIME_OPTIONS
    if unknown:
        raise EngineError(f"unknown runtime option(s) {sorted(unknown)}; known: "
                          f"{', '.join(sorted(_RUNTIME_OPTIONS))}")
    if options.get("count_only") and not isinstance(query, CompiledPlan):
        stats = replace(stats or Stats(), count_only=True)  # the chooser sees the mode
    compiled = query if isinstance(query, CompiledPlan) else choose(query, plan=plan,
                                                                     stats=stats)
    if workers is not None and workers != 1:
        from ..runtime.parallel import ParallelStream

        return ParallelStream(compiled, int(workers), **options)
    return Runtime(compiled, **options)


def evaluate(query: AnalyzedQuery | CompiledPlan, events: EventBatch, *,
             plan: str | None = None, **options: Any) -> list[Any]:
    """Evaluate over a bounded, ordered batch (the ``automaton`` backend). ``workers=N``
    spreads the partitions of a PARTITION BY query over N processes (kleene.runtime.parallel;
    the same matches in the same order)."""
    from ..runtime.engine import run_batch

    workers = options.pop("workers", None)
    if workers is not None and workers != 1:
        from ..runtime.parallel import run_parallel

        rt = start(query, plan=plan, **options)  # validates the options, compiles once
        udfs = getattr(query, "udfs", None) or getattr(getattr(rt.plan, "analyzed", None),
                                                         "udfs", None)
        par = run_parallel(rt.compiled, events, int(workers), options, udfs=udfs)
        if options.get("count_only"):
            from ..runtime.engine import count_placeholders

            return count_placeholders(par.counters.matches)
        return par.matches
    return run_batch(start(query, plan=plan, **options), events)


__all__ = ["REGISTRY", "Candidate", "Choice", "CompiledPlan", "PlanKind", "Stats", "choice_text",
           "choose", "evaluate", "get_plan_kind", "matches_estimate", "output_spec", "plan_kinds",
           "plan_names", "register", "runs_estimate", "start", "unregister"]
