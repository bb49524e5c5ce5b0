"""SQL's preference key (AFTER MATCH SKIP, docs/semantics.md 19): the shortcut for sequences of
single events and their repetitions equals the backtracking parse, and long matches are ranked
without exhausting the stack (a match of thousands of rows once raised RecursionError)."""

from __future__ import annotations

import random

import pytest

from kleene.errors import EngineError
from kleene.runtime.policies import _flat_key, preference_key


def _random_case(rng: random.Random) -> tuple[tuple, tuple[str, ...]]:
    items, seq = [], []
    for k in range(rng.randint(1, 4)):
        v = f"v{k}"
        if rng.random() < 0.4:
            items.append(("e", v))
            seq.append(v)
            continue
        lo = rng.randint(0, 2)
        hi = rng.choice([None, lo + rng.randint(0, 3)])
        items.append(("k", ("e", v), lo, hi, rng.random() < 0.5))
        seq += [v] * rng.randint(lo, hi if hi is not None else lo + 4)
    return ("s", tuple(items)), tuple(seq)


def test_the_shortcut_equals_the_backtracking_parse() -> None:
    rng = random.Random(5)
    for _ in range(2_000):
        node, seq = _random_case(rng)
        flat = _flat_key(node, seq)
        assert flat is not None
        # one more level of sequence: the shortcut does not apply, the general parse runs
        assert flat == preference_key(("s", (node,)), seq), (node, seq)


def test_other_shapes_take_the_general_parse() -> None:
    a, b = ("e", "a"), ("e", "b")
    assert _flat_key(("s", (("k", a, 1, None, False), ("k", a, 1, None, False))), ("a",) * 3) \
        is None  # a variable twice
    assert _flat_key(("s", (("o", (a, b)),)), ("a",)) is None  # an alternation
    assert _flat_key(("s", (a, b)), ("a", "a", "b")) is None  # not a parse: general path


def test_a_match_of_thousands_of_rows_is_ranked() -> None:
    node = ("s", (("k", ("e", "A"), 1, None, False), ("e", "B")))
    seq = ("A",) * 5_000 + ("B",)
    assert preference_key(node, seq) == (0,) * 5_000 + (1,)
    reluctant = ("s", (("k", ("e", "A"), 1, None, True), ("e", "B")))
    assert preference_key(reluctant, seq) == (1,) * 5_000 + (0,)


def test_a_nested_shape_too_deep_to_parse_is_a_clear_error() -> None:
    node = ("s", (("k", ("s", (("e", "A"),)), 1, None, False), ("e", "B")))
    with pytest.raises(EngineError, match=r"cannot rank a match of 5,001 rows"):
        preference_key(node, ("A",) * 5_000 + ("B",))
