"""User functions that cost (issue 15): ``@kleene.udf(pure=True)`` memoizes a function per
distinct argument tuple in a bounded cache, and counts real calls and cache hits.

A query calls a UDF once per candidate combination of events, so an expensive function (an
image or similarity model) sees the same arguments again and again: the thesis's application 2
made 24,878 similarity calls for 780 distinct pairs on 40 events. A *pure* function (same
arguments, same result, no side effect the query relies on) is called once per distinct
argument tuple while that tuple stays in the cache (least recently used out first).

Example:
    >>> import kleene
    >>> @kleene.udf(pure=True)
    ... def similar(x, y):
    ...     return abs(x - y) < 2
    >>> q = kleene.compile("PATTERN SEQ(A a, B b) WHERE similar(a.x, b.x)",
    ...                    udfs={"similar": similar})
    >>> ev = kleene.EventBatch.from_records(
    ...     [{"type": "A", "ts": 1, "x": 1}, {"type": "A", "ts": 2, "x": 1},
    ...      {"type": "B", "ts": 3, "x": 2}, {"type": "B", "ts": 4, "x": 2}])
    >>> len(q.run(ev)), similar.calls, similar.hits
    (4, 1, 3)

On the command line, ``--udf module:function:pure`` registers a function as pure (a function
decorated in its module is pure already); the run summary then counts calls and hits.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, overload

DEFAULT_CACHE_SIZE = 65_536
"""Distinct argument tuples a pure UDF remembers (least recently used out first)."""

_MISS = object()


class PureUdf:
    """A pure function with a bounded memo (LRU) and counters; called like the function."""

    def __init__(self, fn: Callable[..., Any], maxsize: int = DEFAULT_CACHE_SIZE) -> None:
        if maxsize < 1:
            raise ValueError(f"udf cache size must be at least 1, not {maxsize}")
        self.fn = fn
        self.maxsize = maxsize
        self.calls = 0
        """Times the function really ran."""
        self.hits = 0
        """Calls answered from the cache."""
        self._cache: dict[Any, Any] = {}
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any) -> Any:
        cache = self._cache
        try:
            hash(args)  # (an empty dict's pop would not hash the key)
        except TypeError:  # an unhashable argument (a list): no memo for this call
            self.calls += 1
            return self.fn(*args)
        got = cache.pop(args, _MISS)
        if got is not _MISS:
            self.hits += 1
            cache[args] = got  # most recently used again
            return got
        self.calls += 1
        value = self.fn(*args)
        if len(cache) >= self.maxsize:
            del cache[next(iter(cache))]
        cache[args] = value
        return value

    def clear(self) -> None:
        """Forget the memo and reset the counters."""
        self._cache.clear()
        self.calls = self.hits = 0

    def __reduce__(self) -> tuple[Any, ...]:
        return (PureUdf, (self.fn, self.maxsize))


@overload
def udf(fn: Callable[..., Any], *, pure: bool = ..., cache_size: int = ...) -> Any: ...


@overload
def udf(fn: None = ..., *, pure: bool = ..., cache_size: int = ...
        ) -> Callable[[Callable[..., Any]], Any]: ...


def udf(fn: Callable[..., Any] | None = None, *, pure: bool = False,
        cache_size: int = DEFAULT_CACHE_SIZE) -> Any:
    """Declare a user function: ``@kleene.udf(pure=True)`` (or ``kleene.udf(f, pure=True)``)
    returns a memoizing :class:`PureUdf`; without ``pure`` the function is returned as is."""
    def wrap(f: Callable[..., Any]) -> Any:
        if not callable(f):
            raise TypeError(f"kleene.udf needs a callable, not {type(f).__name__}")
        if not pure:
            return f
        return f if isinstance(f, PureUdf) else PureUdf(f, cache_size)
    return wrap if fn is None else wrap(fn)


def pure_udfs(udfs: Mapping[str, Any]) -> dict[str, PureUdf]:
    """The memoizing UDFs among ``udfs`` (name -> PureUdf)."""
    return {k: v for k, v in udfs.items() if isinstance(v, PureUdf)}


__all__ = ["DEFAULT_CACHE_SIZE", "PureUdf", "pure_udfs", "udf"]
