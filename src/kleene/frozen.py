"""``dataclass`` as the standard library's, built without compiling five methods per class.

Why: ``kleene run`` builds about a hundred dataclasses at start-up (the AST, plans, options;
most ``frozen=True, slots=True``). The standard library writes six methods per class as
source text and compiles each (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
``__setattr__``, ``__delattr__``): about half of kleene's start-up over its import floor
(docs/benchmarks.md, "Reading and start-up"). Here the standard library collects the fields
and makes the (slotted) class, with nothing compiled; ``__init__`` is the one method compiled,
and the others are shared functions over the class's field names. The classes are real
dataclasses (``dataclasses.fields``, ``replace``, ``asdict``, ``is_dataclass`` and pickling
work) and behave as the standard library's: the same ``__init__`` signature, defaults,
``default_factory``, ``InitVar`` and ``__post_init__``, ``repr``, equality, hash and
``FrozenInstanceError`` (tests/test_frozen.py compares them, option by option).

The fast path takes the options ``frozen``, ``slots`` and ``kw_only``. Any other option, a
class without a docstring (the standard library writes its signature into ``__doc__``), a
class with a dataclass base or one that defines a method the decorator would write go to the
standard library unchanged. For type checkers this *is* ``dataclasses.dataclass``.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from .codegen import build

if TYPE_CHECKING:
    from dataclasses import dataclass as dataclass
else:

    def dataclass(cls: Any = None, /, **options: Any) -> Any:
        """``dataclasses.dataclass``; only ``frozen``, ``slots`` and ``kw_only`` take the
        fast path."""
        if not options.keys() <= _FAST or not all(type(v) is bool for v in options.values()):
            return dataclasses.dataclass(cls, **options)

        def wrap(c: type) -> type:
            return _build(c, **options)
        return wrap if cls is None else wrap(cls)


__all__ = ["dataclass"]

_FAST = {"frozen", "slots", "kw_only"}
_FACTORY = getattr(dataclasses, "_HAS_DEFAULT_FACTORY", dataclasses.MISSING)  # shows <factory>
_PARAMS: dict[tuple[bool, bool, bool], Any] = {}  # the standard library's __dataclass_params__
_OWN = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__",
        "__getstate__", "__setstate__")


def _build(cls: type, *, frozen: bool = False, slots: bool = False,
           kw_only: bool = False) -> type:
    own = cls.__dict__
    if (not own.get("__doc__") or any(hasattr(b, "__dataclass_fields__") for b in cls.__mro__)
            or any(n in own for n in _OWN)):
        return dataclasses.dataclass(cls, frozen=frozen, slots=slots, kw_only=kw_only)
    # fields, __match_args__ and the slotted class, with nothing compiled
    new: Any = dataclasses.dataclass(cls, init=False, repr=False, eq=False, slots=slots,
                                     kw_only=kw_only)
    key = (frozen, slots, kw_only)
    if key not in _PARAMS:
        probe = type("_Probe", (), {"__doc__": "-", "__module__": __name__})
        made: Any = dataclasses.dataclass(probe, frozen=frozen, slots=slots, kw_only=kw_only)
        _PARAMS[key] = made.__dataclass_params__
    new.__dataclass_params__ = _PARAMS[key]
    fields = [f for f in new.__dataclass_fields__.values()
              if f._field_type is dataclasses._FIELD]  # type: ignore[attr-defined]
    names = tuple(f.name for f in fields)
    _method(new, "__init__", _init(new, list(new.__dataclass_fields__.values()), frozen))
    _method(new, "__repr__", _repr(tuple(f.name for f in fields if f.repr)))
    _method(new, "__eq__", _eq(tuple(f.name for f in fields if f.compare)))
    if not frozen:
        new.__hash__ = None  # eq without frozen: unhashable, as the standard library makes it
        return new  # type: ignore[no-any-return]
    _method(new, "__hash__", _hash(tuple(f.name for f in fields
                                         if (f.compare if f.hash is None else f.hash))))
    _method(new, "__setattr__", _setattr(new, frozenset(names)))
    _method(new, "__delattr__", _delattr(new, frozenset(names)))
    if slots:
        _method(new, "__getstate__", _getstate(names))
        _method(new, "__setstate__", _setstate(names))
    return new  # type: ignore[no-any-return]


def _method(cls: type, name: str, fn: Callable[..., Any]) -> None:
    fn.__name__ = name
    fn.__qualname__ = f"{cls.__qualname__}.{name}"
    fn.__module__ = cls.__module__
    setattr(cls, name, fn)


def _init(cls: type, fields: list[dataclasses.Field[Any]],
          frozen: bool) -> Callable[..., None]:
    """``__init__``: the standard library's parameters, order and assignment."""
    ns: dict[str, Any] = {"__set": object.__setattr__, "__FACTORY": _FACTORY}
    args: list[str] = []
    kw: list[str] = []
    body: list[str] = []
    annotations: dict[str, Any] = {}
    for i, f in enumerate(fields):
        initvar = f._field_type is dataclasses._FIELD_INITVAR  # type: ignore[attr-defined]
        if f._field_type is dataclasses._FIELD_CLASSVAR:  # type: ignore[attr-defined]
            continue
        if f.init:
            annotations[f.name] = f.type
            if f.default is not dataclasses.MISSING:
                ns[f"__d{i}"] = f.default
                param = f"{f.name}=__d{i}"
            elif f.default_factory is not dataclasses.MISSING:
                param = f"{f.name}=__FACTORY"
            else:
                param = f.name
            (kw if f.kw_only else args).append(param)
        if initvar:
            continue
        if f.default_factory is not dataclasses.MISSING:
            ns[f"__f{i}"] = f.default_factory
            value = (f"__f{i}() if {f.name} is __FACTORY else {f.name}" if f.init
                     else f"__f{i}()")
        elif f.init:
            value = f.name
        elif f.default is not dataclasses.MISSING:
            ns[f"__d{i}"] = f.default
            value = f"__d{i}"
        else:
            continue
        body.append(f"  __set(self, {f.name!r}, {value})" if frozen
                    else f"  self.{f.name} = {value}")
    if hasattr(cls, "__post_init__"):
        initvars = [f.name for f in fields
                    if f._field_type is dataclasses._FIELD_INITVAR]  # type: ignore[attr-defined]
        body.append(f"  self.__post_init__({', '.join(initvars)})")
    params = ", ".join(["self", *args, *(["*", *kw] if kw else [])])
    src = f"def __init__({params}):\n" + ("\n".join(body) or "  pass") + "\n"
    # through kleene's one audited exec: the source holds field names from kleene's own
    # class bodies and the names of constants (defaults and factories), nothing else
    fn: Callable[..., None] = build(src, ns, label="dataclass __init__", entry="__init__")
    fn.__annotations__ = {**annotations, "return": None}
    return fn


def _repr(names: tuple[str, ...]) -> Callable[[Any], str]:
    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in names)
        return f"{self.__class__.__qualname__}({inner})"
    return __repr__


def _values(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The field values as a tuple (as the standard library compares and hashes them)."""
    if not names:
        return lambda self: ()
    if len(names) == 1:
        get = attrgetter(names[0])
        return lambda self: (get(self),)
    return attrgetter(*names)


def _eq(names: tuple[str, ...]) -> Callable[[Any, Any], Any]:
    values = _values(names)

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented
    return __eq__


def _hash(names: tuple[str, ...]) -> Callable[[Any], int]:
    values = _values(names)

    def __hash__(self: Any) -> int:
        return hash(values(self))
    return __hash__


def _setattr(cls: Any, names: frozenset[str]) -> Callable[[Any, str, Any], None]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)
    return __setattr__


def _delattr(cls: Any, names: frozenset[str]) -> Callable[[Any, str], None]:
    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)
    return __delattr__


def _getstate(names: tuple[str, ...]) -> Callable[[Any], list[Any]]:
    def __getstate__(self: Any) -> list[Any]:
        return [getattr(self, n) for n in names]
    return __getstate__


def _setstate(names: tuple[str, ...]) -> Callable[[Any, list[Any]], None]:
    def __setstate__(self: Any, state: list[Any]) -> None:
        for n, v in zip(names, state, strict=True):
            object.__setattr__(self, n, v)
    return __setstate__
