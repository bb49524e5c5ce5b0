"""Semantic analysis: name and type resolution and validation rules -> :class:`AnalyzedQuery`.

``analyze`` is imported lazily: the runtime (and Spark executors) import
:mod:`kleene.semantic.analyzed` for the data types only and must not pay for, or depend on, the
language layer that the analyzer uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .analyzed import AnalyzedQuery, VarInfo, VarKind

if TYPE_CHECKING:
    from .analyzer import analyze


def __getattr__(name: str) -> Any:
    if name == "analyze":
        from .analyzer import analyze

        return analyze
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["AnalyzedQuery", "VarInfo", "VarKind", "analyze"]
