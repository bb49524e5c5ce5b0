"""The one place evaluation backends are registered.

A backend evaluates an analyzed query over a bounded, ordered :class:`EventBatch` and returns its
matches in the documented output order (docs/semantics.md). The CLI's ``--engine`` and the
conformance suite (tests/semantics) both read this registry, so a new engine joins every
conformance case by adding one line here.

A backend whose every call is expensive (a Spark job) may also declare ``batch``: a
``"module:function"`` that evaluates many ``(query, events)`` pairs at once (one Spark job for
all of them) and returns, per pair, its matches or the error that pair raised. The conformance
suite uses it to evaluate every case it is about to run in one go, then serves the cases from
that result (kleene.testing.timeline.BatchedBackend); the one-pair function stays the reference.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import QueryValidationError
from .events import EventBatch, Match
from .semantic.analyzed import AnalyzedQuery

BackendFn = Callable[[AnalyzedQuery, EventBatch], list[Match]]
BatchFn = Callable[[Sequence[tuple[AnalyzedQuery, EventBatch]]], list["list[Match] | Exception"]]
"""Evaluates many pairs at once: per pair (same order), its matches or the error it raised."""


@dataclass(frozen=True, slots=True)
class Backend:
    """A registered backend: ``target`` (and ``batch``) are ``"module:function"``, imported
    lazily."""

    name: str
    target: str
    description: str
    needs_spark: bool = False
    batch: str | None = None
    """Optional: evaluates many (query, events) pairs at once (:data:`BatchFn`)."""

    def load(self) -> BackendFn:
        """Import and return the evaluation function."""
        fn: BackendFn = _import(self.target)
        return fn

    def load_batch(self) -> BatchFn | None:
        """Import and return the many-pairs function, if the backend declares one."""
        if self.batch is None:
            return None
        fn: BatchFn = _import(self.batch)
        return fn


def _import(target: str) -> Any:
    module, _, func = target.partition(":")
    return getattr(importlib.import_module(module), func)


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend("oracle", "kleene.testing.oracle:evaluate",
                "brute-force reference implementation of docs/semantics.md (tiny inputs only)"),
        Backend("automaton", "kleene.runtime.engine:evaluate",
                "the streaming NFA^b engine with a shared match buffer (default)"),
        Backend("spark", "kleene.spark.backend:evaluate",
                "kleene.spark.match: the batch Spark pipeline (keyed / split / single tasks)",
                needs_spark=True, batch="kleene.spark.backend:evaluate_many"),
        Backend("spark-stream", "kleene.spark.backend:evaluate_stream",
                "kleene.spark.match_stream over a bounded replay (Structured Streaming, "
                "event-time watermark, RocksDB state)",
                needs_spark=True, batch="kleene.spark.backend:evaluate_stream_many"),
    )
}

DEFAULT_BACKEND = "automaton"


def get_backend(name: str) -> BackendFn:
    """Look up a backend by name, with a helpful error for unknown names."""
    try:
        return BACKENDS[name].load()
    except KeyError:
        raise QueryValidationError(
            f"unknown engine {name!r}; available: {', '.join(sorted(BACKENDS))}") from None


__all__ = ["BACKENDS", "DEFAULT_BACKEND", "Backend", "BackendFn", "BatchFn", "get_backend"]
