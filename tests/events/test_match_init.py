"""``Match.__init__`` is hand-written for speed (events/match.py): it must take exactly the
dataclass's fields, in order, set each of them, and leave the instance frozen."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from kleene.events.match import Match


def test_init_takes_every_field_in_order() -> None:
    params = list(inspect.signature(Match.__init__).parameters)[1:]
    assert params == [f.name for f in dataclasses.fields(Match)]


def test_init_sets_every_field_and_the_instance_stays_frozen() -> None:
    m = Match("q", {"a": 1, "b": (2, 3)}, 10, 20, {"x": 1.5})
    assert (m.query, dict(m.bindings), m.start, m.end, dict(m.values)) == (
        "q", {"a": 1, "b": (2, 3)}, 10, 20, {"x": 1.5})
    assert Match("q", {}, 1, 2).values == {}
    assert Match("q", {}, 1, 2).values is not Match("q", {}, 1, 2).values
    assert m == Match("q", {"a": 1, "b": (2, 3)}, 10, 20, {"x": 1.5})
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.start = 3  # type: ignore[misc]
