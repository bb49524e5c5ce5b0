"""Semantic analysis: name and type resolution and validation rules -> :class:`AnalyzedQuery`."""

from .analyze import analyze
from .analyzed import AnalyzedQuery, VarInfo, VarKind

__all__ = ["AnalyzedQuery", "VarInfo", "VarKind", "analyze"]
