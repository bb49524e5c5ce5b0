"""Semantic analysis: name resolution and validation rules -> :class:`AnalyzedQuery`."""

from .analyzed import AnalyzedQuery, VarInfo, VarKind

__all__ = ["AnalyzedQuery", "VarInfo", "VarKind"]
