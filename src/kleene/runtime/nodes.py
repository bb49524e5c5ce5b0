"""The semantics of logical-block nodes (:mod:`kleene.plan.nodes`: init / done / alive / take
over plain-tuple states) and the predicate checks on bindings, shared by the group matcher and
by the negated sub-patterns of linear plans."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..plan.layout import TS, WPOS
from ..plan.nodes import And, AnyK, Ev, Node, Rep, Seq, Win
from ..plan.predicate import Predicate

Rec = tuple[Any, ...]


class NodeRunner:
    """The semantics of logical-block nodes (init / done / alive / take), shared by the group
    matcher and by the negated sub-patterns of linear plans."""

    def __init__(self) -> None:
        self.init: dict[int, Any] = {}
        self._done_memo: dict[tuple[int, Any], bool] = {}

    def _init(self, n: Node) -> Any:
        if isinstance(n, Ev):
            s: Any = 0
        elif isinstance(n, Seq):
            s = (0, self._init(n.items[0]))
            for it in n.items[1:]:
                self._init(it)
        elif isinstance(n, And | AnyK):
            s = tuple(self._init(i) for i in n.items)
        elif isinstance(n, Rep):
            self._init(n.body)
            s = (0, None)
        else:
            s = (self._init(n.body), None)
        self.init[id(n)] = s
        return s

    def _done(self, n: Node, s: Any) -> bool:
        key = (id(n), s)
        got = self._done_memo.get(key)
        if got is None:
            got = self._done_calc(n, s)
            if len(self._done_memo) > 200_000:
                self._done_memo.clear()
            self._done_memo[key] = got
        return got

    def _done_calc(self, n: Node, s: Any) -> bool:
        if isinstance(n, Ev):
            return bool(s == 1)
        if isinstance(n, Seq):
            idx, cs = s
            if not self._done(n.items[idx], cs):
                return False
            return all(self._done(it, self.init[id(it)]) for it in n.items[idx + 1:])
        if isinstance(n, And):
            return all(self._done(i, x) for i, x in zip(n.items, s, strict=True))
        if isinstance(n, AnyK):
            # k items chosen: the started ones (all done) and, for the rest, items that can
            # match empty (docs/semantics.md 3: an empty branch is a branch like any other)
            chosen = empty = 0
            for i, x in zip(n.items, s, strict=True):
                if x != self.init[id(i)]:
                    if not self._done(i, x):
                        return False
                    chosen += 1
                elif self._done(i, x):
                    empty += 1
            return chosen <= n.k <= chosen + empty
        if isinstance(n, Rep):
            count, cs = s
            if cs is not None:
                if not self._done(n.body, cs):
                    return False
                count += 1
            return bool(count >= n.min)
        return self._done(n.body, s[0])

    def _alive(self, n: Node, s: Any) -> bool:
        """Could this state still take an event?"""
        if isinstance(n, Ev):
            return bool(s == 0)
        if isinstance(n, Seq):
            idx, cs = s
            return idx < len(n.items) - 1 or self._alive(n.items[idx], cs)
        if isinstance(n, And):
            return any(self._alive(i, x) for i, x in zip(n.items, s, strict=True))
        if isinstance(n, AnyK):
            started = sum(1 for i, x in zip(n.items, s, strict=True) if x != self.init[id(i)])
            if started < n.k:
                return True
            return any(self._alive(i, x) for i, x in zip(n.items, s, strict=True)
                       if x != self.init[id(i)])
        if isinstance(n, Rep):
            count, cs = s
            if cs is not None and self._alive(n.body, cs):
                return True
            after = count + (1 if cs is not None else 0)
            return n.max is None or bool(after < n.max)
        return self._alive(n.body, s[0])

    def _walk(self, n: Node, s: Any, b: int, leaf: Callable[[Ev], Any],
              mark: Callable[[Win, Any], Any] | None) -> list[tuple[Any, Any]]:
        """Every way state ``s`` of ``n`` takes an event with candidate bits ``b``: (new state,
        ``leaf(the Ev that takes it)``). ``mark(win, old mark)`` is a sub-pattern window's new
        mark, None when the event falls outside it (``mark`` None: no windows here)."""
        if isinstance(n, Ev):
            return [(1, leaf(n))] if s == 0 and b & n.bit else []
        if isinstance(n, Seq):
            idx, cs = s
            out = [((idx, s2), x) for s2, x in self._walk(n.items[idx], cs, b, leaf, mark)]
            j, cur = idx, cs
            while j + 1 < len(n.items) and self._done(n.items[j], cur):
                j += 1
                cur = self.init[id(n.items[j])]
                out.extend(((j, s2), x) for s2, x in self._walk(n.items[j], cur, b, leaf, mark))
            return out
        if isinstance(n, And | AnyK):
            init = self.init
            full = isinstance(n, AnyK) and sum(
                1 for i, x in zip(n.items, s, strict=True) if x != init[id(i)]) >= n.k
            out = []
            for i, (it, x) in enumerate(zip(n.items, s, strict=True)):
                if full and x == init[id(it)]:
                    continue  # ANY: k items started, no other may start
                for s2, y in self._walk(it, x, b, leaf, mark):
                    out.append((s[:i] + (s2,) + s[i + 1:], y))
            return out
        if isinstance(n, Rep):
            count, cs = s
            out = []
            if cs is not None:
                out.extend(((count, s2), x) for s2, x in self._walk(n.body, cs, b, leaf, mark))
            if cs is None or self._done(n.body, cs):
                after = count + (1 if cs is not None else 0)
                if n.max is None or after < n.max:
                    out.extend(((after, s2), x) for s2, x in
                               self._walk(n.body, self.init[id(n.body)], b, leaf, mark))
            return out
        if mark is None:
            raise AssertionError("sub-pattern windows are not memoised")
        cs, m0 = s
        m = mark(n, m0)
        if m is None:
            return []
        return [((s2, m), x) for s2, x in self._walk(n.body, cs, b, leaf, mark)]

    def _steps(self, n: Node, s: Any, e: Rec, b: int, B: tuple[Any, ...]
               ) -> list[tuple[Any, tuple[Any, ...]]]:
        """Every way state ``s`` takes event ``e``: (new state, new bindings)."""
        def leaf(ev: Ev) -> tuple[Any, ...]:
            return bind(B, ev.slot, ev.is_list, e)

        def mark(w: Win, m: Any) -> Any:
            at = e[WPOS] if w.count else e[TS]
            if m is None:
                return at
            inside = at - m < w.amount if w.count else at - m <= w.amount
            return m if inside else None

        return self._walk(n, s, b, leaf, mark)

    def _init_of(self, n: Node) -> Any:
        got = self.init.get(id(n))
        return self._init(n) if got is None else got

    def occurs(self, node: Node, records: list[tuple[Rec, int]], B0: tuple[Any, ...],
               preds: tuple[Any, ...], iter_slot: dict[str, int]) -> bool:
        """Is there an occurrence of ``node`` (every assignment, as under skip-till-any-match)
        over ``records`` (in order, with their candidate bits) that makes every predicate
        TRUE, starting from the bindings ``B0``?"""
        runs: list[tuple[Any, tuple[Any, ...]]] = [(self._init_of(node), B0)]
        for rec, b in records:
            grown = []
            for s, Bx in runs:
                for s2, B2 in self._steps(node, s, rec, b, Bx):
                    if self._done(node, s2) and all_true(preds, B2, iter_slot):
                        return True
                    if self._alive(node, s2):
                        grown.append((s2, B2))
            runs.extend(grown)
        return False


def bind(B: tuple[Any, ...], slot: int, is_list: bool, e: Rec) -> tuple[Any, ...]:
    """``B`` with ``e`` bound at ``slot`` (appended for a list variable)."""
    if is_list:
        cur = B[slot]
        return B[:slot] + (((e,) if cur is None else cur + (e,)),) + B[slot + 1:]
    return B[:slot] + (e,) + B[slot + 1:]


def all_true(preds: Any, B: tuple[Any, ...], iter_slot: dict[str, int]) -> bool:
    """Is every predicate TRUE for the bindings ``B`` (over each element of an iterated list
    variable)?"""
    return all(p.check_all(B, None if p.iter_var is None else iter_slot.get(p.iter_var))
               for p in preds)


def flatten(values: Any) -> list[Rec]:
    """The events of binding values: None (unbound), one event, or a list variable's tuple."""
    out: list[Rec] = []
    for x in values:
        if x is None:
            continue
        if isinstance(x, tuple) and (not x or isinstance(x[0], tuple)):
            out.extend(x)
        else:
            out.append(x)
    return out


def decidable_early(preds: tuple[Predicate, ...], list_vars: frozenset[str]) -> bool:
    """Can a NOT's predicates be decided as soon as the positive variables they mention are
    bound (no list variable, nothing iterated)?"""
    return not any(p.iter_var is not None or p.general is not None
                   or any(v in list_vars for v in p.vars) for p in preds)


__all__ = ["NodeRunner", "all_true", "bind", "decidable_early", "flatten"]
