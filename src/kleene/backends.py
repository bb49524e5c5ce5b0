"""The one place evaluation backends are registered.

A backend evaluates an analyzed query over a bounded, ordered :class:`EventBatch` and returns its
matches in the documented output order (docs/semantics.md). The CLI's ``--engine`` and the
conformance suite (tests/semantics) both read this registry, so a new engine joins every
conformance case by adding one line here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from .errors import QueryValidationError
from .events import EventBatch, Match
from .semantic.analyzed import AnalyzedQuery

BackendFn = Callable[[AnalyzedQuery, EventBatch], list[Match]]


@dataclass(frozen=True, slots=True)
class Backend:
    """A registered backend: ``target`` is ``"module:function"``, imported lazily."""

    name: str
    target: str
    description: str
    needs_spark: bool = False

    def load(self) -> BackendFn:
        """Import and return the evaluation function."""
        module, _, func = self.target.partition(":")
        fn: BackendFn = getattr(importlib.import_module(module), func)
        return fn


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend("oracle", "kleene.testing.oracle:evaluate",
                "brute-force reference implementation of docs/semantics.md (tiny inputs only)"),
        Backend("automaton", "kleene.runtime.engine:evaluate",
                "the streaming NFA^b engine with a shared match buffer (default)"),
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


__all__ = ["BACKENDS", "DEFAULT_BACKEND", "Backend", "BackendFn", "get_backend"]
