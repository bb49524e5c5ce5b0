"""A specialised transition function for the common linear plans, generated once per plan.

For a SEQ of single and Kleene components (no ``*``, no OR component, windows only on the
whole pattern), :func:`build_kernel` writes the run loop of
:meth:`kleene.runtime.linear.LinearMatcher.process` as straight-line Python with the
components unrolled: each state's take / proceed edges become an ``if`` block, bindings are
rebuilt by explicit tuple displays, and the strategy's ignore rule is fixed at generation time.
Runs are plain tuples ``(k, n, B, first_ts, first_wpos, first_gpos, last_cpos)``, plus the
pending list ``P`` when a NOT decided inside the automaton has predicates
(:class:`~kleene.runtime.linear.FastNot`): such NOTs are decided on the proceed edge into the
component after them, without predicates by one look at the last negating event before the
new event, with predicates through ``LinearMatcher.confirm_nots`` / ``pending_step`` /
``pending_ok``.

The source is generated from the plan only (component indices, bit masks and integer window
lengths); predicates are passed in as function objects, never as text. The interpreter in
``linear.py`` stays the reference: the kernel must produce the same candidates in the same order.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import Any

from ..codegen import build
from ..events.match import Match
from ..plan.layout import GPOS
from ..plan.linear import CompKind, Plan
from ..vocab import Strategy
from .candidate import Candidate
from .caps import over_budget, too_many_matches, too_many_runs
from .linear import LinearMatcher


def has_plain_variant(plan: Plan) -> bool:
    """Does the plan have inline conditions that differ when no attribute value is a boolean
    (so a ``plain_values`` kernel is worth generating)?"""
    return any(p.inline_plain is not None for v in plan.vars.values() for p in v.take)


def kernel_supported(plan: Plan) -> bool:
    """Can :func:`build_kernel` specialise this plan?"""
    n = len(plan.components)
    for c in plan.components:
        if c.kind is CompKind.CHOICE or c.min == 0:
            return False
    for w in plan.windows:
        if not (w.first == 0 and w.last == n - 1):
            return False
    return True


def _tuple(parts: list[str]) -> str:
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def build_kernel(m: LinearMatcher, count_mode: bool | None = None) -> Any:
    """The ``process(st, recs, bits, out, max_matches, budget)`` function of matcher ``m``
    (arguments as :meth:`LinearMatcher.process`): :func:`kernel_factory` applied to ``m``."""
    return kernel_factory(m, count_mode)(m)


def kernel_factory(m: LinearMatcher, count_mode: bool | None = None,
                   plain_values: bool = False) -> Callable[[Any], Any]:
    """Generate and compile, once, a factory ``make(matcher) -> process`` for matchers
    configured like ``m`` (same plan, caps, count and direct modes): the source depends on the
    plan and that configuration only, and the matcher's own state (its counters, its pending
    list helpers) is bound when ``make`` is called, so a compiled query builds its kernel once
    however many runtimes it starts (``kleene.plans.nfa`` keeps the factory per option set).

    In ``process``, ``max_matches`` is baked in, and ``budget`` is checked only when
    ``m.max_matches_per_call`` is set and not counting. ``count_mode`` overrides
    ``m.count_mode`` (the counting variant a truncating kernel hands the rest of its events to
    once the budget is spent). With ``plain_values`` the inline conditions assume that no
    attribute value is a boolean (:attr:`~kleene.plan.predicate.Predicate.inline_plain`): the
    runtime uses that kernel only while every attribute column it has seen has a type
    without booleans (``LinearMatcher.plain_values``)."""
    plan = m.plan
    comps = plan.components
    nc = len(comps)
    nslots = len(plan.layout.var_slots)
    env: dict[str, Any] = {"Candidate": Candidate, "_G0": itemgetter(0)}
    bound: list[str] = []  # names bound per matcher inside make(m)
    strict = plan.strategy in (Strategy.STRICT_CONTIGUITY, Strategy.PARTITION_CONTIGUITY)
    stnm = plan.strategy is Strategy.SKIP_TILL_NEXT_MATCH
    mm = m.max_matches
    count_mode = m.count_mode if count_mode is None else count_mode
    # the matches-per-call cap: count mode builds no matches, so it has nothing to bound
    capped = m.max_matches_per_call is not None and not count_mode
    if capped:
        env["OVER"] = over_budget
        if m.on_cap in ("truncate", "saturate"):
            env["MAKE_DRAIN"] = kernel_factory(m, count_mode=True, plain_values=plain_values)
            bound.append("DRAIN = MAKE_DRAIN(m)")
    direct = m.direct
    if direct is not None:
        env["Match"] = Match
        env["NAME"], env["BINDS"] = direct
    W = plan.window_us
    CW = plan.window_events
    pend = m.pend
    if pend:
        bound += ["PSTEP = m.pending_step", "CONF = m.confirm_nots", "PEND_OK = m.pending_ok"]
    L: list[str] = []

    def emit(depth: int, line: str) -> None:
        L.append("    " * depth + line)

    def const(prefix: str, value: Any) -> str:
        name = f"{prefix}{len(env)}"
        env[name] = value
        return name

    def b_with(slot: int, value: str, src: str = "B") -> str:
        return _tuple([value if j == slot else f"{src}[{j}]" for j in range(nslots)])

    def take_cond(k: int, B2: str, n_new: str, first: bool) -> str:
        """The take-edge test as calls of the compiled predicates on ``B2``."""
        v = comps[k].vars[0]
        vp = plan.vars[v]
        conds = []
        for p in vp.take:
            fn = const("T", p.compiled.fn)
            if p.general is not None:
                chk = const("A", p.check_all)
                conds.append(f"{chk}({B2}, None)")
                continue
            if p.iter_var is None:
                if vp.is_list:
                    if not first:
                        continue
                conds.append(f"{fn}({B2}, 0) is True")
            elif p.iter_var == v:
                if first:
                    if p.prev:
                        continue
                    conds.append(f"{fn}({B2}, 0) is True")
                else:
                    conds.append(f"{fn}({B2}, {n_new} - 1) is True")
            else:
                chk = const("A", p.check_all)
                conds.append(f"{chk}({B2}, {plan.layout.var_slots[p.iter_var]})")
        return " and ".join(conds) if conds else "True"

    def inline_take(k: int, first: bool) -> str | None:
        """The same test inline over ``e`` and the parent's ``B`` (no B2 needed), or None:
        the predicates' inline sources, generated by the plan compiler
        (:attr:`~kleene.plan.predicate.Predicate.inline`)."""
        v = comps[k].vars[0]
        vp = plan.vars[v]
        conds = []
        for p in vp.take:
            if p.general is not None:
                return None
            if p.iter_var is None:
                if vp.is_list and not first:
                    continue
            elif p.iter_var == v:
                if first and p.prev:
                    continue
            else:
                return None
            inl = p.inline_plain if plain_values and p.inline_plain is not None else p.inline
            src = inl[0 if first else 1]
            if src is None:
                return None
            env.update(p.inline_env)
            conds.append(src)
        return " and ".join(conds) if conds else "True"

    def emit_take(depth: int, k: int, first: bool, B2: str, n_new: str,
                  body: Callable[[int], None]) -> None:
        """Test the take edge of component k; run ``body`` with ``B2`` bound when it holds."""
        fast = inline_take(k, first)
        slow = take_cond(k, "B2", n_new, first)
        if fast is None:
            emit(depth, f"B2 = {B2}")
            emit(depth, f"if {slow}:")
            body(depth + 1)
            return
        if fast == "True":
            emit(depth, f"B2 = {B2}")
            body(depth)
            return
        emit(depth, "try:")
        emit(depth + 1, f"ok = {fast}")
        emit(depth, "except TypeError:")
        emit(depth + 1, f"B2 = {B2}")
        emit(depth + 1, f"ok = {slow}")
        emit(depth, "if ok:")
        emit(depth + 1, f"B2 = {B2}")
        body(depth + 1)

    def close_cond(k: int, B: str, n: str) -> str:
        c = comps[k]
        conds = []
        if c.kind is CompKind.KLEENE and c.min > 1:
            conds.append(f"{n} >= {c.min}")
        for p in plan.vars[c.vars[0]].close:
            chk = const("A", p.check_all)
            slot = "None" if p.iter_var is None else str(plan.layout.var_slots[p.iter_var])
            conds.append(f"{chk}({B}, {slot})")
        return " and ".join(conds) if conds else "True"

    def positions_expr(B: str) -> str:
        parts = []
        for c in comps:
            slot = plan.vars[c.vars[0]].slot
            if c.kind is CompKind.KLEENE:
                parts.append(f"*map(_G0, {B}[{slot}])")
            else:
                parts.append(f"{B}[{slot}][0]")
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"

    def output_key_expr(B: str) -> str | None:
        """The output-order key of a complete match, flat (docs/semantics.md 10): the last
        position (the completing event's), the first, then the positions from the
        second-to-last down to the second. One flat tuple of ints sorts about three times
        faster than ``(last, (first, ...))``. None when the first or the last component is
        a Kleene list (the first or last position is then inside a list): the caller slices."""
        if comps[0].kind is CompKind.KLEENE or comps[-1].kind is CompKind.KLEENE:
            return None
        parts = ["e[0]", f"{B}[{plan.vars[comps[0].vars[0]].slot}][0]"]
        for c in reversed(comps[1:-1]):
            slot = plan.vars[c.vars[0]].slot
            if c.kind is CompKind.KLEENE:
                parts.append(f"*map(_G0, reversed({B}[{slot}]))")
            else:
                parts.append(f"{B}[{slot}][0]")
        return "(" + ", ".join(parts) + ")"

    def on_new(depth: int, k: int, nr_parts: str, n_new: str, B2: str,
               first: tuple[str, str], P: str = "()") -> None:
        """Code for a freshly created run at component k holding n_new events (``first``:
        the expressions of its first timestamp and first window position; ``P``: of its
        pending list)."""
        c = comps[k]
        last = k == nc - 1
        if last:
            keeps = c.kind is CompKind.KLEENE and (c.max is None or c.max > 1)
            if keeps:
                emit(depth, f"nr = {nr_parts}")
            cc = close_cond(k, B2, n_new)
            if pend and P != "()":
                cc = f"({cc}) and (not {P} or PEND_OK({B2}, {P}))"
            emit(depth, f"if {cc}:")
            if count_mode:
                emit(depth + 1, "cnt += 1")
            elif direct is not None:
                # the output-buffer entry itself: (output key, Match, None), the key already in
                # the output order (docs/semantics.md 10: last, first, then the others from
                # the second-to-last down), so the runtime sorts without a key function
                key = output_key_expr(B2)
                if key is None:
                    emit(depth + 1, f"_P = {positions_expr(B2)}")
                    key = "(e[0], _P[0], *_P[-2:0:-1])"
                emit(depth + 1, f"out.append(({key}, "
                     f"Match(NAME, BINDS({B2}), {first[0]}, ets, {{}}), None))")
            else:
                emit(depth + 1, f"out.append(Candidate({B2}, {first[0]}, {first[1]}, e[0], ets, "
                     f"ewp, {positions_expr(B2)}))")
            if mm is not None:
                emit(depth + 1, "nm += 1")
            if keeps:
                if c.max is None:
                    emit(depth, "new.append(nr)")
                else:
                    emit(depth, f"if {n_new} < {c.max}:")
                    emit(depth + 1, "new.append(nr)")
        else:
            emit(depth, f"new.append({nr_parts})")

    def proceed_into(depth: int, j: int, src_first: str) -> None:
        """Take e as the first event of component j (from a run or from begin)."""
        c = comps[j]
        vp = plan.vars[c.vars[0]]
        emit(depth, f"if b & {1 << plan.order.index(c.vars[0])}:")
        val = "(e,)" if vp.is_list else "e"
        tail = ", P2" if pend else ""
        if src_first == "begin":
            B2 = _tuple([val if x == vp.slot else repr(m.empty_B[x]) for x in range(nslots)])
            parts = f"({j}, 1, B2, ets, ewp, e[0], ecp{', ()' if pend else ''})"
            first = ("ets", "ewp")
        else:
            B2 = b_with(vp.slot, val, "B")
            parts = f"({j}, 1, B2, r[3], r[4], r[5], ecp{tail})"
            first = ("r[3]", "r[4]")

        def body(d: int) -> None:
            if src_first == "begin":
                on_new(d, j, parts, "1", "B2", first)
                return
            if stnm:
                emit(d, "took = True")
            # NOTs decided inside the automaton: pending entries now decidable, and the NOTs
            # whose interval this binding closes (last event before them: component j - 1)
            free = [f for f in m.fast.values() if f.guard.gap == j and not f.guard.preds]
            withp = tuple(f for f in m.fast.values() if f.guard.gap == j and f.guard.preds)
            if not (pend or free):
                on_new(d, j, parts, "1", "B2", first)
                return
            pk = comps[j - 1]
            ps = plan.vars[pk.vars[0]].slot
            lo = f"B[{ps}][-1][{GPOS}]" if pk.kind is CompKind.KLEENE else f"B[{ps}][{GPOS}]"
            emit(d, "ok2 = True")
            if pend:
                emit(d, "P2 = r[7]")
                emit(d, "if P2:")
                emit(d + 1, "P2 = PSTEP(B2, P2)")
                emit(d + 1, "if P2 is None:")
                emit(d + 2, "ok2 = False")
            for f in free:
                h = f"H{f.gi}"
                emit(d, f"if ok2 and {h}:")
                emit(d + 1, f"x = {h}[-1]")
                emit(d + 1, "if x is e:")
                emit(d + 2, f"x = {h}[-2] if len({h}) > 1 else None")
                emit(d + 1, f"if x is not None and x[{GPOS}] > {lo}:")
                if pk.kind is CompKind.KLEENE or pend:
                    emit(d + 2, "ok2 = False")
                else:
                    # the run's only edge is this one and its interval already holds a
                    # negating event: it can never proceed, so it is dropped, not kept
                    emit(d + 2, "continue")
            if withp:
                emit(d, "if ok2:")
                emit(d + 1, f"P2 = CONF(st, {const('F', withp)}, {lo}, e[{GPOS}], B2, P2)")
                emit(d + 1, "if P2 is None:")
                emit(d + 2, "ok2 = False")
            emit(d, "if ok2:")
            on_new(d + 1, j, parts, "1", "B2", first, "P2" if pend else "()")

        emit_take(depth + 1, j, True, B2, "1", body)

    # ---- the generated function, one emitter per part of the NFA^b step ------------------

    def emit_header() -> None:
        """``def process(...)``: locals, the per-key NOT histories, the budget."""
        env["EMPTY"] = m.empty_B
        emit(0, "def process(st, recs, bits, out, max_matches, budget=None):")
        emit(1, "runs = st.runs")
        for gi in m.fast:
            emit(1, f"H{gi} = st.neg_hist[{gi}]")
        if capped:
            emit(1, "if budget is None:")
            emit(2, f"budget = {1 << 62}")
        if count_mode:
            emit(1, "cnt = 0")
        emit(1, "negs = m.plan.negations")
        emit(1, f"POS = {(1 << len(plan.order)) - 1}")
        use.clear()
        for k, c in enumerate(comps):
            u = 0
            if c.kind is CompKind.KLEENE:
                u |= 1 << plan.order.index(c.vars[0])
            if k < nc - 1:
                u |= 1 << plan.order.index(comps[k + 1].vars[0])
            use.append(u)
        env["USE"] = tuple(use)
        emit(1, "present = -1")
        emit(1, "for e, b in zip(recs, bits):")
        emit(2, "ets = e[1]; ewp = e[4]; ecp = e[3]")

    def emit_negation_history() -> None:
        """Events of negated variables: to the history of their NOT (decided in the
        automaton) or to the matcher's slow negation path."""
        if plan.negations:
            emit(2, "if b & ~POS:")
            slow_bits = 0
            for gi, nb in enumerate(m.neg_bits):
                if gi in m.fast:
                    # a NOT decided inside the automaton only needs its history
                    emit(3, f"if b & {nb}:")
                    emit(4, f"H{gi}.append(e)")
                else:
                    slow_bits |= nb
            if slow_bits:
                fast_bits = sum(m.neg_bits[gi] for gi in m.fast)
                emit(3, f"if b & {slow_bits}:")
                emit(4, f"m.neg_event(st, e, b & ~{fast_bits})")

    def emit_expiry() -> None:
        """Events that no variable can take are skipped; runs whose window has passed (a
        prefix: runs are in first-event order) are dropped; contiguity kills runs."""
        emit(2, "if not b & POS:")
        emit(3, "continue")
        if (W is not None or CW is not None) and not strict:
            conds = []
            if W is not None:
                conds.append(f"ets - runs[cut][3] > {W}")
            if CW is not None:
                conds.append(f"ewp - runs[cut][4] >= {CW}")
            cond = " or ".join(conds)
            emit(2, f"if runs and ({cond.replace('[cut]', '[0]')}):")
            emit(3, "cut = 1; nr_ = len(runs)")
            emit(3, f"while cut < nr_ and ({cond}):")
            emit(4, "cut += 1")
            emit(3, "del runs[:cut]")
        if strict:
            # Every live run was created or extended by the previous candidate event of this
            # key (a run that does not take an event dies), so all runs share last_cpos: one
            # contiguity test per event. Runs are in first-event order, so the expired ones
            # (time or count window) are a prefix.
            emit(2, "if runs:")
            emit(3, "if ecp != runs[0][6] + 1:")
            emit(4, "runs = ()")
            wconds = []
            if W is not None:
                wconds.append(f"ets - runs[cut][3] > {W}")
            if CW is not None:
                wconds.append(f"ewp - runs[cut][4] >= {CW}")
            if wconds:
                cond = " or ".join(wconds)
                emit(3, f"elif {cond.replace('[cut]', '[0]')}:")
                emit(4, "cut = 1; nr_ = len(runs)")
                emit(4, f"while cut < nr_ and ({cond}):")
                emit(5, "cut += 1")
                emit(4, "runs = runs[cut:]")

    def emit_ignore_shortcut() -> bool:
        """The *ignore* edge in bulk: when the event has none of the bits the live runs'
        states can use, the runs are kept as they are without visiting each."""
        skip_idle = not strict
        if skip_idle:
            # Under skip-till-next / skip-till-any, a run whose state has no edge for the event's
            # bits only ignores it (kept unchanged, in order). ``present`` is the union of the
            # bits the live runs' states can use (a superset is safe; -1 = recompute): when the
            # event has none of them, the runs are kept as they are without visiting each.
            emit(2, "if present < 0:")
            emit(3, "present = 0")
            emit(3, "for r in runs:")
            emit(4, "present |= USE[r[0]]")
            emit(2, "if b & present:")
            emit(3, "new = []; todo = runs; present = -1")
            emit(2, "else:")
            emit(3, "new = runs; todo = ()")
        else:
            emit(2, "new = []; todo = runs")
        return skip_idle

    def emit_take_and_proceed_edges() -> None:
        """Per live run, by its state: the *take* edge (Kleene loop) and the *proceed* edge
        into the next component (through the closing predicates)."""
        if mm is not None:
            emit(2, "nm = 0")
        emit(2, "for r in todo:")
        emit(3, "k = r[0]; B = r[2]")
        if stnm:
            emit(3, "took = False")
        for k, c in enumerate(comps):
            emit(3, ("if" if k == 0 else "elif") + f" k == {k}:")
            d = 4
            if c.kind is CompKind.KLEENE:
                vp = plan.vars[c.vars[0]]
                emit(d, "n = r[1]")
                cmax = f" and n < {c.max}" if c.max is not None else ""
                emit(d, f"if b & {1 << plan.order.index(c.vars[0])}{cmax}:")

                def body(dd: int, k: int = k) -> None:
                    if stnm:
                        emit(dd, "took = True")
                    on_new(dd, k, "(k, n + 1, B2, r[3], r[4], r[5], ecp"
                           + (", r[7])" if pend else ")"), "n + 1", "B2", ("r[3]", "r[4]"),
                           "r[7]" if pend else "()")

                emit_take(d + 1, k, False, b_with(vp.slot, f"B[{vp.slot}] + (e,)"), "n + 1", body)
                if k < nc - 1:
                    cc = close_cond(k, "B", "n")
                    if cc == "True":
                        proceed_into(d, k + 1, "run")
                    else:
                        emit(d, f"if {cc}:")
                        proceed_into(d + 1, k + 1, "run")
            else:
                if k < nc - 1:
                    proceed_into(d, k + 1, "run")
                else:
                    emit(d, "pass")

    def emit_ignore_edge() -> None:
        """The *ignore* edge per run: always under skip-till-any-match, only when no edge was
        taken under skip-till-next-match, never under the contiguity strategies."""
        if not strict:
            if stnm:
                emit(3, "if not took:")
                emit(4, "new.append(r)")
            else:
                emit(3, "new.append(r)")

    def emit_begin_edge(skip_idle: bool) -> None:
        """The *begin* edge: the event starts a new run in the first component."""
        proceed_into(2, 0, "begin")
        if skip_idle:
            emit(2, f"if present >= 0 and b & {1 << plan.order.index(comps[0].vars[0])}:")
            emit(3, f"present |= {use[0]}")

    def emit_caps() -> None:
        """The caps after each event: matches per event, live runs per key, matches per call
        (with the hand-off to the counting variant when truncating)."""
        if mm is not None:
            env["TMM"] = too_many_matches
            emit(2, f"if nm > {int(mm)}:")
            if count_mode:
                # the counts before this event are final even if the cap raises (a
                # truncating runtime saturates the partition and keeps them)
                emit(3, "m.counted += cnt - nm; cnt = nm")
            emit(3, f"drop = TMM(m, e, nm, {int(mm)})")
            if count_mode:
                emit(3, "cnt -= drop")
            else:
                emit(3, "del out[len(out) - drop:]")
        if m.max_runs is not None:
            env["TMR"] = too_many_runs
            emit(2, f"if len(new) > {int(m.max_runs)}:")
            if count_mode:
                emit(3, "m.counted += cnt; cnt = 0")
            emit(3, "del new[:TMR(m, len(new), e)]")
        emit(2, "runs = new")
        if capped:
            # out only grows with this event's matches (nm counts them when tracked)
            emit(2, "if nm and len(out) > budget:" if mm is not None else "if len(out) > budget:")
            emit(3, "OVER(m, e, out, budget)")
            if "MAKE_DRAIN" in env:
                # truncating and the budget is spent: the rest of the events only advance the
                # runs, and their matches are counted as truncated, never built
                emit(3, "st.runs = runs; rest = recs.index(e) + 1; c0 = m.counted")
                emit(3, "try:")
                emit(4, "DRAIN(st, recs[rest:], bits[rest:], None, None)")
                emit(3, "finally:")  # (the runs cap may raise in it: a saturating runtime)
                emit(4, "m.truncated_matches += m.counted - c0; m.counted = c0")
                emit(3, "st.last_ts = recs[-1][1]; st.last_wpos = recs[-1][4]")
                emit(3, "return")

    def emit_footer() -> None:
        """Store the runs and the key's last position; count mode adds its count."""
        emit(1, "st.runs = runs")
        if count_mode:
            emit(1, "m.counted += cnt")
        emit(1, "if recs:")
        emit(2, "st.last_ts = recs[-1][1]; st.last_wpos = recs[-1][4]")

    use: list[int] = []
    emit_header()
    emit_negation_history()
    emit_expiry()
    skip_idle = emit_ignore_shortcut()
    emit_take_and_proceed_edges()
    emit_ignore_edge()
    emit_begin_edge(skip_idle)
    emit_caps()
    emit_footer()
    src = "def make(m):\n" + "".join(f"    {b}\n" for b in bound) + "".join(
        f"    {line}\n" for line in L) + "    process.source = SOURCE\n    return process\n"
    # generated from the plan's integers and function objects only (no user text)
    env["SOURCE"] = src
    make: Callable[[Any], Any] = build(src, env, label="kernel", entry="make")
    return make


__all__ = ["build_kernel", "kernel_factory", "kernel_supported"]
