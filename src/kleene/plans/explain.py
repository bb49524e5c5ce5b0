"""``kleene explain``: the chosen plan, why, every other plan's estimate or reason, and the
chosen plan's own text (or Graphviz DOT)."""

from __future__ import annotations

from ..plan.explain import dot_text, header_text, policy_text
from ..semantic.analyzed import AnalyzedQuery
from .registry import CompiledPlan, Stats, choice_text, choose


def explain(query: AnalyzedQuery | CompiledPlan, *, dot: bool = False, plan: str | None = None,
            stats: Stats | None = None) -> str:
    """The compiled plan of a validated query, as text or (``dot=True``) Graphviz DOT."""
    cp = query if isinstance(query, CompiledPlan) else choose(query, plan=plan, stats=stats)
    if dot:
        own = getattr(cp.plan, "dot", None)  # a plan kind with its own drawing (the tree)
        return own() if callable(own) else dot_text(cp.plan)
    spec = cp.spec
    lines = header_text(spec.name, spec.strategy, spec.emit, cp.plan.key_attrs)
    lines += choice_text(cp)
    lines += cp.explain()
    am = spec.after_match
    if am is not None:
        lines.append(f"policy: AFTER MATCH SKIP {am.mode}{' ' + am.var if am.var else ''} "
                     "(one preferred match per attempt; held until the stream closes; "
                     "docs/semantics.md 19)")
    lines += policy_text(spec.picks, spec.emit, spec.consume,
                         [r[0] for r in cp.plan.return_fns])
    return "\n".join(lines) + "\n"


__all__ = ["explain"]
