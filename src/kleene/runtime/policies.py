"""Output policies, applied after matching in this order (docs/semantics.md 9): PICK, EMIT
RECENT, CONSUME, RETURN. Inputs are complete candidates already in output order.

PICK groups matches that agree on every binding but one. With a time window W, a group whose
shared events end at ts t is complete once the stream is past t + W (``release_ts``); with a
count window of n events, once the next event's window position is past the first shared
event's s + n - 1 (``release_wpos``); without a query-level window, a streaming runtime holds
PICK matches until ``close``. EMIT RECENT works per completing
event and CONSUME walks matches in output order, so both stream.
"""

from __future__ import annotations

from collections.abc import Iterator
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from ..codegen import build
from ..errors import EngineError, InputError
from ..events import Match
from ..plan.layout import GPOS, ID, TS, WPOS
from ..plan.linear import CompKind
from ..vocab import Emit, PickMode
from .matcher import OutputSpec, PickSpec, PreferNode

if TYPE_CHECKING:
    from .linear import Candidate


def _is_list(x: Any) -> bool:
    return isinstance(x, tuple) and (not x or isinstance(x[0], tuple))


def _recs(x: Any) -> tuple[Any, ...]:
    if x is None:
        return ()
    return x if _is_list(x) else (x,)


class Policies:
    """PICK / EMIT RECENT / CONSUME / RETURN for one plan, with CONSUME's state."""

    def __init__(self, plan: Any, spec: OutputSpec) -> None:
        self.plan = plan
        self.spec = spec
        self.picks = spec.picks
        self.recent = spec.emit is Emit.RECENT
        self.consume = spec.consume
        self.consumed: set[int] = set()
        self.slot = dict(plan.layout.var_slots)
        self.after_match = spec.after_match
        self.rows = None if spec.after_match is None else spec.after_match.rows
        """EMIT ROWS: the excluded variables (None: one Match per match)."""
        self._numbers: dict[int, int] = {}
        """AFTER MATCH SKIP: each selected candidate's match number (by ``id``), for
        ``match_number()`` in RETURN."""
        self.needs_all = bool(self.picks) or self.after_match is not None
        """Matches are held until their groups are complete (PICK) or, with AFTER MATCH SKIP,
        until the stream closes."""
        built = bindings_builder(plan)
        self._binds: Any = None if built is None else built[0]
        self._build: Any = None if built is None else built[1]
        if self.consume is not None:
            self.consume_slots = [self.slot[v] for v in (
                plan.order if self.consume.all_vars else self.consume.vars)]
        self._later = self._later_slots(plan)

    def release_ts(self, c: Candidate) -> int | None:
        """Time after which no new match can join ``c``'s PICK groups (None: only at the end
        of the stream): the last shared event's timestamp plus the query's time window."""
        w = self.spec.within
        if w is None or w.is_count:
            return None
        out = None
        for p in self.picks:
            vs = self.slot[p.var]
            ts = [r[TS] for i, x in enumerate(c.B[: len(self.plan.order)]) if i != vs
                  for r in _recs(x)]
            if not ts:
                return None
            t = max(ts) + w.microseconds
            out = t if out is None else max(out, t)
        return out

    def _later_slots(self, plan: Any) -> list[list[int]] | None:
        """Per PICK, the slots of the variables that come after the picked one in a SEQ (a
        linear plan's later components, no NOT); None when the pattern is not such a SEQ."""
        comps = getattr(plan, "components", None)
        if comps is None or len(getattr(plan, "negations", ())) or not self.picks:
            return None
        at = {v: i for i, c in enumerate(comps) for v in c.vars}
        out = []
        for p in self.picks:
            if p.var not in at:
                return None
            out.append([self.slot[u] for u in plan.order if at.get(u, -1) > at[p.var]])
        return out

    def complete_now(self, c: Candidate) -> bool:
        """Every PICK group of ``c`` is complete already: in a SEQ, a variable after the picked
        one is bound (it is shared by the group), so every member's picked event comes before
        that event, which the stream has passed (docs/semantics.md 9)."""
        later = self._later
        if later is None:
            return False
        B = c.B
        return all(any(B[s] is not None for s in slots) for slots in later)

    def release_wpos(self, c: Candidate) -> int | None:
        """Count window ``WITHIN n EVENTS``: the window position the stream's next event must
        reach (per partition with PARTITION BY) before no new match can join ``c``'s PICK
        groups (None: only at the end of the stream). A new member binds the picked variable
        to an event not yet seen (every other binding is shared), at a position p at or after
        the next one, and its first event is at or before the first shared event s, so
        p - s < n: once the next position is s + n the group is complete (docs/semantics.md
        9). The largest over the PICKs."""
        w = self.spec.within
        if w is None or not w.is_count:
            return None
        nvars = len(self.plan.order)
        out = None
        for p in self.picks:
            vs = self.slot[p.var]
            ps = [r[WPOS] for i, x in enumerate(c.B[:nvars]) if i != vs for r in _recs(x)]
            if not ps:
                return None
            at = min(ps) + w.amount
            out = at if out is None else max(out, at)
        return out

    def release_cut(self, cands: list[Candidate], k: int) -> int:
        """The longest prefix ``cands[:k']`` (k' <= k) that may be released while
        ``cands[k':]`` stay held: no released match shares a group of any PICK, or (EMIT
        RECENT) a completing event, with a held one -- each PICK's group is complete by
        :meth:`release_ts`, but a member can be held for another PICK's (or EMIT RECENT's)
        sake, and the policies compare only what is released together. Also with one PICK:
        the released prefix stops at the first match whose own group is not complete, and a
        member of an earlier, complete group can come after it in output order."""
        if not self.picks and not self.recent:
            return k
        while 0 < k < len(cands):
            held: set[Any] = set()
            for c in cands[k:]:
                for i, p in enumerate(self.picks):
                    held.add((i, self._pick_key(c, self.slot[p.var])))
                if self.recent:
                    held.add(c.last_gpos)
            j = 0
            while j < k and not self._competes(cands[j], held):
                j += 1
            if j == k:
                break
            k = j
        return k

    def _competes(self, c: Candidate, held: set[Any]) -> bool:
        if self.recent and c.last_gpos in held:
            return True
        return any((i, self._pick_key(c, self.slot[p.var])) in held
                   for i, p in enumerate(self.picks))

    def state(self) -> Any:
        """CONSUME's memory (plain data)."""
        return sorted(self.consumed)

    def restore(self, data: Any) -> None:
        """Inverse of :meth:`state`."""
        self.consumed = set(data)

    # ---------------------------------------------------------------------------------------
    def _pick(self, cands: list[Candidate], p: PickSpec) -> list[Candidate]:
        vs = self.slot[p.var]
        if p.within is not None and p.from_var is not None:
            us = self.slot[p.from_var]
            w = p.within
            keep = []
            for c in cands:
                a, b = _recs(c.B[vs]), _recs(c.B[us])
                if c.B[vs] is None or c.B[us] is None:
                    keep.append(c)
                    continue
                ok = True
                for x in a:
                    for y in b:
                        if w.is_count:
                            if abs(x[WPOS] - y[WPOS]) >= w.amount:
                                ok = False
                        elif abs(x[TS] - y[TS]) > w.microseconds:
                            ok = False
                if ok:
                    keep.append(c)
            cands = keep
        if p.mode is PickMode.EACH:
            return cands
        best: dict[Any, tuple[tuple[int, ...], Candidate]] = {}
        for c in cands:
            key: tuple[Any, ...] = tuple(None if i == vs else (
                None if x is None else tuple(r[GPOS] for r in _recs(x)))
                for i, x in enumerate(c.B[: len(self.plan.order)]))
            key = key + (c.B[vs] is None,)
            pos = tuple(r[GPOS] for r in _recs(c.B[vs]))
            cur = best.get(key)
            if cur is None or (pos < cur[0] if p.mode is PickMode.FIRST else pos > cur[0]):
                best[key] = (pos, c)
        chosen = {id(c) for _p, c in best.values()}
        return [c for c in cands if id(c) in chosen]

    def _after_match(self, cands: list[Candidate]) -> list[Candidate]:
        """AFTER MATCH SKIP (docs/semantics.md 19) over every candidate of the stream: per
        partition, attempts at increasing start rows; an attempt takes its most preferred
        candidate; the skip rule gives the next start row. Positions are per partition
        (``WPOS``); candidates are grouped by the PARTITION BY values of their rows."""
        am = self.after_match
        assert am is not None
        nvars = len(self.plan.order)
        slots = [self.plan.layout.attr_slot(a) for a in am.partition_by]
        names = list(self.plan.order)
        groups: dict[Any, dict[int, list[Candidate]]] = {}
        for c in cands:
            rec = next(r for x in c.B[:nvars] for r in _recs(x))
            key = tuple(rec[s] for s in slots)
            groups.setdefault(key, {}).setdefault(c.first_wpos, []).append(c)
        keys: dict[tuple[tuple[str, ...], frozenset[str]], tuple[int, ...]] = {}

        def prefer(c: Candidate) -> tuple[int, ...]:
            seq = tuple(v for _w, v in sorted(
                (r[WPOS], names[i]) for i, x in enumerate(c.B[:nvars]) for r in _recs(x)))
            # the OR branches the match took: the same rows may be mapped through an OR
            # branch that binds no row, or through another (docs/semantics.md 2, 19)
            bound = frozenset(names[i] for i, x in enumerate(c.B[:nvars]) if x is not None)
            k = keys.get((seq, bound))
            if k is None:
                k = keys[(seq, bound)] = preference_key(am.pattern, seq, bound)
            return k

        chosen: set[int] = set()
        self._numbers.clear()
        for by_start in groups.values():
            nxt = -1
            number = 0
            for s in sorted(by_start):
                if s < nxt:
                    continue
                best = min(by_start[s], key=prefer)
                chosen.add(id(best))
                number += 1
                self._numbers[id(best)] = number  # MATCH_NUMBER: per partition, from 1
                if am.mode == "TO NEXT ROW":
                    nxt = s + 1
                elif am.mode == "PAST LAST ROW":
                    nxt = best.last_wpos + 1
                else:
                    nxt = self._skip_to(best, am.mode, am.var or "")
        return [c for c in cands if id(c) in chosen]

    def _skip_to(self, c: Candidate, mode: str, var: str) -> int:
        """The row ``AFTER MATCH SKIP TO FIRST|LAST var`` starts the next attempt at."""
        rows: list[int] = sorted(r[WPOS] for r in _recs(c.B[self.slot[var]]))
        where = f"the match at rows {c.first_wpos}..{c.last_wpos} of its partition"
        if not rows:
            raise InputError(f"AFTER MATCH SKIP {mode} {var}: {where} maps no row to {var} "
                             "(SQL raises an exception here)")
        target = rows[0] if mode == "TO FIRST" else rows[-1]
        if target == c.first_wpos:
            raise InputError(f"AFTER MATCH SKIP {mode} {var}: {where} would start the next "
                             "attempt at its own first row (SQL raises an exception here)")
        return target

    def _recent(self, cands: list[Candidate]) -> list[Candidate]:
        out: list[Candidate] = []
        i = 0
        order = self.plan.order
        while i < len(cands):
            j = i
            while j < len(cands) and cands[j].last_gpos == cands[i].last_gpos:
                j += 1
            best = None
            best_key: Any = None
            for c in cands[i:j]:
                k1 = tuple(sorted(c.positions, reverse=True))
                k2 = tuple((0,) if c.B[self.slot[v]] is None else
                           (1, tuple(sorted((r[GPOS] for r in _recs(c.B[self.slot[v]])),
                                            reverse=True)))
                           for v in reversed(order))
                key = (k1, k2)
                if best is None or key > best_key:
                    best, best_key = c, key
            assert best is not None
            out.append(best)
            i = j
        return out

    def _consume(self, cands: list[Candidate]) -> list[Candidate]:
        out = []
        for c in cands:
            if any(p in self.consumed for p in c.positions):
                continue
            out.append(c)
            for s in self.consume_slots:
                for r in _recs(c.B[s]):
                    self.consumed.add(r[GPOS])
        return out

    def _pick_key(self, c: Candidate, vs: int) -> tuple[Any, ...]:
        key: tuple[Any, ...] = tuple(None if i == vs else (
            None if x is None else tuple(r[GPOS] for r in _recs(x)))
            for i, x in enumerate(c.B[: len(self.plan.order)]))
        return key + (c.B[vs] is None,)

    def _recency(self, c: Candidate) -> tuple[Any, ...]:
        return (tuple(sorted(c.positions, reverse=True)),
                tuple((0,) if c.B[self.slot[v]] is None else
                      (1, tuple(sorted((r[GPOS] for r in _recs(c.B[self.slot[v]])),
                                       reverse=True)))
                      for v in reversed(self.plan.order)))

    def _select_consume(self, cands: list[Candidate]) -> list[Candidate]:
        """CONSUME with PICK / EMIT RECENT (docs/semantics.md 9): walk in output order; a match
        is emitted if none of its events is consumed and it survives every PICK, then EMIT
        RECENT, among the matches still valid at that point.

        ``alive(k, i)``: is candidate i in the result of the first k selections over the valid
        candidates? Each selection is a group competition, so it is decided from i's group
        alone; the memo is dropped whenever an emitted match consumes something."""
        n = len(cands)
        levels: list[tuple[str, Any, list[bool], dict[Any, list[int]]]] = []
        for p in self.picks:
            vs = self.slot[p.var]
            ok = [True] * n
            if p.within is not None and p.from_var is not None:
                kept = self._pick(cands, PickSpec(p.var, PickMode.EACH, from_var=p.from_var,
                                                    within=p.within))
                ids = {id(c) for c in kept}
                ok = [id(c) in ids for c in cands]
            groups: dict[Any, list[int]] = {}
            if p.mode is not PickMode.EACH:
                for i, c in enumerate(cands):
                    groups.setdefault(self._pick_key(c, vs), []).append(i)
            levels.append(("pick", p, ok, groups))
        if self.recent:
            groups = {}
            for i, c in enumerate(cands):
                groups.setdefault(c.last_gpos, []).append(i)
            levels.append(("recent", None, [True] * n, groups))
        pos_of = [tuple(r[GPOS] for r in _recs(c.B[self.slot[p.var]])) for p in self.picks
                  for c in cands]  # per pick level, per candidate: the picked positions
        recency: dict[int, tuple[Any, ...]] = {}
        consumed = self.consumed
        memo: dict[tuple[int, int], bool] = {}

        def valid(i: int) -> bool:
            return not any(q in consumed for q in cands[i].positions)

        def alive(k: int, i: int) -> bool:
            if k == 0:
                return valid(i)
            got = memo.get((k, i))
            if got is not None:
                return got
            kind, p, ok, groups = levels[k - 1]
            res = ok[i] and alive(k - 1, i)
            if res and (kind == "recent" or p.mode is not PickMode.EACH):
                rivals = groups[cands[i].last_gpos if kind == "recent" else
                                self._pick_key(cands[i], self.slot[p.var])]
                best = None
                best_key: Any = None
                for j in rivals:
                    if not (levels[k - 1][2][j] and alive(k - 1, j)):
                        continue
                    if kind == "recent":
                        key = recency.get(j)
                        if key is None:
                            key = recency[j] = self._recency(cands[j])
                        better = best is None or key > best_key
                    else:
                        key = pos_of[(k - 1) * n + j]
                        better = best is None or (key < best_key if p.mode is PickMode.FIRST
                                                  else key > best_key)
                    if better:
                        best, best_key = j, key
                res = best == i
            memo[(k, i)] = res
            return res

        out = []
        top = len(levels)
        for i, c in enumerate(cands):
            if not alive(top, i):
                continue
            out.append(c)
            memo.clear()
            for s in self.consume_slots:
                for r in _recs(c.B[s]):
                    consumed.add(r[GPOS])
        return out

    def select(self, cands: list[Candidate]) -> list[Candidate]:
        """PICK, EMIT RECENT and CONSUME over candidates in output order (the kept ones, in
        the same order)."""
        if self.after_match is not None:
            return self._after_match(cands)
        if self.consume is not None and (self.picks or self.recent) \
                and self.spec.emit is not Emit.COVERAGE:  # coverage: PICK before it (§16)
            return self._select_consume(cands)
        for p in self.picks:
            cands = self._pick(cands, p)
        if self.recent:
            cands = self._recent(cands)
        if self.consume is not None:
            cands = self._consume(cands)
        return cands

    def apply(self, cands: list[Candidate], matcher: Any, count_only: bool) -> list[Match]:
        """Policies over candidates in output order, then RETURN -> Match objects."""
        del matcher
        return self.build(self.select(cands), count_only)

    def build(self, cands: list[Candidate], count_only: bool) -> list[Match]:
        """RETURN over kept candidates -> Match objects."""
        rows = self.rows
        if rows is not None:
            if count_only:
                return [_COUNT_MATCH] * sum(len(self._rows(c, rows)) for c in cands)
            return [m for c in cands for m in self.to_rows(c, rows)]
        if count_only:
            return [_COUNT_MATCH] * len(cands)
        if self._binds is not None and not self.plan.return_fns:
            built: list[Match] = self._build(cands)
            return built
        return [self.to_match(c) for c in cands]

    def to_match(self, c: Candidate) -> Match:
        """Build the public Match (bindings in pattern order, RETURN values)."""
        plan = self.plan
        binds = self._bindings(c)
        values: dict[str, Any] = {}
        if plan.return_fns:
            tail = (None, self._numbers.get(id(c)), c.first_ts, c.last_ts)
            self._values(c.B + (None, *tail), values)
        return Match(plan.name, binds, c.first_ts, c.last_ts, values)

    def _bindings(self, c: Candidate) -> dict[str, Any]:
        if self._binds is not None:
            binds: dict[str, Any] = self._binds(c.B)
            return binds
        binds = {}
        for v in self.plan.order:
            x = c.B[self.slot[v]]
            if x is None:
                continue
            binds[v] = tuple(r[ID] for r in x) if _is_list(x) else x[ID]
        return binds

    def _values(self, B: tuple[Any, ...], values: dict[str, Any]) -> None:
        """RETURN over ``B + (whole, classifier, match number, start, end)`` into ``values``."""
        for name, ce, iter_slot, _prev in self.plan.return_fns:
            if iter_slot is None or B[iter_slot] is None:
                values[name] = ce.fn(B, 0)
            else:
                values[name] = [ce.fn(B, i) for i in range(len(B[iter_slot]))]

    def _rows(self, c: Candidate, excluded: tuple[str, ...]) -> list[tuple[Any, str]]:
        """EMIT ROWS: the match's rows (records) in row order with their variables, but
        those of excluded variables."""
        out = [(r, v) for v in self.plan.order if v not in excluded
               for r in _recs(c.B[self.slot[v]])]
        out.sort(key=lambda x: x[0][GPOS])
        return out

    def row_count(self, c: Candidate) -> int:
        """EMIT ROWS: how many records ``c`` makes (without building them)."""
        assert self.rows is not None
        return len(self._rows(c, self.rows))

    def to_rows(self, c: Candidate, excluded: tuple[str, ...]) -> list[Match]:
        """EMIT ROWS (docs/semantics.md 19): one Match per row of the match, in row order:
        the match's bindings, start and end; values ``row`` (the row's id), then RETURN
        evaluated on the bindings truncated to the rows up to this one (``end``: this row's
        time), ``final(x)`` on the whole match."""
        binds = self._bindings(c)
        number = self._numbers.get(id(c))
        nvars = len(self.plan.order)
        out = []
        for rec, var in self._rows(c, excluded):
            g = rec[GPOS]
            trunc = tuple(
                x if i >= nvars or x is None else (
                    tuple(r for r in x if r[GPOS] <= g) if _is_list(x)
                    else (x if x[GPOS] <= g else None))
                for i, x in enumerate(c.B))
            values: dict[str, Any] = {"row": rec[ID]}
            if self.plan.return_fns:
                whole = c.B + (None, var, number, c.first_ts, c.last_ts)
                self._values(trunc + (whole, var, number, c.first_ts, rec[TS]), values)
            out.append(Match(self.plan.name, binds, c.first_ts, c.last_ts, values))
        return out


def preference_key(node: PreferNode, seq: tuple[str, ...],
                   bound: frozenset[str] | None = None) -> tuple[int, ...]:
    """SQL's preference rank of a match whose rows are classified as ``seq`` (the variable
    of each row, in row order): the choices of the first parse of ``seq`` by ``node`` in
    backtracking order, each coded so that the preferred option is smaller (OR: the branch
    index; greedy: another repetition 0, stop 1; reluctant: stop 0, another 1). Comparing
    two matches' keys as tuples is comparing them in preference order. ``bound``: the match's
    bound variables; an OR then parses only through branches with a bound variable (a
    branch that binds no row is taken or not)."""
    n = len(seq)
    flat = _flat_key(node, seq)
    if flat is not None:
        return flat

    def parse(p: PreferNode, i: int) -> Iterator[tuple[int, tuple[int, ...]]]:
        kind = p[0]
        if kind == "e":
            if i < n and seq[i] == p[1]:
                yield i + 1, ()
        elif kind == "s":
            yield from parse_seq(p[1], 0, i)
        elif kind == "o":
            for k, item in enumerate(p[1]):
                if bound is not None and bound.isdisjoint(_prefer_vars(item)):
                    continue
                for j, d in parse(item, i):
                    yield j, (k, *d)
        else:
            yield from parse_rep(p, 0, i)

    def parse_seq(items: tuple[PreferNode, ...], k: int, i: int
                  ) -> Iterator[tuple[int, tuple[int, ...]]]:
        if k == len(items):
            yield i, ()
            return
        for j, d in parse(items[k], i):
            for m, e in parse_seq(items, k + 1, j):
                yield m, d + e

    def parse_rep(p: PreferNode, count: int, i: int) -> Iterator[tuple[int, tuple[int, ...]]]:
        _k, body, lo, hi, reluctant = p
        more = hi is None or count < hi
        stop = count >= lo
        for option in ((0, 1) if reluctant else (1, 0)):  # 1: another repetition
            code = 0 if (option == 1) != reluctant else 1
            if option == 0:
                if stop:
                    yield i, (code,)
            elif more:
                for j, d in parse(body, i):
                    if j == i:
                        continue
                    for m, e in parse_rep(p, count + 1, j):
                        yield m, (code, *d, *e)

    try:
        for j, d in parse(node, 0):
            if j == n:
                return d
    except RecursionError:
        raise EngineError(
            f"AFTER MATCH SKIP: cannot rank a match of {n:,} rows by SQL's preference order "
            "(its pattern nests repetitions too deeply for that many rows); bound the "
            "repetitions ({1,100}) or add a window") from None
    if bound is not None:
        return preference_key(node, seq)
    raise AssertionError(f"no parse of {seq} by the pattern")


def _flat_key(node: PreferNode, seq: tuple[str, ...]) -> tuple[int, ...] | None:
    """The preference key without backtracking, for the common shape: a sequence (or one
    item) of single events and repetitions of single events whose variables are all
    different. The rows' variables then fix how many rows each item takes, and the key is,
    per repetition of m rows, m "another" codes and one "stop" code (greedy: another 0,
    stop 1; reluctant: another 1, stop 0). None for any other shape (the general parse)."""
    items = node[1] if node[0] == "s" else (node,)
    names = []
    for it in items:
        if it[0] == "e":
            names.append(it[1])
        elif it[0] == "k" and it[1][0] == "e":
            names.append(it[1][1])
        else:
            return None
    if len(set(names)) != len(names):
        return None
    key: list[int] = []
    i, n = 0, len(seq)
    for it, v in zip(items, names, strict=True):
        m = 0
        while i < n and seq[i] == v:
            i += 1
            m += 1
        if it[0] == "e":
            if m != 1:
                return None
            continue
        _k, _body, lo, hi, reluctant = it
        if m < lo or (hi is not None and m > hi):
            return None
        key += [1 if reluctant else 0] * m
        key.append(0 if reluctant else 1)
    return tuple(key) if i == n else None


def _prefer_vars(p: PreferNode) -> frozenset[str]:
    """The variables of a preference-order node."""
    if p[0] == "e":
        return frozenset((p[1],))
    if p[0] == "k":
        return _prefer_vars(p[1])
    return frozenset().union(*(_prefer_vars(i) for i in p[1]))


def bindings_builder(plan: Any) -> tuple[Any, Any] | None:
    """Generated ``binds(B) -> dict`` and ``build(cands) -> [Match]`` for linear plans where
    every variable is always bound (None otherwise): keys are passed in as constants, slots
    are integers (no user text in the source)."""
    comps = getattr(plan, "components", None)
    if comps is None or not all(c.kind is not CompKind.CHOICE and c.min > 0 for c in comps):
        return None
    slot = dict(plan.layout.var_slots)
    env: dict[str, Any] = {"_GID": itemgetter(ID)}
    items = []
    for i, v in enumerate(plan.order):
        env[f"K{i}"] = v
        if v in plan.layout.list_vars:
            items.append(f"K{i}: tuple(map(_GID, B[{slot[v]}]))")
        else:
            items.append(f"K{i}: B[{slot[v]}][{ID}]")
    src = "def binds(B):\n    return {" + ", ".join(items) + "}\n"
    # the whole output list in one comprehension (no call per match): the matches of a
    # plan without RETURN, straight from the candidates
    env["Match"] = Match
    env["NAME"] = plan.name
    src += ("def build(cands):\n    return [Match(NAME, {"
            + ", ".join(it.replace("B[", "c.B[") for it in items)
            + "}, c.first_ts, c.last_ts, {}) for c in cands]\n")
    binds, build_all = build(src, env, label=f"bindings {plan.name}", entry=("binds", "build"))
    return binds, build_all


_COUNT_MATCH = Match("", {}, 0, 0)


__all__ = ["Policies"]
