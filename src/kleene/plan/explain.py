"""``kleene explain``: the compiled automaton as text, or as Graphviz DOT.

Shows what the engine will run: the states (components) with their take / proceed / ignore
edges, the predicates placed on each edge, the vectorized candidate masks, windows, negation
guards and partitioning. Example::

    >>> from kleene import api  # doctest: +SKIP
    >>> print(explain(api.analyze("PATTERN SEQ(A a, B+ b[]) WHERE b.x > a.x")))  # doctest: +SKIP
"""

from __future__ import annotations

from .. import ast
from ..semantic.analyzed import AnalyzedQuery
from ..syntax import expr_text
from .automaton import CompKind, Plan, UnionPlan, Unsupported, compile_plan, compile_union_plan
from .groups import And, AnyK, Ev, GroupPlan, Node, Rep, Seq, Win, compile_group_plan


def _compile(analyzed: AnalyzedQuery) -> Plan | GroupPlan | UnionPlan:
    try:
        return compile_plan(analyzed)
    except Unsupported:
        pass
    try:
        return compile_union_plan(analyzed)
    except Unsupported:
        return compile_group_plan(analyzed)


def _ignore_rule(strategy: ast.Strategy) -> str:
    return {
        ast.Strategy.SKIP_TILL_ANY_MATCH: "always (every run also waits)",
        ast.Strategy.SKIP_TILL_NEXT_MATCH: "only if no take/proceed edge applies",
        ast.Strategy.STRICT_CONTIGUITY: "never (the next event must be taken)",
        ast.Strategy.PARTITION_CONTIGUITY: "never within the key (the next event of the key "
                                           "must be taken)",
    }[strategy]


def _type(t: str | None) -> str:
    return "ANY" if t is None else t


def _linear_text(plan: Plan, indent: str = "") -> list[str]:
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


def _group_text(plan: GroupPlan) -> list[str]:
    out = [f"automaton: logical blocks (pushdown automaton), ignore edge: "
           f"{_ignore_rule(plan.strategy)}"]
    out.extend(_node_text(plan.root, 0))
    w = plan.analyzed.within
    if w is not None:
        out.append(f"window {int(w.amount)} events over the whole pattern" if w.is_count
                   else f"window {w.microseconds} us over the whole pattern")
    for v, m in plan.masks.items():
        if m is not None:
            out.append(f"vectorized mask {v}: " + " AND ".join(expr_text(e) for e in m.exprs))
    for p in plan.preds:
        out.append(f"on completion: {expr_text(p.expr)}")
    for nb in plan.negations:
        out.append("negation " + " | ".join(f"{_type(t)} {v}" for v, t in
                                             zip(nb.vars, nb.types, strict=True)))
        for p in nb.preds:
            out.append(f"  with the match: {expr_text(p.expr)}")
    return out


def explain(analyzed: AnalyzedQuery, *, dot: bool = False) -> str:
    """The compiled plan of a validated query, as text or (``dot=True``) Graphviz DOT."""
    plan = _compile(analyzed)
    if dot:
        return _dot(plan)
    lines = [f"query {analyzed.name!r}: strategy {analyzed.strategy.value}, "
             f"emit {analyzed.emit.value}"]
    if plan.partition_by or plan.equivalence:
        lines.append("partitioned by " + ", ".join(plan.key_attrs)
                     + " (routed in bulk per batch; one state per key)")
    if isinstance(plan, Plan):
        lines.extend(_linear_text(plan))
    elif isinstance(plan, UnionPlan):
        lines.append(f"top-level OR: {len(plan.branches)} branch plans, merged in output order")
        for i, b in enumerate(plan.branches):
            lines.append(f"branch {i}:")
            lines.extend(_linear_text(b, "  "))
    else:
        lines.extend(_group_text(plan))
    q = analyzed.query
    for pk in q.picks:
        lines.append(f"policy: PICK {pk.mode.value.upper()} {pk.var}")
    if analyzed.emit is ast.Emit.RECENT:
        lines.append("policy: EMIT RECENT")
    if q.consume is not None:
        lines.append("policy: CONSUME " + ("ALL" if q.consume.all_vars
                                           else ", ".join(q.consume.vars)))
    for name, _ce, _s, _p in plan.return_fns:
        lines.append(f"return: {name}")
    return "\n".join(lines) + "\n"


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def _dot(plan: Plan | GroupPlan | UnionPlan) -> str:
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
            if p.strategy is ast.Strategy.SKIP_TILL_ANY_MATCH or (
                    p.strategy is ast.Strategy.SKIP_TILL_NEXT_MATCH):
                lines.append(f'  {pre}s{k} -> {pre}s{k} [label="ignore", style=dashed];')
        closes = [expr_text(x.expr) for v in p.components[-1].vars for x in p.vars[v].close]
        lines.append(f'  {pre}s{n - 1} -> {pre}accept [label="{_esc("; ".join(closes))}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


__all__ = ["explain"]
