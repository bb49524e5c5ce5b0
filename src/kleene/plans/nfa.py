"""``nfa``: the linear NFA^b automaton (SASE+), with a generated transition kernel.

Supports a SEQ of events, Kleene components and choices (docs/engine.md). Compiles with
:func:`kleene.plan.automaton.compile_plan`; the matcher is
:class:`kleene.runtime.linear.LinearMatcher`.
"""

from __future__ import annotations

from typing import Any

from ..plan.automaton import CompKind, Plan, compile_plan
from ..plan.explain import linear_text
from ..runtime.kernel import has_plain_variant, kernel_factory, kernel_supported
from ..runtime.linear import LinearMatcher
from ..runtime.matcher import MatcherOptions
from ..runtime.policies import bindings_builder
from . import registry
from .registry import CompiledPlan, PlanKind, Stats, matches_estimate, runs_estimate

NFA_EVENT = 1.0
"""The chooser's unit: the NFA's work for one input event of the pattern's types. Every
plan's estimate is on this scale (about one microsecond of CPU here); the constants below and
those of chain.py / tree.py are fitted on ``benchmarks/chooser.py`` (docs/benchmarks.md,
"The plan chooser's scale")."""
NFA_RUN = 0.161
"""Work per live partial match an event is offered to, same unit."""
NFA_MATCH = 0.825
"""Work per complete match built (enumeration), same unit."""
NFA_COUNT_EVENT = 1.95
"""Work per input event when counting (``count_only``: the kernel's count mode), same unit."""
NFA_COUNT_MATCH = 0.665
"""Work per complete match counted (``count_only``: the kernel builds none), same unit."""
NFA_COUNT_RUN = 0.0
"""Work per live partial match an event is offered to when counting, same unit (fitted
at 0: the count kernel's run visits are not distinguishable from its per-event work)."""


def linear_terms(plan: Plan, stats: Stats) -> dict[str, float]:
    """The NFA's cost terms per input event: the share of events the pattern's types take
    (``events``: the others never reach a run), the expected live runs (``runs``; each
    event of the pattern's types is offered to them: ``offered``) and complete matches."""
    n = stats.events_in(plan.window_us, plan.window_events, plan.key_attrs)
    steps = []
    for c in plan.components:
        share = sum(stats.share(t) for t in c.types)
        conj = sum(len(plan.vars[v].take) + (plan.vars[v].mask is not None) for v in c.vars)
        steps.append((min(share, 1.0), c.kind is CompKind.KLEENE, conj))
    seen = min(sum(stats.share(t) for t in {t for c in plan.components for t in c.types}), 1.0)
    runs = runs_estimate(steps, n, plan.strategy, registry.ORDERED)
    return {"events": seen, "runs": runs, "offered": seen * runs,
            "matches": matches_estimate(steps, n, plan.strategy, registry.ORDERED)}


def linear_cost(plan: Plan, stats: Stats) -> float:
    """Estimated work per event: each event of the pattern's types, the live runs it is
    offered to and the matches it completes (built, or only counted under ``count_only``)."""
    t = linear_terms(plan, stats)
    event, run, match = ((NFA_COUNT_EVENT, NFA_COUNT_RUN, NFA_COUNT_MATCH) if stats.count_only
                         else (NFA_EVENT, NFA_RUN, NFA_MATCH))
    return min(event * t["events"] + run * t["offered"] + match * t["matches"], 1e18)


def linear_matcher(plan: Plan, options: MatcherOptions, plain_output: bool,
                   count_ok: bool, memo: dict[Any, Any] | None = None,
                   key: Any = None, timeouts: bool = False) -> LinearMatcher:
    """A configured LinearMatcher: caps, count mode, direct output, and its kernel. The
    kernel's code is generated and compiled once per (plan, option set) and kept in ``memo``
    (the compiled plan's), so every runtime of a compiled query reuses it."""
    kernel = options.use_kernel and kernel_supported(plan) and not timeouts
    # --count without policies or NOT: the kernel only counts complete matches
    count_mode = (kernel and options.count_only and count_ok and not plan.negations
                  and plain_output)
    # a NOT inside a NOT's body (skip-till-next-match only): only such plans take this matcher
    cls: type[LinearMatcher] = LinearMatcher
    if any(b.inner is not None for b in plan.negations):  # runtime.nested.has_nested
        from ..runtime.nested import NestedLinearMatcher  # only for such plans: start-up

        cls = NestedLinearMatcher
    m = cls(plan, options, count_mode=count_mode, timeouts=timeouts)
    if kernel:
        direct = (not m.count_mode and not options.count_only and not plan.negations
                  and not m.has_trailing and plain_output and m.simple_key
                  and not plan.return_fns)
        if direct:
            built = bindings_builder(plan)
            if built is not None:
                # no NOT, policies or RETURN: the kernel emits finished (key, Match) entries
                m.direct = (plan.name, built[0])
                m.output_keys = True  # the kernel's entries carry the output-order key
        m.kernel = kernel_for(m, memo, ("kernel", key, options, plain_output, count_ok))
    return m


def kernel_for(m: LinearMatcher, memo: dict[Any, Any] | None, key: Any) -> Any:
    """``m``'s kernel from the factory kept in ``memo`` under ``key`` (generated and compiled
    on first use): every matcher configured alike shares one compiled kernel. When the plan
    has comparisons that need a bool-vs-number guard, the variant without it (for columns
    that hold no booleans) is set up too: ``m.plain_values`` switches between them."""
    def made(plain: bool) -> Any:
        k = (*key, "plain") if plain else key
        make = None if memo is None else memo.get(k)
        if make is None:
            make = kernel_factory(m, plain_values=plain)
            if memo is not None:
                memo[k] = make
        return make(m)

    guarded = made(False)
    if has_plain_variant(m.plan):
        m.kernels = (guarded, made(True))
    return guarded


def _matcher(cp: CompiledPlan, options: MatcherOptions) -> Any:
    # EMIT TIMEOUTS runs the interpreter, which marks extended runs (the generated kernel is
    # untouched and costs nothing more when timeouts are not requested)
    return linear_matcher(cp.plan, options, cp.spec.plain, True, cp.memo,
                          timeouts=cp.spec.timeouts)


PLAN = PlanKind(
    name="nfa",
    description="linear NFA^b automaton (SEQ of events, Kleene, choices) with a generated "
                "kernel",
    compile=compile_plan,
    matcher=_matcher,
    cost=linear_cost,
    explain=linear_text,
    after_match=True,
    running=True,
    timeouts=True,
)
