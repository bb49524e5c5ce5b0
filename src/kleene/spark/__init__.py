"""kleene on Spark: batch and streaming CEP over Spark DataFrames (``pip install "kleene[spark]"``).

This package is the only place kleene imports pyspark, and it does so lazily: ``import
kleene.spark`` works without PySpark; calling into it without PySpark raises
:class:`kleene.errors.MissingExtraError` with the install command.

Example:
    >>> from kleene import spark as ks                                    # doctest: +SKIP
    >>> session = ks.get_session()                                        # doctest: +SKIP
    >>> matches = ks.match(df, "PATTERN SEQ(A a, B b) WITHIN 10 seconds",
    ...                    time_col="ts", type_col="type")                # doctest: +SKIP
    >>> print(ks.explain("PATTERN SEQ(A a, B b) WITHIN 10 seconds"))      # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .plan import SparkPlan, explain_plan, plan_query


def explain(query: Any, *, udfs: Mapping[str, Callable[..., Any]] | None = None) -> str:
    """How ``query`` runs on Spark: keyed, split along time, or in one task, and why.

    Pure: needs no SparkSession (``kleene explain --spark`` calls it).
    """
    from .batch import analyzed_of

    return explain_plan(analyzed_of(query, udfs=udfs))


def match(df: Any, query: Any, **options: Any) -> Any:
    """Batch matching over a DataFrame; see :func:`kleene.spark.batch.match`. A query set (a
    :class:`kleene.QuerySet`, a list or a mapping of queries) runs in one job; see
    :func:`kleene.spark.batch.match_set`."""
    from collections.abc import Mapping as _Mapping

    from ..queryset import QuerySet

    if isinstance(query, QuerySet | list | tuple | _Mapping):
        from .batch import match_set

        return match_set(df, query, **options)
    from .batch import match as _match

    return _match(df, query, **options)


def in_output_order(matches: Any) -> Any:
    """Sort matches into kleene's documented order; see :func:`kleene.spark.batch.in_output_order`."""
    from .batch import in_output_order as _order

    return _order(matches)


def match_stream(df: Any, query: Any, **options: Any) -> Any:
    """Streaming matching (Structured Streaming, event time); see :mod:`kleene.spark.stream`.
    A query set (a :class:`kleene.QuerySet`, a list or a mapping of queries) runs in one
    streaming query; see :func:`kleene.spark.stream.match_stream_set`."""
    from collections.abc import Mapping as _Mapping

    from ..queryset import QuerySet

    if isinstance(query, QuerySet | list | tuple | _Mapping):
        from .stream import match_stream_set

        return match_stream_set(df, query, **options)
    from .stream import match_stream as _match_stream

    return _match_stream(df, query, **options)


def get_session(master: str | None = None, **options: Any) -> Any:
    """A SparkSession configured for kleene; see :func:`kleene.spark.session.get_session`."""
    from .session import get_session as _get

    return _get(master, **options)


def __getattr__(name: str) -> Any:
    if name == "CapReport":  # what on_cap="truncate" dropped; see kleene.spark.batch.CapReport
        from .batch import CapReport

        return CapReport
    raise AttributeError(f"module 'kleene.spark' has no attribute {name!r}")


__all__ = ["CapReport", "SparkPlan", "explain", "explain_plan", "get_session", "in_output_order", "match",
           "match_stream", "plan_query"]
