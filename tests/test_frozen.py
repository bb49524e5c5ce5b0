"""kleene.frozen.dataclass builds frozen, slotted classes that behave as the standard library's.

Each case defines the same class body twice, once with ``dataclasses.dataclass`` and once with
``kleene.frozen.dataclass``, and compares what a user of the class can see.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import math
import pickle
from typing import Any, ClassVar

import pytest

from kleene import frozen

OPTIONS = [{"frozen": True, "slots": True}, {"frozen": True}, {"slots": True}, {"plain": True},
           {"frozen": True, "slots": True, "kw_only": True}]


def _both(body: Any, **options: bool) -> tuple[Any, Any]:
    """The class made by ``body(decorator)`` with the standard library's and with ours
    (``frozen=True, slots=True`` unless ``plain=True`` or other options are given)."""
    if not options:
        options = {"frozen": True, "slots": True}
    options.pop("plain", None)
    std = body(dataclasses.dataclass(**options))
    ours = body(frozen.dataclass(**options))
    return std, ours


def _point(deco: Any) -> Any:
    @deco
    class Point:
        """A point."""

        x: int
        y: float = 1.5
        tags: tuple[str, ...] = dataclasses.field(default_factory=tuple)
        memo: dict[str, int] = dataclasses.field(default_factory=dict, compare=False,
                                                 repr=False)
        kind: ClassVar[str] = "point"

        def norm(self) -> float:
            return math.hypot(self.x, self.y)
    return Point


def _empty(deco: Any) -> Any:
    @deco
    class Empty:
        """No fields."""
    return Empty


def _one(deco: Any) -> Any:
    @deco
    class One:
        """One field, compared as a tuple of one."""

        v: float
    return One


def _kw(deco: Any) -> Any:
    @deco
    class Kw:
        """Keyword-only fields after the marker, and a field not in __init__."""

        a: int
        _: dataclasses.KW_ONLY
        b: int = 2
        c: list[int] = dataclasses.field(default_factory=list, hash=False)
        d: int = dataclasses.field(default=7, init=False)
    return Kw


def _post(deco: Any) -> Any:
    @deco
    class Post:
        """__post_init__ sees an InitVar and checks a field."""

        a: int
        scale: dataclasses.InitVar[int] = 1

        def __post_init__(self, scale: int) -> None:
            if self.a < 0:
                raise ValueError("a must be >= 0")
            object.__setattr__(self, "a", self.a * scale)
    return Post


StdPoint, OurPoint = _both(_point)  # at module level, for pickle
StdPoint.__qualname__, OurPoint.__qualname__ = "StdPoint", "OurPoint"


def test_the_fast_path_is_taken() -> None:
    """Our class has no compiled __repr__ (a shared function), and is a dataclass."""
    _std, ours = _both(_point)
    assert ours.__repr__.__code__ is _both(_one)[1].__repr__.__code__
    assert dataclasses.is_dataclass(ours)
    assert ours.__dataclass_params__.frozen


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("body", [_point, _empty, _one, _kw, _post])
def test_same_signature_fields_and_slots(body: Any, options: dict[str, bool]) -> None:
    std, ours = _both(body, **options)
    assert ours.__eq__.__code__.co_filename != "<string>"  # not compiled: the fast path
    assert repr(ours.__dataclass_params__) == repr(std.__dataclass_params__)
    assert str(inspect.signature(ours)) == str(inspect.signature(std))
    assert [(f.name, f.init, f.repr, f.compare, f.hash, f.kw_only)
            for f in dataclasses.fields(ours)] == [
        (f.name, f.init, f.repr, f.compare, f.hash, f.kw_only) for f in dataclasses.fields(std)]
    assert getattr(ours, "__slots__", None) == getattr(std, "__slots__", None)
    assert ours.__hash__ is None if std.__hash__ is None else ours.__hash__ is not None
    assert ours.__match_args__ == std.__match_args__
    assert ours.__init__.__annotations__ == std.__init__.__annotations__
    assert ours.__init__.__qualname__ == std.__init__.__qualname__.replace(
        std.__qualname__, ours.__qualname__)
    assert ours.__doc__ == std.__doc__


def test_point_behaves_alike() -> None:
    std, ours = _both(_point)
    for cls in (std, ours):
        p = cls(3, 4.0, ("a",))
        assert p.norm() == 5.0
        assert p.memo == {} and cls(1).memo is not cls(1).memo
        assert cls(3, 4.0, ("a",), {"k": 1}) == p  # memo is not compared
        assert cls(3, 4.5) != p and p != (3, 4.0) and p != object()
        assert {p: 1}[cls(3, 4.0, ("a",))] == 1
        assert dataclasses.replace(p, x=6).norm() == math.hypot(6, 4.0)
        assert dataclasses.asdict(p) == {"x": 3, "y": 4.0, "tags": ("a",), "memo": {}}
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'x'"):
            p.x = 1
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'y'"):
            del p.y
        with pytest.raises(AttributeError):
            p.__dict__  # noqa: B018 (slotted: no __dict__)
        with pytest.raises(TypeError):
            cls()
        with pytest.raises(TypeError):
            cls(1, 2, (), {}, 5)
        assert copy.deepcopy(p) == p and copy.copy(p) == p
    assert repr(ours(3, 4.0)).replace(ours.__qualname__, "C") == repr(std(3, 4.0)).replace(
        std.__qualname__, "C")
    assert hash(ours(3, 4.0, ("a",))) == hash(std(3, 4.0, ("a",)))


def test_pickle() -> None:
    for cls in (StdPoint, OurPoint):
        p = cls(3, 4.0, ("a",), {"k": 1})
        q = pickle.loads(pickle.dumps(p))
        assert q == p and q.memo == {"k": 1} and type(q) is cls


def test_nan_compares_as_the_standard_library_does() -> None:
    """Tuples compare items by identity first: the same NaN object is equal to itself."""
    nan = float("nan")
    std, ours = _both(_one)
    assert (ours(nan) == ours(nan)) == (std(nan) == std(nan))
    assert (ours(nan) == ours(float("nan"))) == (std(nan) == std(float("nan")))
    assert hash(ours(2.5)) == hash(std(2.5))
    e_std, e_ours = _both(_empty)
    assert e_ours() == e_ours() and hash(e_ours()) == hash(e_std())
    assert repr(e_ours()).endswith("Empty()")


def test_mutable_and_unslotted() -> None:
    for options in ({"slots": True}, {"plain": True}):
        std, ours = _both(_point, **options)
        for cls in (std, ours):
            p = cls(3, 4.0)
            p.x = 6
            assert p.norm() == math.hypot(6, 4.0) and p == cls(6, 4.0)
            with pytest.raises(TypeError, match="unhashable"):
                hash(p)
            assert hasattr(p, "__dict__") == ("slots" not in options)
    std, ours = _both(_point, frozen=True)
    for cls in (std, ours):
        p = cls(3, 4.0)
        with pytest.raises(dataclasses.FrozenInstanceError):
            p.x = 1
        with pytest.raises(dataclasses.FrozenInstanceError):
            p.other = 1
        assert hash(p) == hash(cls(3, 4.0)) and copy.deepcopy(p) == p


def test_keyword_only_and_init_false() -> None:
    std, ours = _both(_kw)
    for cls in (std, ours):
        k = cls(1, b=3)
        assert (k.a, k.b, k.c, k.d) == (1, 3, [], 7)
        with pytest.raises(TypeError):
            cls(1, 3)
        assert hash(cls(1, c=[1])) == hash(cls(1, c=[2]))  # c is not hashed
        assert cls(1, c=[1]) != cls(1, c=[2])  # but compared
    assert repr(ours(1)).split("(", 1)[1] == repr(std(1)).split("(", 1)[1]


def test_post_init_and_initvar() -> None:
    std, ours = _both(_post)
    for cls in (std, ours):
        assert cls(2, 3).a == 6 and cls(2).a == 2
        with pytest.raises(ValueError, match="a must be >= 0"):
            cls(-1)
        assert [f.name for f in dataclasses.fields(cls)] == ["a"]


def test_other_options_go_to_the_standard_library() -> None:
    @frozen.dataclass(frozen=True, slots=True)
    class Undocumented:
        a: int

    @frozen.dataclass(slots=True, order=True)
    class Mutable:
        """Ordered: an option the fast path leaves to the standard library."""

        a: int

    @frozen.dataclass(frozen=True, slots=True)
    class Child(_point(dataclasses.dataclass(frozen=True, slots=True))):  # type: ignore[misc]
        """A dataclass base."""

        z: int = 0

    assert Undocumented.__doc__ == "Undocumented(a: 'int')"  # the standard library's
    m = Mutable(1)
    m.a = 2
    assert m.a == 2 and Mutable(1) < m
    assert Mutable.__eq__.__code__.co_filename == "<string>"  # the standard library's
    assert Child(1, z=2).z == 2 and Child(1).norm() == math.hypot(1, 1.5)
