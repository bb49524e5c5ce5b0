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
from typing import Any

from .errors import QueryValidationError
from .events import EventBatch, Match
from .frozen import dataclass
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
    streaming: bool = False
    """Has a streaming runtime (``start``: push / advance / close)."""
    options: bool = False
    """Takes the runtime options: caps, ``on_cap``, lateness, ``count_only``."""
    snapshots: bool = False
    """Its streaming runtime can snapshot and restore."""
    plans: bool = False
    """Evaluates through the plan registry (``plan=`` chooses an algorithm; kleene.plans)."""
    start: str | None = None
    """``"module:function"`` starting a streaming runtime, when ``streaming``."""
    embedded: bool = True
    """Runs in this process on a bounded batch (the CLI's ``--engine``)."""

    def load(self) -> BackendFn:
        """Import and return the evaluation function."""
        fn: BackendFn = _import(self.target)
        return fn

    def load_start(self) -> Callable[..., Any]:
        """Import and return the streaming start function (``streaming`` backends)."""
        if self.start is None:
            raise QueryValidationError(f"engine {self.name!r} has no streaming runtime")
        fn: Callable[..., Any] = _import(self.start)
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
        Backend("automaton", "kleene.plans.registry:evaluate",
                "the streaming engine: the plan registry's cheapest plan (NFA^b, pushdown "
                "blocks, ...) under one runtime (default)",
                streaming=True, options=True, snapshots=True, plans=True,
                start="kleene.plans.registry:start"),
        Backend("spark", "kleene.spark.backend:evaluate",
                "kleene.spark.match: the batch Spark pipeline (keyed / split / single tasks)",
                needs_spark=True, batch="kleene.spark.backend:evaluate_many", embedded=False),
        Backend("spark-stream", "kleene.spark.backend:evaluate_stream",
                "kleene.spark.match_stream over a bounded replay (Structured Streaming, "
                "event-time watermark, RocksDB state)",
                needs_spark=True, batch="kleene.spark.backend:evaluate_stream_many",
                embedded=False),
    )
}

DEFAULT_BACKEND = "automaton"


def get_backend_entry(name: str) -> Backend:
    """A registered backend by name, with a helpful error for unknown names."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise QueryValidationError(
            f"unknown engine {name!r}; available: {', '.join(sorted(BACKENDS))}") from None


def get_backend(name: str) -> BackendFn:
    """Look up a backend's evaluation function by name."""
    return get_backend_entry(name).load()


__all__ = ["BACKENDS", "DEFAULT_BACKEND", "Backend", "BackendFn", "BatchFn", "get_backend",
           "get_backend_entry"]
