"""``analyze``: a parsed query -> a validated :class:`AnalyzedQuery` with defaults filled in.

Pure function over the AST: resolve variables (in pattern order), run the validation rules
(:data:`kleene.semantic.rules.RULES`), fill defaults (skip-till-any-match, EMIT ALL), split
WHERE into conjuncts and move ``[attr]`` tests into ``equivalence``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .. import ast
from ..errors import QueryValidationError
from ..lang.functions import BUILTINS
from ..lang.lexer import is_identifier
from .analyzed import AnalyzedQuery, VarInfo, VarKind
from .rules import RULES, Context
from .walk import Binding, bindings, split_and

DEFAULT_STRATEGY = ast.Strategy.SKIP_TILL_ANY_MATCH
DEFAULT_EMIT = ast.Emit.ALL


def _variables(binds: list[Binding]) -> dict[str, VarInfo]:
    out: dict[str, VarInfo] = {}
    for b in binds:
        if b.event.var in out:
            continue  # reported by the bound-once rule
        kind = VarKind.NEGATED if b.negated else VarKind.LIST if b.repeated else VarKind.SINGLE
        out[b.event.var] = VarInfo(name=b.event.var, type=b.event.type, kind=kind,
                                   order=len(out), in_or_branch=b.optional_branch)
    return out


def _check_udfs(udfs: Mapping[str, Callable[..., Any]]) -> None:
    for name, fn in udfs.items():
        if not isinstance(name, str) or not is_identifier(name):
            raise QueryValidationError(
                f"UDF name {name!r} must be an identifier (letters, digits, '_')")
        if name.lower() in BUILTINS:
            raise QueryValidationError(
                f"UDF name '{name}' clashes with the built-in function '{name.lower()}'; "
                "register it under another name")
        if not callable(fn):
            raise QueryValidationError(f"UDF '{name}' is not callable ({type(fn).__name__})")


def analyze(query: ast.Query, *, udfs: Mapping[str, Callable[..., Any]] | None = None,
            default_name: str | None = None,
            schema: Mapping[str, Mapping[str, Any]] | None = None) -> AnalyzedQuery:
    """Validate ``query`` and resolve what every backend needs.

    ``udfs`` maps function names to Python callables (the only way a query calls Python);
    ``default_name`` names the query when it has no NAME clause (else ``"query"``); ``schema``
    (event type -> attribute -> kind) enables attribute and type checks.

    Example:
        >>> from kleene.lang import parse
        >>> aq = analyze(parse("PATTERN SEQ(A a, B+ b[]) WHERE [id] AND b[i].x > a.x"))
        >>> [(v.name, v.kind.value) for v in aq.variables.values()], aq.equivalence
        ([('a', 'single'), ('b', 'list')], ('id',))
    """
    if not isinstance(query, ast.Query):
        raise TypeError(f"analyze() needs an ast.Query, not {type(query).__name__}")
    udfs = dict(udfs or {})
    _check_udfs(udfs)
    binds = bindings(query.pattern)
    variables = _variables(binds)
    ctx = Context(query, tuple(binds), variables, udfs, schema)
    for rule in RULES:
        rule(ctx)
    conjuncts: list[ast.Expr] = []
    equivalence: list[str] = []
    for c in split_and(query.where):
        if isinstance(c, ast.Equivalence):
            equivalence.extend(a for a in c.attrs if a not in equivalence)
        else:
            conjuncts.append(c)
    return AnalyzedQuery(
        query=query,
        name=query.name or default_name or "query",
        variables=variables,
        strategy=query.strategy or DEFAULT_STRATEGY,
        emit=query.emit or DEFAULT_EMIT,
        conjuncts=tuple(conjuncts),
        equivalence=tuple(equivalence),
        udfs=udfs,
    )


__all__ = ["DEFAULT_EMIT", "DEFAULT_STRATEGY", "analyze"]
