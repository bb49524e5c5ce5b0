"""Hypothesis strategies: random queries from a grammar of every feature × small random streams.

Used by the differential test (tests/semantics/test_differential.py): every backend must return
exactly the oracle's matches, in order. Streams are tiny (the oracle is brute force) but dense in
the cases engines get wrong: equal timestamps, several partitions, NULL attributes, every event
type. Queries are canonical text, valid by construction (the grammar below only combines what
docs/semantics.md §14 allows). Needs the ``dev`` extra (hypothesis).

Example:
    >>> from hypothesis import given
    >>> @given(queries(feature="kleene"), streams())
    ... def test(q, s): ...
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from hypothesis import strategies as st

from ..events import EventBatch
from ..frozen import dataclass

TYPES = ("A", "B", "C", "D")
"""Event types of the random streams (queries mostly use A, B and C)."""

FEATURES = ("sequence", "kleene", "negation", "and_or_any", "windows", "partitions",
            "strategies", "policies", "return", "expressions", "mixed")
"""Feature groups for :func:`queries`; ``mixed`` draws from all of them at once."""


INT64_MAX = 2 ** 63 - 1
WILD_VALUES: dict[str, tuple[Any, ...]] = {
    "int": (None, 0, 1, 2, 3, -1, INT64_MAX, -INT64_MAX - 1, INT64_MAX - 1, 2 ** 62,
            2 ** 53 + 1, 2 ** 53, -(2 ** 53) - 1, 4611686018427387904),
    "float": (None, 0.0, -0.0, 1.0, 2.5, float("nan"), float("inf"), float("-inf"),
              9007199254740992.0, 1e300, -3.0),
    "str": (None, "", "1", "pa", "q", "é", "2"),
    "bool": (None, True, False),
    "list": (None, [], [1], [2], [1, 2], [0]),
}
"""The value pools of :func:`streams` with ``wild=True``: one pool per column and stream, so
that a column is one Arrow type (int64, float64, string, bool, list<int64>), while a query
compares it with literals and with the other column of another type."""


@st.composite
def streams(draw: st.DrawFn, *, min_events: int = 3, max_events: int = 9,
            max_ts: int = 6, wild: bool = False) -> EventBatch:
    """A small stream: random types, timestamps with many ties (input order not sorted),
    attribute ``x`` (small ints or NULL), ``s`` (short strings or NULL), partition key ``k``
    (``u``/``v``, rarely NULL).

    With ``wild``, ``x`` and a second attribute ``y`` each take their values from one pool of
    :data:`WILD_VALUES` drawn per stream: int64 extremes (overflow-prone), NaN and infinities,
    strings, booleans or lists, always with NULLs."""
    n = draw(st.integers(min_events, max_events))
    pools = {"x": (None, 0, 1, 2, 3, 1, 2)}
    if wild:
        pools = {c: WILD_VALUES[draw(st.sampled_from(sorted(WILD_VALUES)))]
                 for c in ("x", "y")}
    counters = dict.fromkeys(TYPES, 0)
    records = []
    for _ in range(n):
        t = draw(st.sampled_from(("A", "B", "C", "A", "B", "A", "B", "D")))
        counters[t] += 1
        rec = {
            "id": f"{t.lower()}{counters[t]}",
            "type": t,
            "ts": draw(st.integers(1, max_ts)),
            "k": draw(st.sampled_from(("u", "v", "u", "v", None))),
            "s": draw(st.sampled_from(("pa", "pb", "q", None))),
        }
        for c, pool in pools.items():
            rec[c] = draw(st.sampled_from(pool))
        records.append(rec)
    return EventBatch.from_records(records)


@dataclass
class _Vars:
    """Variables created while drawing a pattern."""

    single: list[str] = field(default_factory=list)
    lists: list[str] = field(default_factory=list)
    negated: list[str] = field(default_factory=list)
    branch: set[str] = field(default_factory=set)
    """Variables inside an OR/ANY branch (never related to each other in conditions)."""
    count: int = 0

    def new(self, type_: str) -> str:
        self.count += 1
        return f"{type_.lower()}{self.count}"


def _type(draw: st.DrawFn) -> str:
    # A and B dominate queries and streams so that random pairs match often enough
    return draw(st.sampled_from(("A", "B", "A", "B", "C")))


def _event(draw: st.DrawFn, vs: _Vars) -> str:
    t = _type(draw)
    v = vs.new(t)
    vs.single.append(v)
    return f"{t} {v}"


def _run(draw: st.DrawFn, vs: _Vars) -> tuple[str, list[str]]:
    """``SEQ(a, b+, c)`` with conditions on ``b[1]`` against ``a``, ``b[i]`` against
    ``b[i-1]`` and ``c`` against ``a`` (a rising or falling run, the stock query's shape)."""
    a, b, c = (vs.new(t) for t in ("A", "B", "C"))
    ta, tb, tc = (_type(draw) for _ in range(3))
    vs.single += [a, c]
    vs.lists.append(b)
    op = draw(st.sampled_from(["+", "+", "{2,}", "{1,2}"]))
    conds = [f"{b}[1].x {draw(st.sampled_from(['>', '<', '>=']))} {a}.x",
             f"{b}[i].x {draw(st.sampled_from(['>', '<', '!=']))} {b}[i-1].x",
             f"{c}.x {draw(st.sampled_from(['<', '>', '=']))} {a}.x"]
    keep = draw(st.lists(st.sampled_from(conds), min_size=1, max_size=3, unique=True))
    return f"SEQ({ta} {a}, {tb}{op} {b}[], {tc} {c})", keep


def _kleene(draw: st.DrawFn, vs: _Vars) -> tuple[str, bool]:
    """A Kleene item and whether it must bind an event (``*`` need not)."""
    t = _type(draw)
    v = vs.new(t)
    vs.lists.append(v)
    op = draw(st.sampled_from(["+", "{1,2}", "{2}", "*"]))
    return f"{t}{op} {v}[]", op != "*"


def _negation(draw: st.DrawFn, vs: _Vars) -> str:
    t = _type(draw)
    v = vs.new(t)
    vs.negated.append(v)
    return f"NOT({t} {v})"


def _or_events(draw: st.DrawFn, vs: _Vars) -> str:
    before = len(vs.single)
    text = f"OR({_event(draw, vs)}, {_event(draw, vs)})"
    vs.branch.update(vs.single[before:])
    return text


def _seq(draw: st.DrawFn, vs: _Vars, *, kleene: bool, negation: bool, or_: bool,
         and_: bool = False) -> str:
    """A SEQ of 1-3 positive items, optionally a NOT between two of them."""
    n = draw(st.integers(1, 3))
    items: list[str] = []
    required: list[bool] = []
    for _ in range(n):
        kinds = ["event"] + (["kleene"] if kleene else []) + (["or"] if or_ else []) + (
            ["and"] if and_ else [])
        kind = draw(st.sampled_from(kinds))
        if kind == "kleene":
            item, req = _kleene(draw, vs)
            items.append(item)
            required.append(req)
            continue
        if kind == "or":
            items.append(_or_events(draw, vs))
        elif kind == "and":
            items.append(f"AND({_event(draw, vs)}, {_event(draw, vs)})")
        else:
            items.append(_event(draw, vs))
        required.append(True)
    if not any(required):  # a SEQ needs one event that must occur
        items.append(_event(draw, vs))
        required.append(True)
    # a NOT needs an event that must occur on each side (no window is drawn for it here)
    spots = [i for i in range(1, len(items)) if any(required[:i]) and any(required[i:])]
    if negation and spots and draw(st.booleans()):
        items.insert(draw(st.sampled_from(spots)), _negation(draw, vs))
    return f"SEQ({', '.join(items)})"


def _conditions(draw: st.DrawFn, vs: _Vars, wild: bool = False) -> list[str]:
    """0-2 WHERE conjuncts that fit the drawn variables (with ``wild``, also overflowing
    arithmetic, literals beyond int64 and comparisons across the columns ``x`` and ``y``)."""
    templates: list[str] = []
    related = [v for v in vs.single if v not in vs.branch]
    for v in vs.single:
        templates += [f"{v}.x > 1", f"{v}.x <= 2", f"{v}.x IS NULL", f"{v}.x IN (0, 3)",
                      f"{v}.x BETWEEN 1 AND 2"]
        if wild:
            templates += [f"{v}.x * 4611686018427387904 > 0", f"{v}.x + 1 > {v}.x",
                          f"{v}.x - 9223372036854775807 < 0", f"-{v}.x >= 0",
                          f"{v}.x > 99999999999999999999", f"{v}.x < -99999999999999999999",
                          f"{v}.x > {v}.y", f"{v}.x = {v}.y", f"{v}.x / 3 > 1",
                          f"{v}.y <= 9007199254740993", f"{v}.x != {v}.x",
                          f"abs({v}.x) >= 2", f"{v}.x IN (9007199254740993, 2.5, 'q')",
                          f"{v}.y BETWEEN 0 AND 9223372036854775807", f"{v}.x * 2.0 > 1e19"]
    if wild:
        templates += [f"{v}.y > {w}.x" for v in related for w in related if w != v]
        templates += [f"{v}.x * {w}.x < 0" for v in related for w in related if w != v]
    templates += [f"{v}.x >= {w}.x" for v in related for w in related if w != v]
    for v in vs.lists:
        templates += [f"{v}[i].x >= {v}[i-1].x", f"{v}.x > 0", f"sum({v}.x) <= 4",
                      f"count({v}) <= 2", f"first({v}).x < last({v}).x", f"avg({v}.x) >= 1",
                      f"{v}.x IS NOT NULL", f"{v}[last].x >= {v}[1].x",
                      f"max({v}.x) - min({v}.x) <= 1"]
        templates += [f"{v}.x >= {w}.x" for w in related]
    for n in vs.negated:
        templates += [f"{n}.x > 1", f"{n}.x IS NOT NULL"]
        templates += [f"{n}.x >= {w}.x" for w in related]
        templates += [f"{n}.x > {w}.x" for w in vs.lists if w not in vs.branch]
    if not templates:
        return []
    return draw(st.lists(st.sampled_from(templates), min_size=int(wild), max_size=2,
                         unique=True))


def _expression(vs: _Vars) -> st.SearchStrategy[str]:
    """Conditions over the whole expression language: NULLs, strings, division, functions."""
    names = vs.single + vs.lists + vs.negated
    ref = st.sampled_from(names)
    num = st.one_of(
        st.builds(lambda v: f"{v}.x", ref),
        st.integers(-1, 3).map(str),
        st.builds(lambda v, w: f"{v}.x / ({w}.x - 1)", ref, ref),
        st.builds(lambda v: f"{v}.x % 2", ref),
        st.builds(lambda v: f"coalesce({v}.x, 2)", ref),
        st.builds(lambda v: f"abs({v}.x - 2)", ref),
        st.builds(lambda v: f"-{v}.x", ref),
        st.builds(lambda v: f"length({v}.s)", ref),
    )
    cmp = st.builds(lambda a, op, b: f"{a} {op} {b}", num,
                    st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), num)
    text = st.one_of(
        st.builds(lambda v, p: f"{v}.s LIKE '{p}'", ref, st.sampled_from(["p%", "_a", "%"])),
        st.builds(lambda v: f"{v}.s IN ('pa', 'q')", ref),
        st.builds(lambda v: f"{v}.s = {v}.x", ref),
        st.builds(lambda v: f"upper({v}.s) = 'PB'", ref),
        st.builds(lambda v: f"{v}.s IS NULL", ref),
    )
    atom = st.one_of(cmp, text, st.builds(lambda v: f"{v}.x BETWEEN 1 AND 2", ref))
    return st.one_of(
        atom,
        st.builds(lambda a, b: f"({a} OR {b})", atom, atom),
        st.builds(lambda a: f"NOT ({a})", atom),
    )


def _window(draw: st.DrawFn) -> str:
    if draw(st.booleans()):
        return f"WITHIN {draw(st.integers(1, 4))} seconds"
    return f"WITHIN {draw(st.integers(2, 5))} EVENTS"


def queries(*, feature: str = "mixed", wild: bool = False) -> st.SearchStrategy[str]:
    """Valid canonical queries exercising ``feature`` (one of :data:`FEATURES`); ``wild``
    adds conditions for the values of ``streams(wild=True)``."""
    if feature not in FEATURES:
        raise ValueError(f"unknown feature {feature!r}; one of {', '.join(FEATURES)}")
    return _queries(feature=feature, wild=wild).filter(_valid)


def _valid(text: str) -> bool:
    """The grammar above rarely builds a query the validator rejects (e.g. a condition across
    two OR branches); such draws are discarded rather than reported as engine differences. The
    rejection itself is covered by the validation tests in tests/lang."""
    from ..api import analyze
    from ..errors import QueryValidationError

    try:
        analyze(text)
    except QueryValidationError:
        return False
    return True


@st.composite
def _queries(draw: st.DrawFn, *, feature: str, wild: bool = False) -> str:
    if feature == "mixed":
        feature = draw(st.sampled_from(FEATURES[:-1]))
        mixed = True
    else:
        mixed = False
    vs = _Vars()
    clauses: dict[str, str] = {}
    where: list[str] = []
    strategy = ""
    run_shape = False
    if feature == "sequence":
        pattern = _seq(draw, vs, kleene=False, negation=False, or_=False)
    elif feature == "kleene":
        if draw(st.integers(0, 4)) == 0:
            pattern = f"(SEQ({_event(draw, vs)}, {_event(draw, vs)})){{1,2}}"
            vs.lists += vs.single
            vs.single.clear()
        else:
            pattern = _seq(draw, vs, kleene=True, negation=False, or_=False)
    elif feature == "negation":
        shape = draw(st.sampled_from(["between", "between", "and", "leading", "trailing"]))
        if shape == "between":
            a, n, b = _event(draw, vs), _negation(draw, vs), _event(draw, vs)
            pattern = f"SEQ({a}, {n}, {b})"
        elif shape == "and":
            pattern = f"AND({_event(draw, vs)}, {_event(draw, vs)}, {_negation(draw, vs)})"
        elif shape == "leading":
            pattern = f"SEQ({_negation(draw, vs)}, {_event(draw, vs)}, {_event(draw, vs)})"
            clauses["within"] = _window(draw)
        else:
            pattern = f"SEQ({_event(draw, vs)}, {_event(draw, vs)}, {_negation(draw, vs)})"
            clauses["within"] = _window(draw)
    elif feature == "and_or_any":
        shape = draw(st.sampled_from(["and", "or", "any", "seq-or", "seq-and"]))
        if shape == "and":
            pattern = f"AND({_event(draw, vs)}, {_event(draw, vs)})"
        elif shape == "or":
            pattern = f"OR({_seq(draw, vs, kleene=False, negation=False, or_=False)}, " \
                      f"{_event(draw, vs)})"
            vs.branch.update(vs.single)
        elif shape == "any":
            k = draw(st.integers(1, 2))
            pattern = f"ANY({k}, {_event(draw, vs)}, {_event(draw, vs)}, {_event(draw, vs)})"
            vs.branch.update(vs.single)
        elif shape == "seq-or":
            pattern = _seq(draw, vs, kleene=False, negation=False, or_=True)
        else:
            pattern = _seq(draw, vs, kleene=False, negation=False, or_=False, and_=True)
    elif feature == "windows":
        if draw(st.booleans()):
            inner = f"AND({_event(draw, vs)}, {_event(draw, vs)}) {_window(draw)}"
            pattern = f"SEQ({_event(draw, vs)}, {inner})"
        else:
            pattern = _seq(draw, vs, kleene=True, negation=False, or_=False)
        if draw(st.booleans()) or "WITHIN" not in pattern:
            clauses["within"] = _window(draw)
    elif feature == "partitions":
        pattern = _seq(draw, vs, kleene=True, negation=True, or_=False)
        if draw(st.booleans()):
            clauses["partition"] = "PARTITION BY k"
        else:
            where.append("[k]")
        if draw(st.booleans()):
            clauses["within"] = _window(draw)
    elif feature == "strategies":
        strategy = draw(st.sampled_from(["strict-contiguity", "partition-contiguity",
                                         "skip-till-next-match", "skip-till-next-match"]))
        if strategy == "strict-contiguity" and draw(st.integers(0, 2)) == 0:
            # a run between a and c (the runs plan's shape, kleene.plans.runs)
            pattern, run_conds = _run(draw, vs)
            where += run_conds
            run_shape = True
            if draw(st.booleans()):
                clauses["partition"] = "PARTITION BY k"
        else:
            pattern = _seq(draw, vs, kleene=True, negation=strategy == "skip-till-next-match",
                           or_=strategy == "skip-till-next-match")
        if strategy == "partition-contiguity" or draw(st.booleans()):
            where.append("[k]")
        if strategy == "skip-till-next-match" and draw(st.integers(0, 3)) == 0:
            other = _seq(draw, vs, kleene=True, negation=False, or_=False)
            pattern = f"OR({pattern}, {other})"
            vs.branch.update(vs.single)
    elif feature == "policies":
        pattern = _seq(draw, vs, kleene=True, negation=False, or_=False)
    elif feature == "expressions":
        pattern = _seq(draw, vs, kleene=draw(st.booleans()), negation=draw(st.booleans()),
                       or_=False)
        where.append(draw(_expression(vs)))
    else:  # return
        pattern = _seq(draw, vs, kleene=True, negation=False, or_=True)
    if not run_shape:
        where += _conditions(draw, vs, wild)
    positive = vs.single + vs.lists
    if feature == "policies" or (mixed and draw(st.booleans())):
        picks = []
        for v in draw(st.lists(st.sampled_from(positive), max_size=2, unique=True)):
            mode = draw(st.sampled_from(["FIRST", "LAST", "EACH"]))
            pick = f"{mode} {v}"
            others = [w for w in vs.single if w != v]
            if others and v in vs.single and draw(st.booleans()):
                pick += f" WITHIN {draw(st.integers(1, 3))} seconds FROM " \
                        f"{draw(st.sampled_from(others))}"
            picks.append(pick)
        if picks:
            clauses["pick"] = "PICK " + ", ".join(picks)
        if draw(st.booleans()):
            consumed = draw(st.lists(st.sampled_from(positive), max_size=2, unique=True))
            clauses["consume"] = "CONSUME " + (", ".join(consumed) if consumed else "ALL")
        if draw(st.booleans()):
            clauses["emit"] = "EMIT RECENT"
    if feature == "return" or (mixed and draw(st.booleans())):
        items = []
        for v in vs.single:
            items += [f"{v}.x AS {v}_x", f"{v}.x * 2 + 1 AS {v}_y", f"{v}.ts AS {v}_t"]
        for v in vs.lists:
            items += [f"count({v}) AS {v}_n", f"sum({v}.x) AS {v}_s", f"{v}.x AS {v}_xs",
                      f"max({v}.x) AS {v}_m", f"{v}[last].x AS {v}_l"]
        clauses["return"] = "RETURN " + ", ".join(
            draw(st.lists(st.sampled_from(items), min_size=1, max_size=3, unique=True)))
    if feature not in ("negation", "windows") and "within" not in clauses and draw(st.booleans()):
        clauses["within"] = _window(draw)
    parts = [f"PATTERN {pattern}"]
    if where:
        parts.append("WHERE " + " AND ".join(where))
    for key in ("partition", "within"):
        if key in clauses:
            parts.append(clauses[key])
    if strategy:
        parts.append(f"USING {strategy}")
    for key in ("pick", "consume", "emit", "return"):
        if key in clauses:
            parts.append(clauses[key])
    return " ".join(parts)


def describe(events: EventBatch) -> str:
    """A stream as ``name@ts{x,k}`` tokens (for readable failure reports)."""
    rows: list[dict[str, Any]] = events.rows()
    return " ".join(f"{r['__id']}@{r['__ts'] // 1_000_000}{{x={r.get('x')!r},k={r.get('k')}"
                    + (f",y={r['y']!r}" if "y" in r else "") + "}" for r in rows)


__all__ = ["FEATURES", "TYPES", "describe", "queries", "streams"]
