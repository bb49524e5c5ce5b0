"""``tree``: FAEM's binary tree of buffers (ZStream-style tree plan) with FAEM's Kleene groups.

A leaf buffer per pattern variable holds its candidate events; an internal node joins its two
children (sequence, conjunction or disjunction) into a composite buffer. An event joins on
arrival: its leaf makes new composites (the *delta*), and each internal node joins the delta
of one child with the other child's buffer, bottom-up, so every composite at the root is a new
match that contains the event. Predicates are placed at the lowest node that binds all their
variables; the window prunes every buffer.

Kleene leaves:

* skip-till-any-match: the leaf's composites are every qualifying subsequence (the same
  enumeration the oracle and the NFA do);
* maximal-grouping (docs/semantics.md 18): the Kleene leaf keeps its qualifying events and
  joins as ONE group composite; each join narrows the group's admissible position range
  (sequence: after / before the other side; conjunction: FAEM's ``A+ & B = (A+;B) | (B;A+)``
  gives two ranges), and the group is materialized once per root composite from the events in
  its range that pass the window and the predicates on the Kleene variable (a failing Kleene
  event leaves the group, the composite stays). A Kleene on the right keeps the match open
  until the window has passed (FAEM's Algorithm 2 appends later events to the composite);
  ``[n]`` takes every size-n combination of the group (Algorithm 3, late combination).

Tree shapes (``plan="tree:SHAPE"``, CLI ``--plan tree:SHAPE``): ``left`` (((A;B);C);D),
``right`` (A;(B;(C;D))), ``bushy`` ((A;B);(C;D)), ``inner`` (A;((B;C);D)), or any binary tree as
a bracket string over the top-level items, e.g. ``tree:((G;M);(D;I))``. Without a shape the
cheapest one by the cost model is used (:func:`shape_costs`).
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
import re
from collections.abc import Sequence
from typing import Any

from .. import ast
from ..errors import QueryValidationError
from ..frozen import dataclass
from ..plan.blocks import GroupPlan
from ..plan.expr import refs
from ..plan.groups import compile_group_plan
from ..plan.layout import GPOS, TS, WPOS
from ..plan.predicate import Predicate, Unsupported
from ..runtime.candidate import Candidate, cand_state, output_sort_key
from ..runtime.caps import over_budget, too_many_matches, too_many_runs
from ..runtime.matcher import MatcherOptions
from ..semantic.analyzed import AnalyzedQuery
from ..vocab import Strategy
from .registry import CompiledPlan, PlanKind, Stats

SHAPES = ("left", "right", "bushy", "inner")
INF = 1 << 62

# --------------------------------------------------------------------------------------------
# The plan (immutable)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Leaf:
    """A leaf buffer: one pattern variable (a Kleene variable when ``kleene``)."""

    var: str
    type: str | None
    slot: int
    bit: int
    kleene: bool
    lo: int = 1
    hi: int | None = 1
    preds: tuple[Predicate, ...] = ()


@dataclass(frozen=True, slots=True)
class Join:
    """An internal node: ``op`` is ``seq``, ``and`` or ``or``."""

    op: str
    left: TNode
    right: TNode
    vars: frozenset[str]
    preds: tuple[Predicate, ...] = ()
    apart: tuple[tuple[int, ...], ...] = ()
    """maximal-grouping: the Kleene leaf is an item of this AND; per item of the other side,
    the slots of its variables (the group lies all before or all after each of them)."""


TNode = Leaf | Join


@dataclass(frozen=True, slots=True)
class TreeShape:
    """One binary tree over the pattern, with the predicates placed."""

    name: str
    root: TNode
    text: str


@dataclass(frozen=True)
class TreePlan:
    """The tree plan: the query's logical-block data (layout, masks, RETURN) plus the
    candidate tree shapes; ``shape`` is the forced one (None: the cheapest)."""

    base: GroupPlan
    strategy: Strategy
    shapes: tuple[TreeShape, ...]
    grouping: bool
    kleene: Leaf | None
    """maximal-grouping: the Kleene leaf (at most one)."""
    group_preds: tuple[Predicate, ...]
    """maximal-grouping: the conjuncts on the Kleene variable, checked per group element."""
    shape: str | None = None
    adaptive: Any = None
    """``tree:adaptive``: the :class:`kleene.plans.adaptive.AdaptiveSpec` (re-choose the shape
    from the observed event mix while running); None: one shape for the whole run."""
    memo: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)
    """The statistics the chooser last estimated with (``kleene explain`` shows each shape's
    estimate under them)."""

    name = property(lambda self: self.base.name)
    order = property(lambda self: self.base.order)
    layout = property(lambda self: self.base.layout)
    negations = property(lambda self: ())
    key_attrs = property(lambda self: self.base.key_attrs)
    partition_by = property(lambda self: self.base.partition_by)
    equivalence = property(lambda self: self.base.equivalence)
    return_fns = property(lambda self: self.base.return_fns)
    window_us = property(lambda self: self.base.window_us)
    window_events = property(lambda self: self.base.window_events)

    def dot(self) -> str:
        """The chosen tree as Graphviz DOT (leaves are buffers, inner nodes joins)."""
        root = best_shape(self, self.memo.get("stats") or Stats()).root
        lines = ["digraph kleene {", "  rankdir=BT;", "  node [shape=box];"]
        counter = [0]

        def emit(n: TNode) -> str:
            me = f"n{counter[0]}"
            counter[0] += 1
            label = tree_text(n) if isinstance(n, Leaf) else _OPS[n.op]
            lines.append(f"  {me} [label={_dot_quote(label)}];")
            if isinstance(n, Join):
                for child in (n.left, n.right):
                    lines.append(f"  {emit(child)} -> {me};")
            return me

        emit(root)
        lines.append("}")
        return "\n".join(lines) + "\n"

    def get_shape(self, name: str) -> TreeShape:
        """A candidate shape by name."""
        for s in self.shapes:
            if s.name == name:
                return s
        raise QueryValidationError(f"tree plan: no shape {name!r}; available: "
                                   f"{', '.join(s.name for s in self.shapes)}")


def _dot_quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _items(p: ast.Pattern) -> list[ast.Pattern]:
    out: list[ast.Pattern] = []
    for i in p.items:  # type: ignore[union-attr]
        if isinstance(p, ast.Seq) and isinstance(i, ast.Seq):
            out += _items(i)
        else:
            out.append(i)
    return out


def _check(p: ast.Pattern) -> None:
    """Refuse what the tree cannot express (the reason is shown by ``kleene explain``)."""
    if isinstance(p, ast.EventPattern):
        return
    if isinstance(p, ast.Kleene):
        if not isinstance(p.body, ast.EventPattern):
            raise Unsupported("Kleene over a sub-pattern (a repeated group)")
        return
    if isinstance(p, ast.Not):
        raise Unsupported("NOT (the tree keeps no negation buffers yet)")
    if isinstance(p, ast.Within):
        raise Unsupported("a window on a sub-pattern")
    if isinstance(p, ast.AnyOf):
        raise Unsupported("ANY(k, ...)")
    for i in p.items:
        _check(i)


def _vars(p: ast.Pattern) -> list[str]:
    if isinstance(p, ast.EventPattern):
        return [p.var]
    if isinstance(p, ast.Kleene):
        return _vars(p.body)
    return [v for i in p.items for v in _vars(i)]  # type: ignore[union-attr]


def _op(p: ast.Pattern) -> str:
    return "seq" if isinstance(p, ast.Seq) else "and" if isinstance(p, ast.And) else "or"


_OPS = {"seq": ";", "and": "&", "or": "|"}


def _parse_brackets(text: str, names: Sequence[str]) -> Any:
    """``((G;M);(D;I))`` -> nested ``(left, op, right)`` tuples of item indices."""
    toks = re.findall(r"[()&;|]|[^\s()&;|]+", text)
    pos = 0

    def item() -> Any:
        nonlocal pos
        if pos >= len(toks):
            raise QueryValidationError(f"tree {text!r}: unexpected end")
        t = toks[pos]
        pos += 1
        if t == "(":
            left = item()
            if pos >= len(toks) or toks[pos] not in (";", "&", "|"):
                raise QueryValidationError(f"tree {text!r}: expected ';', '&' or '|' after "
                                           f"{toks[pos - 1]!r}")
            op = toks[pos]
            pos += 1
            right = item()
            if pos >= len(toks) or toks[pos] != ")":
                raise QueryValidationError(f"tree {text!r}: expected ')'; a node joins "
                                           "exactly two children")
            pos += 1
            return (left, op, right)
        if t in names:
            return names.index(t)
        if "e" + t in names:  # a FAEM numeric type name
            return names.index("e" + t)
        raise QueryValidationError(f"tree {text!r}: {t!r} is not an item of the pattern "
                                   f"({', '.join(names)})")

    got = item()
    if pos != len(toks):
        raise QueryValidationError(f"tree {text!r}: unexpected {toks[pos]!r}")
    return got


def _shape_tree(kind: str, n: int) -> Any:
    """Index trees for the named shapes over items 0..n-1."""
    def left(ix: list[int]) -> Any:
        t: Any = ix[0]
        for i in ix[1:]:
            t = (t, None, i)
        return t

    def right(ix: list[int]) -> Any:
        t: Any = ix[-1]
        for i in reversed(ix[:-1]):
            t = (i, None, t)
        return t

    def bushy(ix: list[int]) -> Any:
        if len(ix) == 1:
            return ix[0]
        h = (len(ix) + 1) // 2
        return (bushy(ix[:h]), None, bushy(ix[h:]))

    ix = list(range(n))
    if n == 1:
        return 0
    if kind == "left":
        return left(ix)
    if kind == "right":
        return right(ix)
    if kind == "bushy":
        return bushy(ix)
    return (0, None, left(ix[1:])) if n > 2 else left(ix)


class _Builder:
    """Builds one shape's node tree and places the predicates."""

    def __init__(self, aq: AnalyzedQuery, base: GroupPlan, preds: Sequence[Predicate],
                 grouping: bool) -> None:
        self.aq = aq
        self.base = base
        self.preds = list(preds)
        self.grouping = grouping
        self.bit = {v: 1 << i for i, v in enumerate(base.order)}
        self.slot = dict(base.layout.var_slots)

    def leaf(self, p: ast.Pattern) -> Leaf:
        if isinstance(p, ast.Kleene):
            ev = p.body
            assert isinstance(ev, ast.EventPattern)
            return Leaf(ev.var, ev.type, self.slot[ev.var], self.bit[ev.var], True, p.min,
                        p.max)
        assert isinstance(p, ast.EventPattern)
        return Leaf(p.var, p.type, self.slot[p.var], self.bit[p.var], False)

    def build(self, p: ast.Pattern, shape: Any) -> TNode:
        if isinstance(p, ast.EventPattern | ast.Kleene):
            return self.place(self.leaf(p))
        items = _items(p)
        op = _op(p)
        tree = shape if shape is not None else _shape_tree("left", len(items))
        return self._from(tree, items, op, p)

    def _from(self, t: Any, items: list[ast.Pattern], op: str, parent: ast.Pattern) -> TNode:
        if isinstance(t, int):
            return self.build(items[t], None)
        left, sym, right = t
        if sym is not None and sym != _OPS[op]:
            raise QueryValidationError(f"tree: {sym!r} joins items of a {op.upper()}; use "
                                       f"{_OPS[op]!r}")
        ln = self._from(left, items, op, parent)
        rn = self._from(right, items, op, parent)
        apart: tuple[tuple[int, ...], ...] = ()
        if self.grouping and op == "and":
            kl = [i for i in items if isinstance(i, ast.Kleene)]
            if kl:
                kvar = _vars(kl[0])[0]
                li, ri = _leaves(left), _leaves(right)
                side = ri if kvar in {v for i in li for v in _vars(items[i])} else (
                    li if kvar in {v for i in ri for v in _vars(items[i])} else None)
                if side is not None:
                    apart = tuple(tuple(self.slot[v] for v in _vars(items[i])) for i in side)
        return self.place(Join(op, ln, rn, ln_vars(ln) | ln_vars(rn), (), apart))

    def place(self, n: TNode) -> TNode:
        vs = ln_vars(n)
        here = [p for p in self.preds if p.vars <= vs]
        self.preds = [p for p in self.preds if not p.vars <= vs]
        return dataclasses.replace(n, preds=tuple(here))


def _leaves(t: Any) -> list[int]:
    return [t] if isinstance(t, int) else _leaves(t[0]) + _leaves(t[2])


def ln_vars(n: TNode) -> frozenset[str]:
    """The variables a node's subtree binds."""
    return frozenset((n.var,)) if isinstance(n, Leaf) else n.vars


def tree_text(n: TNode) -> str:
    """A node as a bracket string."""
    if isinstance(n, Leaf):
        if not n.kleene:
            return n.var
        q = "+" if (n.lo, n.hi) == (1, None) else "*" if (n.lo, n.hi) == (0, None) else (
            f"[{n.lo}]" if n.lo == n.hi else f"{{{n.lo},{'' if n.hi is None else n.hi}}}")
        return n.var + q
    return f"({tree_text(n.left)}{_OPS[n.op]}{tree_text(n.right)})"


def _anchored(p: ast.Pattern, kvar: str) -> bool:
    """Is there, on the way from the root to the Kleene leaf, a SEQ / AND with another item
    that always binds an event (so every group element lies on one side of a bound event)?"""
    def always(x: ast.Pattern) -> bool:
        if isinstance(x, ast.EventPattern):
            return True
        if isinstance(x, ast.Kleene):
            return False
        if isinstance(x, ast.Or):
            return all(always(i) for i in x.items)
        return any(always(i) for i in x.items)  # type: ignore[union-attr]

    def walk(x: ast.Pattern) -> bool:
        if isinstance(x, ast.EventPattern | ast.Kleene):
            return False
        items = _items(x)
        for i, it in enumerate(items):
            if kvar in _vars(it):
                if isinstance(x, ast.Seq | ast.And) and any(
                        always(o) for j, o in enumerate(items) if j != i):
                    return True
                return walk(it)
        return False

    return walk(p)


def compile_tree(analyzed: AnalyzedQuery) -> TreePlan:
    """The tree plan of a query, or :class:`Unsupported` with the reason."""
    strategy = analyzed.strategy
    if strategy not in (Strategy.SKIP_TILL_ANY_MATCH, Strategy.MAXIMAL_GROUPING):
        raise Unsupported(f"{strategy.value} (the tree evaluates skip-till-any-match and "
                          "maximal-grouping)")
    p = analyzed.pattern
    _check(p)
    base = compile_group_plan(dataclasses.replace(analyzed,
                                                  strategy=Strategy.SKIP_TILL_ANY_MATCH))
    grouping = strategy is Strategy.MAXIMAL_GROUPING
    preds = list(base.preds)
    group_preds: list[Predicate] = []
    kleene: Leaf | None = None
    if grouping:
        kl: list[ast.Kleene] = []

        def find(x: ast.Pattern) -> None:
            if isinstance(x, ast.Kleene):
                kl.append(x)
            elif not isinstance(x, ast.EventPattern):
                for i in x.items:  # type: ignore[union-attr]
                    find(i)
        find(p)
        if len(kl) > 1:
            raise Unsupported("maximal-grouping with more than one Kleene variable")
        if kl:
            kvar = _vars(kl[0])[0]
            if not _anchored(p, kvar):
                raise Unsupported("maximal-grouping of a Kleene variable with no event "
                                  "bound beside it (its groups are not unique)")
            lv = base.layout.list_vars
            for pr in base.preds:
                if kvar not in pr.vars:
                    continue
                info = refs(pr.expr, lv)
                if (kvar in info.closing or kvar in info.abs_index or kvar in info.prev_vars
                        or pr.general is not None):
                    raise Unsupported(f"maximal-grouping with a condition on {kvar} that is "
                                      "not element by element (an aggregate, [i-1], last, "
                                      "an index)")
                group_preds.append(pr)
            preds = [pr for pr in preds if kvar not in pr.vars]
    shapes = []
    top_items = _items(p) if isinstance(p, ast.Seq | ast.And | ast.Or) else [p]
    names = ["left", "right", "bushy", "inner"] if len(top_items) > 2 else ["left"]
    seen: set[str] = set()
    for nm in names:
        b = _Builder(analyzed, base, preds, grouping)
        root = b.build(p, _shape_tree(nm, len(top_items)) if len(top_items) > 1 else None)
        txt = tree_text(root)
        if txt in seen:
            continue
        seen.add(txt)
        shapes.append(TreeShape(nm, root, txt))
        if grouping and kleene is None:
            kleene = _find_kleene(root)
    return TreePlan(base, strategy, tuple(shapes), grouping, kleene, tuple(group_preds))


def _find_kleene(n: TNode) -> Leaf | None:
    if isinstance(n, Leaf):
        return n if n.kleene else None
    return _find_kleene(n.left) or _find_kleene(n.right)


def configure(plan: TreePlan, option: str, analyzed: AnalyzedQuery) -> TreePlan:
    """``tree:SHAPE``: force a named shape or a bracket string; ``tree:adaptive``: start with
    the cheapest shape and switch while running (kleene.plans.adaptive)."""
    option = option.strip()
    if option == "adaptive":
        from .adaptive import AdaptiveSpec

        return dataclasses.replace(plan, adaptive=AdaptiveSpec())
    if option in SHAPES:
        names = [s.name for s in plan.shapes]
        if option not in names:
            # an equal tree under another name (few items): any shape is the same tree
            return dataclasses.replace(plan, shape=names[0])
        return dataclasses.replace(plan, shape=option)
    if not option.startswith("("):
        raise QueryValidationError(
            f"unknown tree shape {option!r}; use {', '.join(SHAPES)}, adaptive or a bracket "
            "string over the pattern's items such as ((a;b);(c;d))")
    p = analyzed.pattern
    if not isinstance(p, ast.Seq | ast.And | ast.Or):
        raise QueryValidationError("tree: a bracket string needs a SEQ, AND or OR pattern")
    items = _items(p)
    names = [_vars(i)[0] if isinstance(i, ast.EventPattern | ast.Kleene) else f"#{k}"
             for k, i in enumerate(items)]
    t = _parse_brackets(option, names)
    if sorted(_leaves(t)) != list(range(len(items))):
        raise QueryValidationError(f"tree {option!r} must name every item of the pattern "
                                   f"once ({', '.join(names)})")
    if isinstance(p, ast.Seq) and _leaves(t) != list(range(len(items))):
        raise QueryValidationError(f"tree {option!r}: the items of a SEQ keep their order "
                                   f"({', '.join(names)}); only AND and OR items may be "
                                   "reordered")
    preds = [pr for pr in plan.base.preds if pr not in plan.group_preds]
    b = _Builder(analyzed, plan.base, preds, plan.grouping)
    root = b.build(p, t)
    shape = TreeShape(option, root, tree_text(root))
    return dataclasses.replace(plan, shapes=plan.shapes + (shape,), shape=option)


# --------------------------------------------------------------------------------------------
# Cost model
# --------------------------------------------------------------------------------------------


def _est(n: TNode, plan: TreePlan, stats: Stats,
         nw: float) -> tuple[float, float, float, float]:
    """(composites in the buffer, new composites per event, join work per event, composites
    held in the subtree's buffers)."""
    sel = stats.selectivity
    if isinstance(n, Leaf):
        share = stats.share(n.type) * (sel if plan.base.masks.get(n.var) is not None else 1.0)
        k = share * nw
        if n.kleene and plan.grouping:
            return 1.0, 0.0, share, k
        if n.kleene:
            size = min(2.0 ** min(k, 60.0) - 1.0, 1e18)
            return size, size / max(nw, 1.0) * 2.0, share, size
        return k, share, 0.0, k
    ls, lr, lw, lh = _est(n.left, plan, stats, nw)
    rs, rr, rw, rh = _est(n.right, plan, stats, nw)
    f = sel ** len(n.preds)
    if n.op == "or":
        return ls + rs, lr + rr, lw + rw, lh + rh
    apart = 2.0 if n.apart else 1.0
    if n.op == "seq":
        # a left delta only meets empty right composites; a right delta scans the left buffer
        if ORDERED:
            # the left items before the right ones: 1 of C(p + q, p) interleavings of p and q
            # items in the window; a new right composite (its last event the newest) finds
            # 1 in C(p + q - 1, p) of the left buffer before its first event, and the join
            # scans only those (it bisects the buffer there). A maximal-grouping Kleene leaf
            # is not an item: its group is fitted in later.
            p, q = _nitems(n.left, plan), _nitems(n.right, plan)
            size = ls * rs * f / math.comb(p + q, p)
            before = 1.0 / math.comb(max(p + q - 1, p), p)
            work = rr * ls * before + lr
            rate = rr * ls * f * before
            if _static(n.right, plan):  # each new left composite with the group
                rate += lr * f
        else:
            work = rr * ls + lr
            size = ls * rs * f * 0.5
            rate = size / max(nw, 1.0)
    else:
        work = rr * ls + lr * rs
        size = ls * rs * f * apart
        rate = (rr * ls + lr * rs) * f * apart if ORDERED else size / max(nw, 1.0)
    return (min(size, 1e18), min(rate, 1e18), lw + rw + work, min(lh + rh + size, 1e18))


def _static(n: TNode, plan: TreePlan) -> bool:
    """A maximal-grouping Kleene leaf: one group composite, never a delta."""
    return isinstance(n, Leaf) and n.kleene and plan.grouping


def _nitems(n: TNode, plan: TreePlan) -> int:
    """The items of a subtree that order a sequence join (not a maximal-grouping Kleene)."""
    if isinstance(n, Leaf):
        return 0 if _static(n, plan) else 1
    return _nitems(n.left, plan) + _nitems(n.right, plan)


def shape_terms(plan: TreePlan, shape: TreeShape, stats: Stats) -> dict[str, float]:
    """The tree's cost terms per input event for one shape (each weighted by a fitted
    constant in :func:`shape_cost`):

    * ``events``: the share of input events of the pattern's classes (each goes down the
      tree once);
    * ``join``: the composite pairs the joins consider (a delta against the other side's
      buffer);
    * ``out``: the composites made at the root (complete matches, or maximal-grouping root
      composites), each turned into a candidate for the runtime's policies;
    * ``group``: maximal-grouping only, the scan of the Kleene buffer per root composite plus
      the size-n combinations of ``[n]`` (late combination);
    * ``held``: the composites kept in the internal nodes' buffers, times ``events`` (window
      pruning and the stale entries a join scans between prunings grow with what is held).
    """
    nw = stats.events_in(plan.window_us, plan.window_events, plan.key_attrs)
    _size, rate, work, _held = _est(shape.root, plan, stats, nw)
    seen = min(sum(stats.share(t) for t in _leaf_types(shape.root)), 1.0)
    held = _held_inner(shape.root, plan, stats, nw)
    extra = 0.0
    k = plan.kleene
    if plan.grouping and k is not None:
        group = stats.share(k.type) * nw
        extra = rate * group  # the scan of the Kleene buffer per match
        if k.hi is not None:  # late combination: every size-n subset is a match
            extra += rate * math.comb(max(int(round(group)), k.hi), k.hi)
    return {"events": seen, "join": work, "out": rate, "group": extra,
            "held": min(seen * held, 1e18)}


def _held_inner(n: TNode, plan: TreePlan, stats: Stats, nw: float) -> float:
    """Composites held in the internal nodes' buffers of a subtree."""
    if isinstance(n, Leaf):
        return 0.0
    return (_est(n, plan, stats, nw)[0] + _held_inner(n.left, plan, stats, nw)
            + _held_inner(n.right, plan, stats, nw))


def shape_work(plan: TreePlan, shape: TreeShape, stats: Stats) -> float:
    """The part of a shape's estimate that depends on the shape (in the chooser's unit):
    every term of :func:`shape_terms` but the per-event ones, times its constant."""
    t = shape_terms(plan, shape, stats)
    return min(TREE_JOIN * t["join"] + TREE_OUT * t["out"] + TREE_GROUP * t["group"]
               + TREE_HELD * t["held"], 1e18)


def shape_cost(plan: TreePlan, shape: TreeShape, stats: Stats) -> float:
    """Estimated work per input event of one tree shape on the chooser's scale (the NFA's
    cost of one event of the pattern's types): :data:`TREE_EVENT` per event of the pattern's
    classes plus :func:`shape_work`."""
    seen = min(sum(stats.share(t) for t in _leaf_types(shape.root)), 1.0)
    return min(TREE_EVENT * seen + shape_work(plan, shape, stats), 1e18)


def _leaf_types(n: TNode) -> set[str | None]:
    return {n.type} if isinstance(n, Leaf) else _leaf_types(n.left) | _leaf_types(n.right)


ORDERED = True
"""A sequence join keeps the composite pairs whose items come in order (1 in C(p + q, p)
for ``p`` and ``q`` items); False: one in two (an ablation for ``benchmarks/chooser.py``)."""
TREE_EVENT = 2.74
"""The tree's work per event of the pattern's classes (the walk down the tree, leaf
buffers), in the chooser's unit. This and the constants below are fitted on
``benchmarks/chooser.py`` (docs/benchmarks.md, "The plan chooser's scale")."""
TREE_JOIN = 4.15
"""One composite pair a join considers (per input event), same unit."""
TREE_OUT = 0.0
"""One composite made at the root (per input event), same unit."""
TREE_GROUP = 0.454
"""maximal-grouping: one Kleene event scanned (or one combination made) for a root
composite, same unit."""
TREE_HELD = 0.0
"""One composite held in an internal node's buffer, per event of the pattern's classes,
same unit."""


def shape_costs(plan: TreePlan, stats: Stats) -> list[tuple[str, str, float]]:
    """(name, tree, estimated cost) per candidate shape."""
    return [(s.name, s.text, shape_cost(plan, s, stats)) for s in plan.shapes]


def best_shape(plan: TreePlan, stats: Stats) -> TreeShape:
    """The forced shape, else the cheapest one."""
    if plan.shape is not None:
        return plan.get_shape(plan.shape)
    return min(plan.shapes, key=lambda s: shape_cost(plan, s, stats))


def shape_label(plan: TreePlan, stats: Stats) -> str:
    """The shape a run takes: ``adaptive``, the forced one, or the cheapest by ``stats``."""
    if plan.adaptive is not None and len(plan.shapes) > 1:
        return "adaptive"
    return best_shape(plan, stats).name


def _cost(plan: TreePlan, stats: Stats) -> float:
    plan.memo["stats"] = stats
    return shape_cost(plan, best_shape(plan, stats), stats)


def _explain(plan: TreePlan) -> list[str]:
    stats = plan.memo.get("stats") or Stats()
    best = best_shape(plan, stats)
    how = "forced" if plan.shape else "lowest estimated cost"
    if plan.adaptive is not None:
        how = (f"adaptive: the starting shape, {plan.adaptive.describe(plan)}"
               if len(plan.shapes) > 1 else "adaptive, but the pattern has one shape")
    out = [f"tree plan ({plan.strategy.value}); shape {best.name} ({how}):"]
    for name, text, c in shape_costs(plan, stats):
        mark = "*" if name == best.name else " "
        out.append(f"  {mark} tree:{name:<8} {text:<36} estimated cost {c:,.1f} per event")
    out += _node_lines(best.root, "  ")
    if plan.group_preds:
        out.append("  group conditions (per Kleene element): "
                   + "; ".join(_expr(p) for p in plan.group_preds))
    return out


def _expr(p: Predicate) -> str:
    from ..syntax import expr_text
    return expr_text(p.expr)


def _node_lines(n: TNode, ind: str) -> list[str]:
    if isinstance(n, Leaf):
        what = "Kleene leaf" if n.kleene else "leaf"
        line = f"{ind}{what} {tree_text(n)} ({n.type or 'ANY'})"
        if n.preds:
            line += " where " + "; ".join(_expr(p) for p in n.preds)
        return [line]
    line = f"{ind}{n.op.upper()} {tree_text(n)}"
    if n.preds:
        line += " where " + "; ".join(_expr(p) for p in n.preds)
    if n.apart:
        line += " (Kleene item: before or after each other item)"
    return [line] + _node_lines(n.left, ind + "  ") + _node_lines(n.right, ind + "  ")


# --------------------------------------------------------------------------------------------
# The matcher
# --------------------------------------------------------------------------------------------

#: A composite: (B, P, gmin, gmax, tsmin, tsmax, wmin, wmax, R). ``P`` the positions of its
#: events, ``R`` (maximal-grouping) the admissible position ranges of the Kleene group, or
#: None when the subtree has no Kleene leaf. An *empty* composite has ``P == ()``.
Comp = tuple[Any, ...]
Fast = tuple[int | None, tuple[int, ...], tuple[Any, ...], bool]
"""A join node's fast-path data (:meth:`TreeMatcher._fast_info`)."""


class TreeState:
    """Per-key state: one buffer per node, the Kleene store, open (pending) matches."""

    __slots__ = ("bufs", "kstore", "open", "pending", "last_wpos", "last_ts", "since",
                 "close_at")

    def __init__(self, nnodes: int) -> None:
        self.bufs: list[list[Comp]] = [[] for _ in range(nnodes)]
        self.kstore: list[list[Any]] = [[] for _ in range(nnodes)]
        """Per Kleene leaf (by node index): skip-till-any-match, its subsequences;
        maximal-grouping, its events."""
        self.open: list[Comp] = []
        self.pending: list[Candidate] = []
        self.last_wpos = -1
        self.last_ts = -(2 ** 62)
        self.since = 0
        self.close_at: tuple[int, int] | None = None
        """(time, position) from which the first open group can close (None: unknown)."""


class TreeMatcher:
    """Evaluates one tree shape per key (the Matcher protocol, runtime/matcher.py)."""

    def __init__(self, plan: TreePlan, shape: TreeShape, options: MatcherOptions) -> None:
        self.plan = plan
        self.shape = shape
        self.max_runs = options.max_runs
        self.on_cap = options.on_cap
        self.max_matches_per_call = options.max_matches_per_call
        self.truncated_runs = 0
        self.truncated_matches = 0
        self.counted = 0
        self.grouping = plan.grouping
        self.kleene = _find_kleene(shape.root) if plan.grouping else None
        self.has_trailing = self.kleene is not None
        self.decides_negation = False
        self.slot = dict(plan.layout.var_slots)
        self.nslots = len(self.slot)
        self.iter_slot = {v: plan.layout.var_slots[v] for v in plan.layout.list_vars}
        self.W = plan.window_us
        self.CW = plan.window_events
        base = plan.base
        self.empty_B = tuple(None for _ in range(self.nslots))
        self.nodes: list[TNode] = []
        self.index: dict[int, int] = {}
        self._number(shape.root)
        self.static: dict[int, list[Comp]] = {}
        self._statics(shape.root)
        self.kidx = None if self.kleene is None else self.index[id(self.kleene)]
        self.kleaves = [i for i, x in enumerate(self.nodes) if isinstance(x, Leaf) and x.kleene]
        self.var_types = base.var_types
        self.masks = base.masks
        self.fast: dict[int, Fast] = {}
        for x in self.nodes:
            if isinstance(x, Join):
                f = self._fast_info(x)
                if f is not None:
                    self.fast[id(x)] = f

    def _fast_info(self, n: Join) -> Fast | None:
        """A sequence or conjunction node whose joins of two composites that bind events
        take a fast path (:meth:`_seq_right`, :meth:`_and_many`): every condition placed
        here a plain one (no list variable it ranges over, no optional variable), and no
        Kleene item of this AND under maximal-grouping (its ranges are split per item).
        ``(split, left slots, condition functions, overlap)``: ``split`` is the first slot of
        the right side when every left slot is before it; ``overlap``: one event can bind a
        variable on each side (a type in common, or an untyped variable)."""
        if n.op not in ("seq", "and") or n.apart:
            return None
        fns = []
        for p in n.preds:
            if p.opt_slots or p.general is not None or p.iter_var is not None:
                return None
            fns.append(p.compiled.fn)
        lv, rv = ln_vars(n.left), ln_vars(n.right)
        ls = sorted(self.slot[v] for v in lv)
        rs = sorted(self.slot[v] for v in rv)
        lt = {self.plan.base.var_types[v] for v in lv}
        rt = {self.plan.base.var_types[v] for v in rv}
        overlap = None in lt or None in rt or bool(lt & rt)
        return (rs[0] if ls[-1] < rs[0] else None, tuple(ls), tuple(fns), overlap)

    def _number(self, n: TNode) -> None:
        self.index[id(n)] = len(self.nodes)
        self.nodes.append(n)
        if isinstance(n, Join):
            self._number(n.left)
            self._number(n.right)

    def _statics(self, n: TNode) -> list[Comp]:
        """The node's composites that bind no event (empty Kleene, the Kleene group)."""
        out: list[Comp] = []
        if isinstance(n, Leaf):
            if n.kleene and self.grouping:
                out = [(self._B(n.slot, None), (), None, None, None, None, None, None,
                        ((-1, INF),))]
            elif n.kleene and n.lo == 0:
                c = (self._B(n.slot, ()), (), None, None, None, None, None, None, None)
                if self._preds_ok(n.preds, c[0]):
                    out = [c]
        else:
            ls, rs = self._statics(n.left), self._statics(n.right)
            if n.op == "or":
                out = ls + rs
            else:
                out = [j for a in ls for b in rs for j in self._join(n, a, b)]
        self.static[id(n)] = out
        return out

    def _B(self, slot: int, value: Any) -> tuple[Any, ...]:
        B = list(self.empty_B)
        B[slot] = value
        return tuple(B)

    # -- protocol ----------------------------------------------------------------------------
    def mask_specs(self) -> list[tuple[str | None, Any]]:
        """(type, vectorized predicate) per positive variable, in pattern order."""
        return [(self.var_types[v], self.masks[v]) for v in self.plan.order]

    def new_state(self) -> TreeState:
        """Fresh per-key state."""
        return TreeState(len(self.nodes))

    def dump_state(self, st: TreeState) -> Any:
        """Plain data for a snapshot."""
        return ([list(b) for b in st.bufs], [list(k) for k in st.kstore], list(st.open),
                [cand_state(c) for c in st.pending], st.last_wpos, st.last_ts, st.since)

    def load_state(self, data: Any) -> TreeState:
        """Inverse of :meth:`dump_state`."""
        bufs, kstore, opn, pending, lw, lt, since = data
        st = TreeState(len(self.nodes))
        st.bufs = [list(b) for b in bufs]
        st.kstore = [list(k) for k in kstore]
        st.open = list(opn)
        st.pending = [Candidate(*c) for c in pending]
        st.last_wpos, st.last_ts, st.since = lw, lt, since
        return st

    def sort_key(self, c: Candidate) -> tuple[Any, ...]:
        """The documented output order."""
        return output_sort_key(c, self.plan.order, self.slot)

    def negation_ok(self, st: TreeState, c: Candidate) -> bool:
        """No NOT in a tree plan."""
        return True

    def match_preds_ok(self, c: Candidate) -> bool:
        """Every conjunct was checked in the tree."""
        return True

    def needs_trailing(self, c: Candidate) -> bool:
        """Open groups are kept by the matcher itself (``pending``)."""
        return False

    def admit_pending(self, st: TreeState, c: Candidate) -> None:
        """Not used: open groups never leave the matcher before they close."""
        st.pending.append(c)

    def forget(self, c: Candidate) -> None:
        """No bookkeeping."""
        del c

    def oldest(self, st: TreeState) -> int | None:
        """The smallest position a live composite binds."""
        lows = [c[2] for b in st.bufs for c in b if c[2] is not None]
        lows += [c[2] for c in st.open]
        if self.grouping and self.kidx is not None and st.kstore[self.kidx]:
            lows.append(st.kstore[self.kidx][0][GPOS])
        return min(lows, default=None)

    def prune(self, st: TreeState) -> None:
        """Nothing kept for negation."""
        del st

    def release_pending(self, st: TreeState, watermark: int | None) -> list[Candidate]:
        """Open groups (a Kleene with no event bound after it) whose window has passed."""
        if not st.open:
            return []
        keep: list[Comp] = []
        keep_p: list[Candidate] = []
        out: list[Candidate] = []
        for c, ph in zip(st.open, st.pending, strict=True):
            if (watermark is None
                    or (self.W is not None and watermark - c[4] > self.W)
                    or (self.CW is not None and st.last_wpos + 1 - c[6] >= self.CW)):
                out += self._materialize(st, c)
            else:
                keep.append(c)
                keep_p.append(ph)
        st.open, st.pending = keep, keep_p
        st.close_at = None
        return out

    # -- evaluation --------------------------------------------------------------------------
    def process(self, st: TreeState, recs: list[Any], bits: list[int], out: list[Candidate],
                max_matches: int | None, budget: int | None = None) -> None:
        """Feed one key's events in order; complete matches go to ``out``."""
        root = self.shape.root
        for e, b in zip(recs, bits, strict=True):
            st.last_ts, st.last_wpos = e[TS], e[WPOS]
            if not b:
                continue
            ca = st.close_at
            if st.open and (ca is None or e[TS] > ca[0] or e[WPOS] >= ca[1]):
                # open groups that no event from here on can join are final: hand them over
                out += self._close(st, e[TS], e[WPOS])
            st.since += 1
            if st.since >= 64:
                st.since = 0
                self._expire(st, e)
            new = self._delta(st, root, e, b)
            nm = 0
            for c in new:
                if self.grouping and c[8] is not None:
                    if any(h >= INF for _l, h in c[8]):
                        st.open.append(c)
                        st.pending.append(_placeholder(c))
                        if st.close_at is not None:
                            d = self._deadline([c])
                            st.close_at = (min(st.close_at[0], d[0]),
                                           min(st.close_at[1], d[1]))
                        continue
                    for m in self._materialize(st, c):
                        out.append(m)
                        nm += 1
                else:
                    out.append(self._candidate(c))
                    nm += 1
            if max_matches is not None and nm > max_matches:
                drop = too_many_matches(self, e, nm, max_matches)
                del out[len(out) - drop:]
            if budget is not None and len(out) > budget:
                over_budget(self, e, out, budget)
            if self.max_runs is not None:
                total = sum(len(x) for x in st.bufs) + (
                    0 if self.grouping else sum(len(st.kstore[i]) for i in self.kleaves))
                if total > self.max_runs:
                    self._cap_runs(st, total, e)

    def _close(self, st: TreeState, ts: int, wpos: int) -> list[Candidate]:
        """Materialize the open groups that an event at (``ts``, ``wpos``) or later cannot
        join any more."""
        W, CW = self.W, self.CW
        keep: list[Comp] = []
        keep_p: list[Candidate] = []
        out: list[Candidate] = []
        for c, ph in zip(st.open, st.pending, strict=True):
            if (W is not None and ts - c[4] > W) or (CW is not None and wpos - c[6] >= CW):
                out += self._materialize(st, c)
            else:
                keep.append(c)
                keep_p.append(ph)
        st.open, st.pending = keep, keep_p
        st.close_at = self._deadline(keep)
        return out

    def _deadline(self, opens: list[Comp]) -> tuple[int, int]:
        """The earliest (time, position) at which one of ``opens`` closes."""
        if not opens:
            return (INF, INF)
        return (INF if self.W is None else min(c[4] for c in opens) + self.W,
                INF if self.CW is None else min(c[6] for c in opens) + self.CW)

    def _cap_runs(self, st: TreeState, total: int, e: Any = None) -> None:
        drop = too_many_runs(self, total, e)
        lists = st.bufs + ([] if self.grouping else [st.kstore[i] for i in self.kleaves])
        while drop > 0:
            big = max(lists, key=len)
            k = min(drop, len(big))
            del big[:k]
            drop -= k

    def _expire(self, st: TreeState, e: Any) -> None:
        W, CW = self.W, self.CW
        if W is None and CW is None:
            return
        ts, wp = e[TS], e[WPOS]

        def alive(c: Comp) -> bool:
            return c[4] is None or ((W is None or ts - c[4] <= W)
                                    and (CW is None or wp - c[6] < CW))
        for i, buf in enumerate(st.bufs):
            if buf:
                st.bufs[i] = [c for c in buf if alive(c)]
        if self.grouping:
            if self.kidx is None or not st.kstore[self.kidx]:
                return
            lim_ts = ts - W if W is not None else None
            lim_w = wp - CW if CW is not None else None
            if st.open:
                if lim_ts is not None:
                    lim_ts = min(lim_ts, min(c[4] for c in st.open))
                if lim_w is not None:
                    lim_w = min(lim_w, min(c[6] for c in st.open))
            k = 0
            ks = st.kstore[self.kidx]
            while k < len(ks) and ((lim_ts is not None and ks[k][TS] < lim_ts)
                                   or (lim_w is not None and ks[k][WPOS] <= lim_w)):
                k += 1
            del ks[:k]
        else:
            for i in self.kleaves:
                st.kstore[i] = [s for s in st.kstore[i]
                                if (W is None or ts - s[0][TS] <= W)
                                and (CW is None or wp - s[0][WPOS] < CW)]

    def _delta(self, st: TreeState, n: TNode, e: Any, b: int) -> list[Comp]:
        if isinstance(n, Leaf):
            if not b & n.bit:
                return []
            if not n.kleene:
                c = (self._B(n.slot, e), (e[GPOS],), e[GPOS], e[GPOS], e[TS], e[TS], e[WPOS],
                     e[WPOS], None)
                return [c] if self._preds_ok(n.preds, c[0]) else []
            if self.grouping:
                st.kstore[self.index[id(n)]].append(e)
                return []
            return self._kleene_delta(st, n, e)
        i = self.index[id(n)]
        dl = self._delta(st, n.left, e, b)
        dr = self._delta(st, n.right, e, b)
        if not dl and not dr:
            return []
        li, ri = self.index[id(n.left)], self.index[id(n.right)]
        out: list[Comp] = []
        if n.op == "or":
            out = dl + dr
        else:
            join = self._join
            lbuf, rbuf = st.bufs[li], st.bufs[ri]
            lst, rst = self.static[id(n.left)], self.static[id(n.right)]
            fast = self.fast.get(id(n))
            if dl:
                for a in dl:
                    if n.op == "and":
                        if fast is not None and a[1]:
                            out += self._and_many(fast, a, rbuf, True)
                        else:
                            for c in rbuf:
                                out += join(n, a, c)
                    for c in rst:
                        out += join(n, a, c)
            if dr:
                for c in dr:
                    if fast is not None and c[1]:
                        out += (self._seq_right(fast, lbuf, c) if n.op == "seq"
                                else self._and_many(fast, c, lbuf, False))
                    else:
                        for a in lbuf:
                            out += join(n, a, c)
                    for a in lst:
                        out += join(n, a, c)
        if dl:
            st.bufs[li].extend(dl)
        if dr:
            st.bufs[ri].extend(dr)
        del i
        return out

    def _and_many(self, fast: Fast, x: Comp, many: list[Comp], x_left: bool) -> list[Comp]:
        """:meth:`_join` at a conjunction node of one composite ``x`` (it holds the newest
        event) with every composite of the other side's buffer ``many`` (``x_left``: ``x`` is
        the left one), specialized as :meth:`_seq_right` is, without an order."""
        split, lslots, fns, overlap = fast
        W, CW = self.W, self.CW
        x0, x1, x2, x3, x4, x5, x6, x7, xr = x
        xs = set(x1) if overlap else None
        out = []
        for y in many:
            if xs is not None and not xs.isdisjoint(y[1]):
                continue
            tsmin = x4 if x4 < y[4] else y[4]
            tsmax = x5 if x5 > y[5] else y[5]
            if W is not None and tsmax - tsmin > W:
                continue
            wmin = x6 if x6 < y[6] else y[6]
            wmax = x7 if x7 > y[7] else y[7]
            if CW is not None and wmax - wmin >= CW:
                continue
            a0, c0 = (x0, y[0]) if x_left else (y[0], x0)
            if split is not None:
                B = a0[:split] + c0[split:]
            else:
                Bl = list(c0)
                for sl in lslots:
                    Bl[sl] = a0[sl]
                B = tuple(Bl)
            if fns:
                ok = True
                for f in fns:
                    if f(B, 0) is not True:
                        ok = False
                        break
                if not ok:
                    continue
            R = xr if xr is not None else y[8]
            out.append((B, x1 + y[1] if x_left else y[1] + x1,
                        x2 if x2 < y[2] else y[2], x3 if x3 > y[3] else y[3],
                        tsmin, tsmax, wmin, wmax, R))
        return out

    def _seq_right(self, fast: Fast, lbuf: list[Comp], c: Comp) -> list[Comp]:
        """:meth:`_join` of a right composite ``c`` (it holds the newest event) with the left
        buffer of a sequence node, specialized: a buffer is in the order of its composites'
        last events, so the candidates (every event before ``c``'s first) are a prefix found
        by bisection; positions and times grow along a sequence, so the window is one
        comparison per side and the composite's bounds are ``a``'s first and ``c``'s last;
        a Kleene group's range (maximal-grouping) is narrowed as in :meth:`_join`."""
        split, lslots, fns, _overlap = fast
        k = bisect.bisect_left(lbuf, c[2], key=_gmax)
        if not k:
            return []
        c0, c1, c3, c5, c7, rc, cmin = c[0], c[1], c[3], c[5], c[7], c[8], c[2]
        lo_ts = -INF if self.W is None else c5 - self.W
        lo_w = -INF if self.CW is None else c7 - self.CW
        out = []
        for a in lbuf[:k] if k < len(lbuf) else lbuf:
            if a[4] < lo_ts or a[6] <= lo_w:
                continue
            if split is not None:
                B = a[0][:split] + c0[split:]
            else:
                Bl = list(c0)
                a0 = a[0]
                for sl in lslots:
                    Bl[sl] = a0[sl]
                B = tuple(Bl)
            if fns:
                ok = True
                for f in fns:
                    if f(B, 0) is not True:
                        ok = False
                        break
                if not ok:
                    continue
            R = a[8]
            if R is not None:  # the Kleene group is on the left: it ends before c
                R = tuple((lo, min(hi, cmin)) for lo, hi in R)
            elif rc is not None:  # ... on the right: it starts after a
                R = tuple((max(lo, a[3]), hi) for lo, hi in rc)
            out.append((B, a[1] + c1, a[2], c3, a[4], c5, a[6], c7, R))
        return out

    def _kleene_delta(self, st: TreeState, n: Leaf, e: Any) -> list[Comp]:
        W, CW = self.W, self.CW
        new = [(e,)]
        store = st.kstore[self.index[id(n)]]
        for s in store:
            if n.hi is not None and len(s) >= n.hi:
                continue
            if W is not None and e[TS] - s[0][TS] > W:
                continue
            if CW is not None and e[WPOS] - s[0][WPOS] >= CW:
                continue
            new.append(s + (e,))
        store.extend(new)
        out = []
        for s in new:
            if len(s) < n.lo:
                continue
            B = self._B(n.slot, s)
            if not self._preds_ok(n.preds, B):
                continue
            P = tuple(r[GPOS] for r in s)
            out.append((B, P, s[0][GPOS], e[GPOS], s[0][TS], e[TS], s[0][WPOS], e[WPOS], None))
        return out

    def _preds_ok(self, preds: Sequence[Predicate], B: tuple[Any, ...]) -> bool:
        for p in preds:
            it = p.iter_var
            if not p.check_all(B, None if it is None else self.iter_slot[it]):
                return False
        return True

    def _join(self, n: Join, a: Comp, c: Comp) -> list[Comp]:
        """Join a left composite ``a`` with a right composite ``c`` at node ``n``."""
        ae, ce = bool(a[1]), bool(c[1])
        if ae and ce:
            if n.op == "seq":
                if a[3] >= c[2]:
                    return []
            elif not set(a[1]).isdisjoint(c[1]):
                return []
            tsmin, tsmax = min(a[4], c[4]), max(a[5], c[5])
            wmin, wmax = min(a[6], c[6]), max(a[7], c[7])
            if self.W is not None and tsmax - tsmin > self.W:
                return []
            if self.CW is not None and wmax - wmin >= self.CW:
                return []
            P = a[1] + c[1]
            g = (min(a[2], c[2]), max(a[3], c[3]), tsmin, tsmax, wmin, wmax)
        elif ae:
            P, g = a[1], a[2:8]
        elif ce:
            P, g = c[1], c[2:8]
        else:
            P, g = (), (None,) * 6
        B = tuple(x if x is not None else y for x, y in zip(a[0], c[0], strict=True))
        if n.preds and not self._preds_ok(n.preds, B):
            return []
        R = a[8] if a[8] is not None else c[8]
        if R is not None and (ae or ce):
            if n.op == "seq":
                if a[8] is not None and ce:
                    R = tuple((lo, min(hi, c[2])) for lo, hi in R)
                elif c[8] is not None and ae:
                    R = tuple((max(lo, a[3]), hi) for lo, hi in R)
            elif n.apart:
                other = c if a[8] is not None else a
                if other[1]:
                    for slots in n.apart:
                        ps = [r[GPOS] for s in slots for r in _recs(other[0][s])]
                        if not ps:
                            continue
                        x0, x1 = min(ps), max(ps)
                        R = tuple(r for lo, hi in R for r in ((lo, min(hi, x0)),
                                                              (max(lo, x1), hi)))
        return [(B, P, *g, R)]

    # -- output ------------------------------------------------------------------------------
    def _candidate(self, c: Comp) -> Candidate:
        return Candidate(c[0], c[4], c[6], c[3], c[5], c[7], tuple(sorted(c[1])))

    def _materialize(self, st: TreeState, c: Comp) -> list[Candidate]:
        """The matches of a root composite: its Kleene group(s) from the Kleene store."""
        k = self.kleene
        assert k is not None
        ks = st.kstore[self.index[id(k)]]
        W, CW = self.W, self.CW
        taken = set(c[1])
        groups = []
        for lo, hi in c[8]:
            if lo >= hi:
                continue
            i = bisect.bisect_right(ks, lo, key=_gpos)
            j = bisect.bisect_left(ks, hi, lo=i, key=_gpos)
            g = []
            for m in ks[i:j]:
                if m[GPOS] in taken:
                    continue
                if c[1]:
                    if W is not None and max(c[5], m[TS]) - min(c[4], m[TS]) > W:
                        continue
                    if CW is not None and max(c[7], m[WPOS]) - min(c[6], m[WPOS]) >= CW:
                        continue
                if self.plan.group_preds:
                    B1 = c[0][:k.slot] + ((m,),) + c[0][k.slot + 1:]
                    if not self._preds_ok(self.plan.group_preds, B1):
                        continue
                g.append(m)
            if g:
                groups.append(g)
        lists: list[tuple[Any, ...]] = []
        lo_n = max(k.lo, 1)
        for g in groups:
            if len(g) < lo_n:
                continue
            if k.hi is None:
                lists.append(tuple(g))
            else:
                for size in range(lo_n, min(k.hi, len(g)) + 1):
                    lists += [tuple(x) for x in itertools.combinations(g, size)]
        if not groups and k.lo == 0:
            lists.append(())
        out = []
        for lst in lists:
            B = c[0][:k.slot] + (lst,) + c[0][k.slot + 1:]
            P = c[1] + tuple(r[GPOS] for r in lst)
            ts = [c[4], c[5]] + [r[TS] for r in lst]
            wp = [c[6], c[7]] + [r[WPOS] for r in lst]
            out.append(Candidate(B, min(ts), min(wp), max(P), max(ts), max(wp),
                                 tuple(sorted(P))))
        return out


def _gpos(r: Any) -> int:
    return int(r[GPOS])


def _gmax(c: Comp) -> int:
    return int(c[3])


def _placeholder(c: Comp) -> Candidate:
    """What the runtime sees of an open match: its earliest possible sort position."""
    return Candidate(c[0], c[4], c[6], c[3], c[5], c[7], tuple(sorted(c[1])))


def _recs(x: Any) -> tuple[Any, ...]:
    if x is None:
        return ()
    if isinstance(x, tuple) and (not x or isinstance(x[0], tuple)):
        return x
    return (x,)


def _matcher(cp: CompiledPlan, options: MatcherOptions) -> Any:
    plan: TreePlan = cp.plan
    if plan.adaptive is not None and len(plan.shapes) > 1:
        from .adaptive import AdaptiveTreeMatcher

        return AdaptiveTreeMatcher(plan, cp.choice.stats, options)
    return TreeMatcher(plan, best_shape(plan, cp.choice.stats), options)


PLAN = PlanKind(
    name="tree",
    description="FAEM / ZStream tree of buffers (left, right, bushy, inner or any bracket "
                "shape), with FAEM's maximal Kleene groups",
    compile=compile_tree,
    matcher=_matcher,
    cost=_cost,
    explain=_explain,
    configure=configure,
)

__all__ = ["PLAN", "SHAPES", "Join", "Leaf", "TreeMatcher", "TreePlan", "TreeShape",
           "best_shape", "compile_tree", "configure", "shape_cost", "shape_label", "shape_work",
           "shape_costs", "tree_text"]
