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

Whether a function releases the GIL while it works (OpenCV, numpy on large arrays, I/O,
``time.sleep``) or holds it (pure Python) decides how the task engine (``--plan tasks``) runs
it on several cores: ``@kleene.udf(releases_gil=True)`` (threads) or ``releases_gil=False``
(forked processes); undeclared, the engine measures it on its first tasks (docs/engine.md).

    >>> @kleene.udf(releases_gil=True)
    ... def wait(x):
    ...     return x > 0
    >>> from kleene.udf import udf_releases_gil
    >>> udf_releases_gil(wait), udf_releases_gil(similar)
    (True, None)

On the command line, ``--udf module:function:pure`` registers a function as pure (a function
decorated in its module is pure already); the run summary then counts calls and hits.

A *vectorized* function (``@kleene.udf(vectorized=True)``, ``--udf module:function:vectorized``)
takes pyarrow arrays, one per argument, and returns one value per row (a pyarrow array, a numpy
array or a list of the same length). It must be elementwise: row i of the result depends only
on row i of the arguments. In a condition over one variable (``score(a.img) > 0.5``) the engine
calls it once per batch with the rows of that variable's event type that passed the conjuncts
before it (its vectorize step, docs/engine.md), so an image or model function runs on arrays, not
row by row. Anywhere else (a condition relating two variables, RETURN, the oracle) it is called
with one-row arrays, so every result is the same as the function's row-by-row meaning.

    >>> import pyarrow.compute as pc
    >>> @kleene.udf(vectorized=True)
    ... def big(x):
    ...     return pc.greater(x, 1)
    >>> q = kleene.compile("PATTERN SEQ(A a, B b) WHERE big(b.x)", udfs={"big": big})
    >>> len(q.run(ev)), big.calls, big.rows
    (4, 1, 2)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    import pyarrow as pa

DEFAULT_CACHE_SIZE = 65_536
"""Distinct argument tuples a pure UDF remembers (least recently used out first)."""

_MISS = object()


class PureUdf:
    """A pure function with a bounded memo (LRU) and counters; called like the function."""

    def __init__(self, fn: Callable[..., Any], maxsize: int = DEFAULT_CACHE_SIZE,
                 releases_gil: bool | None = None) -> None:
        if maxsize < 1:
            raise ValueError(f"udf cache size must be at least 1, not {maxsize}")
        self.fn = fn
        self.releases_gil = releases_gil
        """Declared: the function releases the GIL (True), holds it (False), unknown (None)."""
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

    @contextmanager
    def unmemoized(self) -> Iterator[None]:
        """Every call runs the function (counted) and nothing is remembered: what the task
        engine times when it measures the function (kleene.plans.tasks)."""
        kept, self._cache = self._cache, _NoMemo()
        try:
            yield
        finally:
            self._cache = kept

    def __reduce__(self) -> tuple[Any, ...]:
        return (PureUdf, (self.fn, self.maxsize, self.releases_gil))


class _NoMemo(dict[Any, Any]):
    """A memo that remembers nothing."""

    def __setitem__(self, key: Any, value: Any) -> None:
        pass


class VectorizedUdf:
    """An elementwise function over pyarrow arrays (one per argument) returning one value per
    row; called like a scalar function, it runs on one-row arrays. Counts its calls and rows."""

    def __init__(self, fn: Callable[..., Any], releases_gil: bool | None = None) -> None:
        self.fn = fn
        self.releases_gil = releases_gil
        """Declared: the function releases the GIL (True), holds it (False), unknown (None)."""
        self.calls = 0
        """Times the function ran (once per batch in the vectorize step, once per row
        elsewhere)."""
        self.rows = 0
        """Rows it was given in all."""
        functools.update_wrapper(self, fn)

    def batch(self, n: int, *arrays: pa.Array) -> pa.Array:
        """The function over ``n`` rows: an array of ``n`` values. A result of another length
        (or that is not array-like) is a ``ValueError`` naming the function."""
        import pyarrow as pa  # (here: ``import kleene`` imports no pyarrow, see kleene/__init__)

        out = self.fn(*arrays)
        self.calls += 1
        self.rows += n
        if isinstance(out, pa.ChunkedArray):
            out = out.combine_chunks()
        elif not isinstance(out, pa.Array):
            try:
                out = pa.array(out)
            except (pa.ArrowException, TypeError, ValueError) as e:
                raise ValueError(f"vectorized udf {self.__name__!r} returned "
                                 f"{type(out).__name__}, not an array ({e})") from None
        if len(out) != n:
            raise ValueError(f"vectorized udf {self.__name__!r} returned {len(out)} values "
                             f"for {n} rows (it must be elementwise)")
        return out

    def __call__(self, *args: Any) -> Any:
        import pyarrow as pa

        return self.batch(1, *(pa.array([a]) for a in args))[0].as_py()

    def clear(self) -> None:
        """Reset the counters."""
        self.calls = self.rows = 0

    def __reduce__(self) -> tuple[Any, ...]:
        return (VectorizedUdf, (self.fn, self.releases_gil))

    __name__: str


@overload
def udf(fn: Callable[..., Any], *, pure: bool = ..., cache_size: int = ...,
        vectorized: bool = ..., releases_gil: bool | None = ...) -> Any: ...


@overload
def udf(fn: None = ..., *, pure: bool = ..., cache_size: int = ..., vectorized: bool = ...,
        releases_gil: bool | None = ...) -> Callable[[Callable[..., Any]], Any]: ...


def udf(fn: Callable[..., Any] | None = None, *, pure: bool = False,
        cache_size: int = DEFAULT_CACHE_SIZE, vectorized: bool = False,
        releases_gil: bool | None = None) -> Any:
    """Declare a user function: ``@kleene.udf(pure=True)`` (or ``kleene.udf(f, pure=True)``)
    returns a memoizing :class:`PureUdf`; ``vectorized=True`` a :class:`VectorizedUdf` (over
    arrays); with neither the function is returned as is. ``pure`` and ``vectorized`` do not
    combine (a vectorized call sees a whole batch: there is nothing per tuple to remember).
    ``releases_gil``: True if the function releases the GIL while it works (OpenCV, numpy, I/O:
    the task engine then runs it in threads), False if it holds it (pure Python: forked
    processes); None (default) lets the task engine measure it (:func:`udf_releases_gil`). A
    plain function so declared gets the attribute ``releases_gil`` (or, when it cannot take
    attributes, a thin wrapper that has it)."""
    if pure and vectorized:
        raise ValueError("kleene.udf: pure=True and vectorized=True do not combine")
    if releases_gil is not None and not isinstance(releases_gil, bool):
        raise TypeError(f"kleene.udf: releases_gil is True, False or None, not {releases_gil!r}")

    def wrap(f: Callable[..., Any]) -> Any:
        if not callable(f):
            raise TypeError(f"kleene.udf needs a callable, not {type(f).__name__}")
        if vectorized:
            out: Any = f if isinstance(f, VectorizedUdf) else VectorizedUdf(f)
        elif pure:
            out = f if isinstance(f, PureUdf) else PureUdf(f, cache_size)
        else:
            out = f
        if releases_gil is None:
            return out
        if isinstance(out, PureUdf | VectorizedUdf):
            out.releases_gil = releases_gil
            return out
        inner = out  # a thin wrapper that says it (the user's function is left as it is)

        @functools.wraps(inner)
        def declared(*args: Any) -> Any:
            return inner(*args)
        declared.releases_gil = releases_gil  # type: ignore[attr-defined]
        return declared
    return wrap if fn is None else wrap(fn)


def udf_releases_gil(f: Any) -> bool | None:
    """What ``f`` declares (:func:`udf` ``releases_gil=``): True (it releases the GIL), False
    (it holds it) or None (not declared)."""
    v = getattr(f, "releases_gil", None)
    if v is None and isinstance(f, PureUdf | VectorizedUdf):
        v = getattr(f.fn, "releases_gil", None)
    return v if isinstance(v, bool) else None


def pure_udfs(udfs: Mapping[str, Any]) -> dict[str, PureUdf]:
    """The memoizing UDFs among ``udfs`` (name -> PureUdf)."""
    return {k: v for k, v in udfs.items() if isinstance(v, PureUdf)}


def vectorized_udfs(udfs: Mapping[str, Any]) -> dict[str, VectorizedUdf]:
    """The vectorized UDFs among ``udfs`` (name -> VectorizedUdf)."""
    return {k: v for k, v in udfs.items() if isinstance(v, VectorizedUdf)}


__all__ = ["DEFAULT_CACHE_SIZE", "PureUdf", "VectorizedUdf", "pure_udfs", "udf",
           "udf_releases_gil", "vectorized_udfs"]
