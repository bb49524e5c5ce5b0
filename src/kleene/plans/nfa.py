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
from .registry import CompiledPlan, PlanKind, Stats, runs_estimate

LINEAR_OVERHEAD = 1.0
"""Work per partial match an event is offered to, relative to the other kinds."""


def linear_cost(plan: Plan, stats: Stats) -> float:
    """Estimated work per event: one unit per event plus the expected live runs."""
    n = stats.events_in(plan.window_us, plan.window_events)
    steps = []
    for c in plan.components:
        share = sum(stats.share(t) for t in c.types)
        conj = sum(len(plan.vars[v].take) + (plan.vars[v].mask is not None) for v in c.vars)
        steps.append((min(share, 1.0), c.kind is CompKind.KLEENE, conj))
    return 1.0 + LINEAR_OVERHEAD * runs_estimate(steps, n, plan.strategy)


def linear_matcher(plan: Plan, options: MatcherOptions, plain_output: bool,
                   count_ok: bool, memo: dict[Any, Any] | None = None,
                   key: Any = None) -> LinearMatcher:
    """A configured LinearMatcher: caps, count mode, direct output, and its kernel. The
    kernel's code is generated and compiled once per (plan, option set) and kept in ``memo``
    (the compiled plan's), so every runtime of a compiled query reuses it."""
    kernel = options.use_kernel and kernel_supported(plan)
    # --count without policies or NOT: the kernel only counts complete matches
    count_mode = (kernel and options.count_only and count_ok and not plan.negations
                  and plain_output)
    m = LinearMatcher(plan, options, count_mode=count_mode)
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
    return linear_matcher(cp.plan, options, cp.spec.plain, True, cp.memo)


PLAN = PlanKind(
    name="nfa",
    description="linear NFA^b automaton (SEQ of events, Kleene, choices) with a generated "
                "kernel",
    compile=compile_plan,
    matcher=_matcher,
    cost=linear_cost,
    explain=linear_text,
    after_match=True,
)
