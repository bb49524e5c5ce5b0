"""A generated per-event loop for the chain plan on a SEQ of single variables (issue 13,
Experiment 2 on keyed streams).

On a keyed stream with few matches (the Aarhus traffic data: 449 sensors, ~40 candidate
events per sensor and query) the chain plan's time is per event and per key, not per match:
the interpreted loop of :meth:`ChainMatcher._process_seq` walks the states an event takes
through lists and flags, and :meth:`ChainMatcher.new_state` builds a dataclass with eight
default factories and one ``Part`` per state for every key. This module generates, per
query, the same loop with the states unrolled (constants for the bits, the window and the
caps; one local per partition list) and a constructor of the per-key state that assigns its
slots directly. Idle keys cost little: a new key shares the matcher's empty partitions
(``NULL``) until its first start event, and a key whose partitions are all empty skips the
events before its next start event in one scan (they change only the adjacency bits and the
expiry tick). The nodes, snapshots, counters, caps and the join (:func:`fast_joiner`, or the
lazy join when a cap could stop it) are exactly those of ``_process_seq``: the same matches in
the same order (tests/runtime/test_chain_seq.py).

:func:`install` puts both on a :class:`ChainMatcher` whose ``fast_join`` is set (and no
Kleene join), as instance attributes: the engine calls ``matcher.process`` and
``matcher.new_state`` as before.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from dataclasses import MISSING, fields
from typing import Any

from ..codegen import Source, build
from ..plan.expr import TS, WPOS
from ..runtime.caps import event_caps
from .chain import ChainMatcher, ChainState, Part

_LITERALS = {list: "[]", dict: "{}", deque: "deque()"}


def _state_builder(m: ChainMatcher) -> Any:
    """``(new_state, part, NULL)``: ``new_state()`` is ``m.new_state()`` (a fresh
    :class:`ChainState`) built by assigning the slots -- every field from its dataclass
    default, then the matcher's own values (``cur_run``, ``total``) -- except that its
    partitions are ``NULL``, one list of empty ``Part`` objects shared by every key until the
    generated loop gives the key its own (``part()`` each) at its first start event. Only that
    loop appends to partitions; everything else reads them or replaces them (``load_state``)."""
    n = m.n
    env: dict[str, Any] = {"new": object.__new__, "ChainState": ChainState, "Part": Part,
                           "deque": deque}
    own = {"neg_hist": "[" + ", ".join(["[]"] * len(m.plan.negations)) + "]",
           "parts": "NULL",
           "cur_run": f"[-1] * {n}", "total": f"[0] * {n}"}
    src = Source()
    with src.block("def part():"):
        src.line("p = new(Part)")
        for f in fields(Part):
            src.line(f"p.{f.name} = {_default(f, env)}")
        src.line("return p")
    src.line("NULL = [part()] * " + str(n))
    with src.block("def new_state():"):
        src.line("s = new(ChainState)")
        for f in fields(ChainState):
            src.line(f"s.{f.name} = {own.get(f.name) or _default(f, env)}")
        src.line("return s")
    return build("\n".join(src.lines) + "\n", env, label="chain state",
                 entry=("new_state", "part", "NULL"))


def _default(f: Any, env: dict[str, Any]) -> str:
    """Source text of a dataclass field's default (a constant goes through ``env``)."""
    if f.default_factory is not MISSING:
        lit = _LITERALS.get(f.default_factory)
        if lit is not None:
            return lit
        env[f"F_{f.name}"] = f.default_factory
        return f"F_{f.name}()"
    if f.default is MISSING:
        raise TypeError(f"chain state field {f.name!r} has no default")
    if f.default is None or type(f.default) is int:
        return repr(f.default)
    env[f"D_{f.name}"] = f.default
    return f"D_{f.name}"


def _loop(m: ChainMatcher, part: Any, null: list[Part]) -> Any:
    """``process(st, recs, bits, out, max_matches, budget=None)``: ``_process_seq`` for the
    shape of :func:`fast_joiner` with the states unrolled (see the module docstring).

    The states an event takes are visited from the last down, so each reads its source's
    length before the event is appended there. An event that adds a node to the last state
    takes one branch (the node, the lower states, the join, every cap); any other event the
    other (the lower states, and the runs cap only when it added a node: neither its matches
    nor the call's output changed). The counters of nodes and of start nodes are the growth
    of the partitions' global sizes, summed once per call."""
    n = m.n
    last = n - 1
    wu, we = m.win_us, m.win_ev
    mr = m.max_runs
    env: dict[str, Any] = {"m": m, "fj": m.fast_join, "lo_of": m._lo, "part": part,
                           "NULL": null,
                           "expire": m._expire, "join_lazy": m._join_lazy,
                           "seq_block": m._join_seq_block,
                           "event_caps": event_caps, "bisect_left": bisect_left}
    sizes = " + ".join(f"p{k}.base + len(R{k})" for k in range(n))
    lens = " + ".join(f"len(R{k})" for k in range(n))
    src = Source()

    def admits(j: int) -> str:
        """The window admits a partial match whose latest first event is that of state
        ``j``'s newest node (``R{j}`` is not empty)."""
        conds = ([f"LT{j}[-1] >= e[{TS}] - {wu}"] if wu is not None else []) + (
            [f"LW{j}[-1] >= e[{WPOS}] - {we - 1}"] if we is not None else [])
        return "".join(f" and {c}" for c in conds)

    def node(k: int, depth: int) -> None:
        """State ``k``'s node for ``e`` (its source, ``k - 1``, admits it)."""
        j, cb = k - 1, m.cbit[k]
        src.at(depth, f"made = p{j}.tails", f"sn = p{j}.base + len(R{j})", "snap = (sn,)",
               "copied += made",
               f"if S{k} and adj & {cb} and S{k}[-1][0] == sn:", f"    C{k}.append(False)",
               "else:", f"    p{k}.tails += made", f"    C{k}.append(True)",
               f"R{k}.append(e)", f"S{k}.append(snap)", f"LT{k}.append(LT{j}[-1])",
               f"LW{k}.append(LW{j}[-1])")
        if mr is not None:
            src.at(depth, "live += 1")

    def lower(depth: int) -> None:
        """The states below the last, from the second-to-last down to the first."""
        for k in range(last - 1, 0, -1):
            src.at(depth, f"if b & {m.cbit[k]} and R{k - 1}{admits(k - 1)}:")
            node(k, depth + 1)
        src.at(depth, f"if b & {m.cbit[0]}:")
        start(depth + 1)

    def start(depth: int) -> None:
        """A start node for ``e``. Its snapshot is (): it extends the chain when the key's
        previous relevant event could take the first state too."""
        cb0 = m.cbit[0]
        src.at(depth, f"if S0 and adj & {cb0}:", "    C0.append(False)", "else:",
               "    p0.tails += 1", "    C0.append(True)", "R0.append(e)", "S0.append(())",
               f"LT0.append(e[{TS}])", f"LW0.append(e[{WPOS}])")
        if mr is not None:
            src.at(depth, "live += 1")

    def accept() -> None:
        """The last state's node: its join, then every cap."""
        if wu is not None:
            src.line(f"bt = e[{TS}] - {wu}")
        if we is not None:
            src.line(f"bw = e[{WPOS}] - {we - 1}")
        src.line("nm = 0")
        # blocks written earlier in the call (lazy output) hold ``m.described`` more matches
        src.line("rest = None if budget is None else budget - m.described")
        with src.block("if rest is not None and len(out) >= rest "
                       "and m.on_cap != 'error':"):
            # the call's budget is spent: the node leads to at least one match (no dead
            # ends), counted as a lower bound without joining
            src.line("m.truncated_matches += 1", "m.inexact = True")
        with src.block("else:"):
            if we is not None:
                src.line("lo0 = lo_of(p0, bt, bw)")
            elif wu is not None:
                src.line("lo0 = p0.base + (bisect_left(LT0, bt) if LT0 and LT0[0] < bt "
                         "else 0)")
            else:
                src.line("lo0 = p0.base")
            # a bound on the node's matches: the generated join writes them all at once
            # only when no cap can stop it (else the lazy join). The partitions' lengths
            # include the event's own lower nodes, as in ``_process_seq``.
            lo = "[lo0, " + ", ".join(f"p{k}.base" for k in range(1, n)) + "]"
            src.line(f"blk_n = seq_block(st, e, {lo}, hi, out, max_matches, rest) "
                     "if desc else None")
            src.line("fits = True")
            with src.block("if blk_n is None and (max_matches is not None "
                           "or rest is not None):"):
                src.line("bound = max(0, p0.base + len(R0) - lo0)"
                         + "".join(f" * len(R{k})" for k in range(1, last)),
                         "fits = (max_matches is None or bound <= max_matches) "
                         "and (rest is None or len(out) + bound <= rest)")
            with src.block("if blk_n is not None:"):
                src.line("nm = blk_n")
            with src.block("elif fits:"):
                src.line("before = len(out)", "fj(P, [lo0, " + ", ".join(
                    f"p{k}.base" for k in range(1, n)) + "], e, hi, out)",
                    "nm = len(out) - before")
            with src.block("else:"):
                src.line("nm = join_lazy(st, e, bt, bw, out, max_matches, rest)")
        src.line("rest = None if budget is None else budget - m.described")
        over = ["(max_matches is not None and nm > max_matches)",
                "(rest is not None and len(out) > rest)"]
        if mr is not None:
            over.append(f"live > {mr}")
        with src.block(f"if {' or '.join(over)}:"):
            src.line(f"drop = event_caps(m, e, nm, out, max_matches, rest, "
                     f"{'live' if mr is not None else 0})")
            with src.block("if drop:"):
                src.line("m._drop_oldest(st, drop)")
                if mr is not None:
                    src.line("live = m.live(st)")

    def runs_cap() -> None:
        """After an event that joined nothing: the output is as the last event left it, so
        only the runs cap can be passed, and only by a node this event added."""
        if mr is not None:
            with src.block(f"if live > {mr}:"):
                src.line("drop = event_caps(m, e, 0, out, max_matches, budget, live)")
                with src.block("if drop:"):
                    src.line("m._drop_oldest(st, drop)", "live = m.live(st)")

    types = [set(c.types) for c in m.plan.components]
    exclusive = all(None not in t for t in types) and sum(map(len, types)) == len(
        set().union(*types))

    with src.block("def process(st, recs, bits, out, max_matches, budget=None):"):
        src.line("P = st.parts", "prev = st.prev_bits", "tick = 0", "m.described = 0",
                 "desc = m.describe")
        # an idle key (every partition empty, or none made yet): until its next start event
        # an event changes only the adjacency and the expiry tick (expiry has nothing to
        # cut), so the prefix before it is skipped in one scan
        empty = " or ".join(f"P[{k}].recs" for k in range(n))
        with src.block(f"if P is NULL or not ({empty}):"):
            if exclusive:
                # an event that takes the first state takes no other: its bits are that
                # state's bit alone, found at C speed
                src.line("try:", f"    i = bits.index({m.cbit[0]})", "except ValueError:",
                         "    i = len(bits)")
            else:
                src.line("i = 0")
                with src.block("for b in bits:"):
                    src.line(f"if b & {m.cbit[0]}:", "    break", "i += 1")
            with src.block("if i:"):
                src.line("j = i - 1", f"while j >= 0 and not bits[j] & {m.pos_bits}:",
                         "    j -= 1", "if j >= 0:", "    prev = bits[j]")
                if wu is not None or we is not None:
                    # (no NOT: every bit is a positive variable's)
                    src.line("tick = (i - bits[:i].count(0)) % 16")
                with src.block("if i == len(bits):"):
                    src.line("st.prev_bits = prev", "e = recs[-1]",
                             f"st.last_wpos = e[{WPOS}]", f"st.last_ts = e[{TS}]", "return")
                src.line("recs = recs[i:]", "bits = bits[i:]")
            with src.block("if P is NULL:"):
                src.line("st.parts = P = [" + ", ".join(["part()"] * n) + "]")
        if wu is not None or we is not None:
            # expire once per call too, as _process_seq does: a key may get fewer than 16
            # events a call (the tick restarts each call), and its nodes would never be cut
            with src.block("if recs:"):
                src.line("r0 = recs[0]")
                src.line("expire(st, " + ("None" if wu is None else f"r0[{TS}] - {wu}") + ", "
                         + ("None" if we is None else f"r0[{WPOS}] - {we - 1}") + ")")
        for k in range(n):
            src.line(f"p{k} = P[{k}]", f"R{k} = p{k}.recs", f"S{k} = p{k}.snaps",
                     f"LT{k} = p{k}.lft", f"LW{k} = p{k}.lfw", f"C{k} = p{k}.chain")
        src.line("copied = 0", f"size0 = {sizes}", "start0 = p0.base + len(R0)", "e = ()",
                 "bt = bw = None")
        if mr is not None:
            src.line(f"live = {lens}")
        with src.block("try:"):
            with src.block("for e, b in zip(recs, bits, strict=True):"):
                src.line(f"b &= {m.pos_bits}", "if not b:", "    continue")
                if wu is not None or we is not None:
                    # expiry is amortised: joins bisect the window anyway
                    src.line("tick += 1")
                    with src.block("if tick >= 16:"):
                        src.line("tick = 0")
                        if wu is not None:
                            src.line(f"bt = e[{TS}] - {wu}")
                        if we is not None:
                            src.line(f"bw = e[{WPOS}] - {we - 1}")
                        src.line("expire(st, bt, bw)")
                        if mr is not None:
                            src.line(f"live = {lens}")
                src.line("adj = prev", "prev = b")
                if exclusive:
                    # each event takes one state at most (the states' types are disjoint)
                    with src.block(f"if b & {m.cbit[last]}:"):
                        with src.block(f"if R{last - 1}{admits(last - 1)}:"):
                            node(last, src.depth)
                            src.line("hi = sn")
                            accept()
                    for k in range(last - 1, -1, -1):
                        with src.block(f"elif b & {m.cbit[k]}:"):
                            if k:
                                with src.block(f"if R{k - 1}{admits(k - 1)}:"):
                                    node(k, src.depth)
                                    runs_cap()
                            else:
                                start(src.depth)
                                runs_cap()
                else:
                    with src.block(f"if b & {m.cbit[last]} and R{last - 1}"
                                   f"{admits(last - 1)}:"):
                        node(last, src.depth)
                        src.line("hi = sn")
                        lower(src.depth)
                        accept()
                    with src.block("else:"):
                        lower(src.depth)
                        runs_cap()
        with src.block("finally:"):
            src.line("st.prev_bits = prev", "starts = p0.base + len(R0) - start0",
                     "m.created += copied + starts", "m.copied += copied",
                     f"m.nodes_made += {sizes} - size0")
            with src.block("if e:"):  # the last event looked at
                src.line(f"st.last_wpos = e[{WPOS}]", f"st.last_ts = e[{TS}]")
    return build("\n".join(src.lines) + "\n", env, label=f"chain seq loop {m.plan.name}",
                 entry="process")


def applies(m: ChainMatcher) -> bool:
    """The shape of the generated loop: :func:`fast_joiner`'s (set on ``m``), no Kleene
    join."""
    return m.fast_join is not None and not m.kleene_join and not m.count_mode


def install(m: ChainMatcher) -> None:
    """Put the generated loop and state constructor on ``m`` when :func:`applies`."""
    if not applies(m):
        return
    new_state, part, null = _state_builder(m)
    # instance attributes shadow the methods: the engine's calls reach the generated code
    setattr(m, "process", _loop(m, part, null))  # noqa: B010 - assigning a method is not typed
    setattr(m, "new_state", new_state)  # noqa: B010
