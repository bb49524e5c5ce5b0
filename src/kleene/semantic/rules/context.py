"""What every rule sees: the query, its variables and the registered functions."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import field
from typing import Any

from ... import ast
from ...frozen import dataclass
from ..analyzed import VarInfo
from ..walk import Binding, Reporter, split_and, sub_exprs


@dataclass(frozen=True, slots=True)
class Context:
    """Inputs of the validation rules (read-only)."""

    query: ast.Query
    bindings: tuple[Binding, ...]
    variables: Mapping[str, VarInfo]
    udfs: Mapping[str, Callable[..., Any]]
    schema: Mapping[str, Mapping[str, Any]] | None
    reporter: Reporter = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "reporter", Reporter(self.query))

    def conjuncts(self) -> list[ast.Expr]:
        """Top-level WHERE conjuncts."""
        return split_and(self.query.where)

    def all_exprs(self) -> Iterator[ast.Expr]:
        """Every expression node in WHERE and RETURN."""
        if self.query.where is not None:
            yield from sub_exprs(self.query.where)
        for r in self.query.returns:
            yield from sub_exprs(r.expr)

    def var_list(self) -> str:
        """``a, b, c`` (for messages)."""
        return ", ".join(self.variables) or "(none)"


__all__ = ["Context"]
