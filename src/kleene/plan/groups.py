"""The pushdown (logical-block) plan for patterns beyond a linear SEQ: AND, ANY, OR of
sub-patterns, Kleene closure on groups and windows on any sub-pattern.

Following LogCEP's pushdown automaton, each logical block is one node whose run state records
which sub-expressions are satisfied (a tuple of child states, the "bitset" on the stack): a take
edge advances one child, and the block's *proceed* fires when its boolean condition holds (all
children for AND, exactly ``k`` started-and-done children for ANY / OR). No permutation of the
children is ever enumerated; interleavings arise from events arriving in order.

Node states (all plain tuples, so runs are hashable and snapshot as data):

* ``Ev``      0 (waiting) or 1 (bound)
* ``Seq``     ``(index of the current item, its state)``
* ``And``     ``(state of each item)``
* ``Any``     ``(state of each item)``; an item is *chosen* once it has taken an event
* ``Rep``     ``(completed repetitions, state of the one in progress or None)``
* ``Win``     ``(state of the body, first timestamp / position in the body or None)``
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .. import ast
from ..semantic.analyzed import AnalyzedQuery
from .automaton import Predicate, Timing, Unsupported, compile_returns
from .expr import CompiledExpr, Layout, compile_expr, refs
from .vector import VectorPred, vectorize


@dataclass(frozen=True, slots=True)
class Ev:
    """One event bound to ``var`` (a list variable appends)."""

    var: str
    type: str | None
    slot: int
    bit: int
    is_list: bool


@dataclass(frozen=True, slots=True)
class Seq:
    """Items in order (NOT items removed; they are negation guards)."""

    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class And:
    """All items, any order, interleaving allowed."""

    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class AnyK:
    """Exactly ``k`` of the items (OR is ``k = 1``)."""

    k: int
    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Rep:
    """``min``..``max`` repetitions of the body, each binding at least one event."""

    body: Node
    min: int
    max: int | None


@dataclass(frozen=True, slots=True)
class Win:
    """A window over the body's positive events."""

    body: Node
    amount: int
    count: bool


Node = Ev | Seq | And | AnyK | Rep | Win


@dataclass(frozen=True, slots=True)
class NegBlock:
    """A NOT: its body variables (an event or an OR of events) and where it sits."""

    vars: tuple[str, ...]
    types: tuple[str | None, ...]
    preds: tuple[Predicate, ...]
    masks: tuple[VectorPred | None, ...]
    node: Node | None = None
    """For a negated sub-pattern (not one event or an OR of events): its automaton; an
    occurrence of it inside the interval forbids the match."""


@dataclass(frozen=True, slots=True)
class GroupPlan:
    """The immutable plan of a pattern with logical blocks."""

    name: str
    root: Node
    order: tuple[str, ...]
    layout: Layout
    var_types: Mapping[str, str | None]
    masks: Mapping[str, VectorPred | None]
    preds: tuple[Predicate, ...]
    negations: tuple[NegBlock, ...]
    neg_vars: tuple[str, ...]
    """Negated variables in candidate-bit order (after the positive ones)."""
    strategy: ast.Strategy
    partition_by: tuple[str, ...]
    equivalence: tuple[str, ...]
    analyzed: AnalyzedQuery
    return_fns: tuple[tuple[str, CompiledExpr, int | None, bool], ...]
    optional_lists: frozenset[str]
    """List variables that are unbound (None) until they take an event (OR/ANY branches)."""
    max_window_us: int | None
    max_window_events: int | None
    not_index: Mapping[int, int]
    """``id()`` of each NOT node of ``analyzed.pattern`` -> its index in ``negations``."""
    always_bound: bool = False
    """Does every completion bind each positive variable to exactly one event (no OR / ANY /
    repetition)?"""

    @property
    def key_attrs(self) -> tuple[str, ...]:
        """Attributes that route events to per-key state."""
        out = list(self.partition_by)
        for a in self.equivalence:
            if a not in out:
                out.append(a)
        return tuple(out)

    @property
    def window_us(self) -> int | None:
        """The query-level time window."""
        w = self.analyzed.within
        return None if w is None or w.is_count else w.microseconds

    @property
    def window_events(self) -> int | None:
        """The query-level count window."""
        w = self.analyzed.within
        return None if w is None or not w.is_count else int(w.amount)


def _collect(p: ast.Pattern, in_rep: bool, in_or: bool, out: dict[str, tuple[bool, bool]],
             negs: list[ast.Not]) -> None:
    if isinstance(p, ast.EventPattern):
        out[p.var] = (in_rep, in_or)
    elif isinstance(p, ast.Kleene):
        _collect(p.body, True, in_or, out, negs)
    elif isinstance(p, ast.Within):
        _collect(p.body, in_rep, in_or, out, negs)
    elif isinstance(p, ast.Not):
        if in_rep:
            raise Unsupported("NOT inside a repetition")
        negs.append(p)
    else:
        orish = isinstance(p, ast.Or | ast.AnyOf)
        for item in p.items:
            _collect(item, in_rep, in_or or orish, out, negs)


def _neg_body_vars(p: ast.Pattern) -> list[tuple[str, str | None]]:
    if isinstance(p, ast.EventPattern):
        return [(p.var, p.type)]
    if isinstance(p, ast.Kleene | ast.Within):
        return _neg_body_vars(p.body)
    if isinstance(p, ast.Not):
        raise Unsupported("NOT inside NOT")
    return [x for i in p.items for x in _neg_body_vars(i)]


def _simple_neg(p: ast.Pattern) -> bool:
    return isinstance(p, ast.EventPattern) or (
        isinstance(p, ast.Or) and all(isinstance(i, ast.EventPattern) for i in p.items))


def _neg_lists(p: ast.Pattern, in_rep: bool = False) -> list[str]:
    if isinstance(p, ast.EventPattern):
        return [p.var] if in_rep else []
    if isinstance(p, ast.Kleene):
        return _neg_lists(p.body, True)
    if isinstance(p, ast.Within | ast.Not):
        return _neg_lists(p.body, in_rep)
    return [v for i in p.items for v in _neg_lists(i, in_rep)]


def build_node(p: ast.Pattern, layout: Layout, bits: Mapping[str, int]) -> Node | None:
    """The node tree of a pattern (NOT items are dropped: they are guards, not states)."""
    if isinstance(p, ast.EventPattern):
        return Ev(p.var, p.type, layout.var_slots[p.var], bits[p.var],
                  p.var in layout.list_vars)
    if isinstance(p, ast.Not):
        return None
    if isinstance(p, ast.Kleene):
        body = build_node(p.body, layout, bits)
        assert body is not None
        return Rep(body, p.min, p.max)
    if isinstance(p, ast.Within):
        body = build_node(p.body, layout, bits)
        assert body is not None
        w = p.window
        return Win(body, int(w.amount) if w.is_count else w.microseconds, w.is_count)
    kids = tuple(k for k in (build_node(i, layout, bits) for i in p.items) if k is not None)
    if isinstance(p, ast.Seq):
        return Seq(kids)
    if isinstance(p, ast.And):
        return And(kids)
    if isinstance(p, ast.Or):
        return AnyK(1, kids)
    if isinstance(p, ast.AnyOf):
        return AnyK(p.k, kids)
    raise Unsupported(type(p).__name__)


def neg_body_vars(p: ast.Pattern) -> list[tuple[str, str | None]]:
    """(variable, type) of every event pattern inside a NOT's body."""
    return _neg_body_vars(p)


def neg_body_lists(p: ast.Pattern) -> list[str]:
    """Variables inside repetitions of a NOT's body (list variables)."""
    return _neg_lists(p)


def compile_group_plan(analyzed: AnalyzedQuery) -> GroupPlan:
    """Compile any validated pattern into the logical-block plan."""
    if analyzed.strategy is ast.Strategy.SKIP_TILL_NEXT_MATCH:
        raise Unsupported("skip-till-next-match on AND / ANY / repeated groups")
    info: dict[str, tuple[bool, bool]] = {}
    nots: list[ast.Not] = []
    _collect(analyzed.pattern, False, False, info, nots)
    order = tuple(analyzed.positive_vars())
    neg_blocks_vars = [_neg_body_vars(n.body) for n in nots]
    neg_vars = tuple(v for b in neg_blocks_vars for v, _t in b)
    all_vars = list(order) + list(neg_vars)
    neg_lists = {v for n in nots for v in _neg_lists(n.body)}
    list_vars = frozenset([v for v in order if info[v][0]] + sorted(neg_lists))
    optional_lists = frozenset(v for v in list_vars if _optional(analyzed.pattern, v))
    attrs: list[str] = []
    for e in list(analyzed.conjuncts) + [r.expr for r in analyzed.query.returns]:
        for a in sorted(refs(e, list_vars).attrs):
            if a not in attrs and a not in ("__ts", "__id"):
                attrs.append(a)
    layout = Layout({v: i for i, v in enumerate(all_vars)}, list_vars, tuple(attrs))
    udfs = analyzed.udfs
    variables = analyzed.variables
    bits = {v: 1 << i for i, v in enumerate(list(order) + list(neg_vars))}

    def build(p: ast.Pattern) -> Node | None:
        return build_node(p, layout, bits)

    root = build(analyzed.pattern)
    if root is None:
        raise Unsupported("a pattern without positive events")
    q = analyzed.query
    # The query-level window is not a node: runs carry their first timestamp / position and
    # expire as a prefix of the run list, which keeps root states small and repeating.

    owner = {v: bi for bi, b in enumerate(neg_blocks_vars) for v, _t in b}
    one_var: dict[str, list[ast.Expr]] = {v: [] for v in all_vars}
    positive: list[Predicate] = []
    neg_preds: list[list[Predicate]] = [[] for _ in nots]
    for ci, e in enumerate(analyzed.conjuncts):
        r = refs(e, list_vars)
        opt = tuple(layout.var_slots[v] for v in sorted(r.vars)
                    if v in order and _optional(analyzed.pattern, v))
        if len(r.iter_vars) > 1:
            free = tuple(sorted(r.unindexed - r.indexed))
            general = (tuple(layout.var_slots[v] for v in sorted(r.indexed)),
                       tuple(layout.var_slots[v] for v in free))
            pred = Predicate(e, "", Timing.MATCH,
                             compile_expr(e, layout, udfs, f"g{ci}", free=free), None,
                             bool(r.prev_vars), 0, frozenset(r.vars), opt, general)
        else:
            it = next(iter(r.iter_vars), None)
            pred = Predicate(e, "", Timing.MATCH, compile_expr(e, layout, udfs, f"g{ci}"), it,
                             bool(r.prev_vars), 0, frozenset(r.vars), opt)
        owners = {owner[v] for v in r.vars if v in owner}
        if owners:
            if len(owners) > 1:
                raise Unsupported("a predicate over two negated variables")
            neg_preds[owners.pop()].append(pred)
            if (len(r.vars) == 1 and not r.prev_vars and not r.abs_index and not r.closing
                    and not r.udfs):
                one_var[next(iter(r.vars))].append(e)
            continue
        if (len(r.vars) == 1 and not r.prev_vars and not r.abs_index and not r.closing
                and not r.udfs):
            one_var[next(iter(r.vars))].append(e)
            continue  # fully covered by the candidate mask
        positive.append(pred)
    masks = {v: (vectorize(one_var[v], layout, v, udfs) if one_var[v] else None)
             for v in all_vars}
    negations = []
    for bi, b in enumerate(neg_blocks_vars):
        body = nots[bi].body
        negations.append(NegBlock(tuple(v for v, _t in b), tuple(t for _v, t in b),
                                  tuple(p for p in neg_preds[bi]
                                        if not (len(p.vars) == 1 and p.expr in one_var[
                                            next(iter(p.vars))])),
                                  tuple(masks[v] for v, _t in b),
                                  None if _simple_neg(body) else build(body)))
    returns = compile_returns(q, layout, list_vars, udfs)
    wins = _windows(root)
    if q.within is not None:
        w = q.within
        wins.append((int(w.amount) if w.is_count else w.microseconds, w.is_count))
    tw = [a for a, c in wins if not c]
    cw = [a for a, c in wins if c]
    return GroupPlan(analyzed.name, root, order, layout,
                     {v: variables[v].type for v in all_vars if v in variables}, masks,
                     tuple(positive), tuple(negations), neg_vars, analyzed.strategy,
                     q.partition_by, analyzed.equivalence, analyzed, tuple(returns),
                     optional_lists, max(tw) if tw else None, max(cw) if cw else None,
                     {id(n): i for i, n in enumerate(nots)}, _always_bound(root))


def _optional(p: ast.Pattern, var: str) -> bool:
    """Is ``var`` possibly unbound: under an OR/ANY that is not itself inside a repetition
    (docs/semantics.md 2: a list variable inside a repetition is always bound)."""
    def walk(x: ast.Pattern, in_rep: bool, opt: bool) -> bool | None:
        if isinstance(x, ast.EventPattern):
            return opt if x.var == var else None
        if isinstance(x, ast.Kleene):
            return walk(x.body, True, opt)
        if isinstance(x, ast.Within | ast.Not):
            return walk(x.body, in_rep, opt)
        here = opt or (isinstance(x, ast.Or | ast.AnyOf) and not in_rep)
        for i in x.items:
            r = walk(i, in_rep, here)
            if r is not None:
                return r
        return None
    return bool(walk(p, False, False))


def _always_bound(n: Node) -> bool:
    if isinstance(n, Ev):
        return not n.is_list
    if isinstance(n, Seq | And):
        return all(_always_bound(i) for i in n.items)
    return False


def _windows(n: Node) -> list[tuple[int, bool]]:
    if isinstance(n, Win):
        return [(n.amount, n.count)] + _windows(n.body)
    if isinstance(n, Rep):
        return _windows(n.body)
    if isinstance(n, Ev):
        return []
    return [w for i in n.items for w in _windows(i)]


__all__ = ["And", "AnyK", "Ev", "GroupPlan", "NegBlock", "Node", "Rep", "Seq", "Win",
           "build_node", "compile_group_plan", "neg_body_lists", "neg_body_vars"]
