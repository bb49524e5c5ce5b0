"""``kleene explain``: the compiled automaton as text, or as Graphviz DOT.

Shows what the engine will run: the states (components) with their take / proceed / ignore
edges, the predicates placed on each edge, the vectorized candidate masks, windows, negation
guards and partitioning. Example::

    >>> from kleene import api
    >>> from kleene.plan.automaton import compile_plan
    >>> plan = compile_plan(api.analyze("PATTERN SEQ(A a, B+ b[]) WHERE b.x > a.x"))
    >>> print("\\n".join(linear_text(plan)))
    automaton: NFA^b, 2 state(s) + accept, ignore edge: always (every run also waits)
    state 0: single A a
    state 1: kleene {1,} B b
      proceed + take loop [b]: b.x > a.x
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..syntax import expr_text
from ..vocab import Emit, Strategy
from .automaton import CompKind, Plan, UnionPlan
from .blocks import NegBlock
from .groups import And, AnyK, Ev, GroupPlan, Node, Rep, Seq, Win


def _ignore_rule(strategy: Strategy) -> str:
    return {
        Strategy.SKIP_TILL_ANY_MATCH: "always (every run also waits)",
        Strategy.SKIP_TILL_NEXT_MATCH: "only if no take/proceed edge applies",
        Strategy.STRICT_CONTIGUITY: "never (the next event must be taken)",
        Strategy.PARTITION_CONTIGUITY: "never within the key (the next event of the key "
                                           "must be taken)",
        Strategy.MAXIMAL_GROUPING: "Kleene variables take every qualifying event (the tree "
                                   "plan's groups)",
    }[strategy]


def _type(t: str | None) -> str:
    return "ANY" if t is None else t


def linear_text(plan: Plan, indent: str = "") -> list[str]:
    out: list[str] = []
    n = len(plan.components)
    out.append(f"{indent}automaton: NFA^b, {n} state(s) + accept, ignore edge: "
               f"{_ignore_rule(plan.strategy)}")
    for k, c in enumerate(plan.components):
        quant = ""
        if c.kind is CompKind.KLEENE:
            quant = f" {{{c.min},{'' if c.max is None else c.max}}}"
        out.append(f"{indent}state {k}: {c.kind.value}{quant} "
                   + ", ".join(f"{_type(t)} {v}" for v, t in zip(c.vars, c.types, strict=True)))
        for v in c.vars:
            vp = plan.vars[v]
            if vp.mask is not None:
                out.append(f"{indent}  vectorized mask {v}: "
                           + " AND ".join(expr_text(e) for e in vp.mask.exprs))
            edge = "begin/take" if k == 0 else "proceed"
            if c.kind is CompKind.KLEENE:
                edge += " + take loop"
            for p in vp.take:
                out.append(f"{indent}  {edge} [{v}]: {expr_text(p.expr)}")
            for p in vp.close:
                out.append(f"{indent}  proceed (closes {v}): {expr_text(p.expr)}")
    for g in plan.negations:
        where = ("leading" if g.gap == 0 else "trailing" if g.gap == n
                 else f"between state {g.gap - 1} and {g.gap}")
        if g.inner is not None:  # a NOT with NOTs in its body
            view = NegBlock(tuple(v for v, _t, _m in g.body), tuple(t for _v, t, _m in g.body),
                            g.preds, (), g.node, g.inner)
            out.extend(_nested_text(view, indent, f"negation ({where})"))
            continue
        out.append(f"{indent}negation {_type(g.type)} {g.var} ({where})")
        if g.mask is not None:
            out.append(f"{indent}  vectorized mask: "
                       + " AND ".join(expr_text(e) for e in g.mask.exprs))
        for p in g.preds:
            out.append(f"{indent}  with the match: {expr_text(p.expr)}")
    for w in plan.windows:
        unit = f"{w.amount} events" if w.count else f"{w.amount} us"
        out.append(f"{indent}window {unit} over states {w.first}..{w.last}")
    return out


def _node_text(n: Node, depth: int) -> list[str]:
    pad = "  " * depth
    if isinstance(n, Ev):
        return [f"{pad}take {_type(n.type)} {n.var}{'[]' if n.is_list else ''}"]
    if isinstance(n, Seq):
        head = f"{pad}SEQ block (items in order)"
        items = n.items
    elif isinstance(n, And):
        head = f"{pad}AND block (pushdown: proceed when all {len(n.items)} items hold)"
        items = n.items
    elif isinstance(n, AnyK):
        head = f"{pad}ANY({n.k}) block (pushdown: proceed when exactly {n.k} items hold)"
        items = n.items
    elif isinstance(n, Rep):
        head = f"{pad}repeat {{{n.min},{'' if n.max is None else n.max}}}"
        items = (n.body,)
    else:
        assert isinstance(n, Win)
        head = f"{pad}window {n.amount} {'events' if n.count else 'us'}"
        items = (n.body,)
    out = [head]
    for i in items:
        out.extend(_node_text(i, depth + 1))
    return out


def group_text(plan: GroupPlan) -> list[str]:
    out = [f"automaton: logical blocks (pushdown automaton), ignore edge: "
           f"{_ignore_rule(plan.strategy)}"]
    out.extend(_node_text(plan.root, 0))
    if plan.window_events is not None:
        out.append(f"window {plan.window_events} events over the whole pattern")
    elif plan.window_us is not None:
        out.append(f"window {plan.window_us} us over the whole pattern")
    for v, m in plan.masks.items():
        if m is not None:
            out.append(f"vectorized mask {v}: " + " AND ".join(expr_text(e) for e in m.exprs))
    for p in plan.preds:
        out.append(f"on completion: {expr_text(p.expr)}")
    for nb in plan.negations:
        if nb.inner is not None:
            out.extend(_nested_text(nb, ""))
            continue
        out.append("negation " + " | ".join(f"{_type(t)} {v}" for v, t in
                                             zip(nb.vars, nb.types, strict=True)))
        for p in nb.preds:
            out.append(f"  with the match: {expr_text(p.expr)}")
    return out


def _nested_text(nb: Any, indent: str, head: str = "negation") -> list[str]:
    """A NOT with NOTs in its body (docs/semantics.md 4, "Nested negation"), each inner NOT
    indented under the NOT whose occurrences it checks."""
    types = dict(zip(nb.vars, nb.types, strict=True))
    own = nb.vars if nb.inner is None else nb.inner.own
    what = " | ".join if nb.node is None else ", ".join
    body = what(f"{_type(types[v])} {v}" for v in own)
    out = [f"{indent}{head} " + (body if nb.node is None else f"of a sub-pattern over {body}")]
    out.extend(f"{indent}  with the match: {expr_text(p.expr)}" for p in nb.preds)
    if nb.inner is not None:
        for blk in nb.inner.blocks:
            out.extend(_nested_text(blk, indent + "  ",
                                    "inside it, checked on each occurrence: NOT"))
    return out


def union_text(plan: UnionPlan) -> list[str]:
    """A top-level OR plan as text lines."""
    lines = [f"top-level OR: {len(plan.branches)} branch plans, merged in output order"]
    for i, b in enumerate(plan.branches):
        lines.append(f"branch {i}:")
        lines.extend(linear_text(b, "  "))
    return lines


def header_text(name: str, strategy: Strategy, emit: Emit, key_attrs: tuple[str, ...]
                ) -> list[str]:
    """The first lines of ``kleene explain``: query, strategy, emit, partitioning."""
    lines = [f"query {name!r}: strategy {strategy.value}, emit {emit.value}"]
    if key_attrs:
        lines.append("partitioned by " + ", ".join(key_attrs)
                     + " (routed in bulk per batch; one state per key)")
    return lines


def policy_text(picks: Sequence[Any], emit: Emit, consume: Any,
                return_names: Sequence[str]) -> list[str]:
    """The output-policy lines of ``kleene explain``."""
    lines = [f"policy: PICK {pk.mode.value.upper()} {pk.var}" for pk in picks]
    if emit is not Emit.ALL:
        lines.append(f"policy: EMIT {emit.value.upper()}")
    if consume is not None:
        lines.append("policy: CONSUME " + ("ALL" if consume.all_vars
                                           else ", ".join(consume.vars)))
    lines.extend(f"return: {name}" for name in return_names)
    return lines


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def dot_text(plan: Any) -> str:
    """A linear, union or group plan as Graphviz DOT."""
    lines = ["digraph kleene {", "  rankdir=LR;", '  node [shape=circle];']
    plans = [plan] if isinstance(plan, Plan) else (
        list(plan.branches) if isinstance(plan, UnionPlan) else [])
    if not plans:
        assert isinstance(plan, GroupPlan)
        lines[2] = "  node [shape=box];"
        counter = [0]

        def emit(n: Node) -> str:
            me = f"n{counter[0]}"
            counter[0] += 1
            label = _node_text(n, 0)[0].strip()
            shape = ', shape=ellipse' if isinstance(n, Ev) else ""
            lines.append(f'  {me} [label="{_esc(label)}"{shape}];')
            kids = () if isinstance(n, Ev) else ((n.body,) if isinstance(n, Rep | Win)
                                                 else n.items)
            for i, k in enumerate(kids):
                lines.append(f'  {me} -> {emit(k)} [label="{i + 1}"];')
            return me

        emit(plan.root)
        for pred in plan.preds:
            lines.append(f'  // on completion: {expr_text(pred.expr)}')
        lines.append("}")
        return "\n".join(lines) + "\n"
    for bi, p in enumerate(plans):
        pre = f"b{bi}_" if len(plans) > 1 else ""
        lines.append(f'  {pre}start [shape=point];')
        lines.append(f'  {pre}accept [shape=doublecircle, label="accept"];')
        n = len(p.components)
        for k, c in enumerate(p.components):
            label = ", ".join(f"{_type(t)} {v}" for v, t in zip(c.vars, c.types, strict=True))
            lines.append(f'  {pre}s{k} [label="{_esc(label)}"];')
        for k, c in enumerate(p.components):
            preds = [expr_text(x.expr) for v in c.vars for x in p.vars[v].take]
            masks = [expr_text(e) for v in c.vars if p.vars[v].mask is not None
                     for e in p.vars[v].mask.exprs]  # type: ignore[union-attr]
            lab = "; ".join(["mask: " + m for m in masks] + preds) or "type test"
            src = f"{pre}start" if k == 0 else f"{pre}s{k - 1}"
            kind = "begin" if k == 0 else "proceed"
            lines.append(f'  {src} -> {pre}s{k} [label="{kind}: {_esc(lab)}"];')
            if c.kind is CompKind.KLEENE:
                lines.append(f'  {pre}s{k} -> {pre}s{k} [label="take: {_esc(lab)}"];')
            if p.strategy is Strategy.SKIP_TILL_ANY_MATCH or (
                    p.strategy is Strategy.SKIP_TILL_NEXT_MATCH):
                lines.append(f'  {pre}s{k} -> {pre}s{k} [label="ignore", style=dashed];')
        closes = [expr_text(x.expr) for v in p.components[-1].vars for x in p.vars[v].close]
        lines.append(f'  {pre}s{n - 1} -> {pre}accept [label="{_esc("; ".join(closes))}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


__all__ = ["dot_text", "group_text", "header_text", "linear_text", "policy_text",
           "union_text"]
