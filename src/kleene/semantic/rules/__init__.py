"""Validation rules, one module per concern, each a pure ``check(ctx)`` that raises
:class:`~kleene.errors.QueryValidationError` with an actionable message.

:data:`RULES` lists them in the order :func:`kleene.semantic.analyze` runs them: names first
(so later rules can trust variables), then structure, then expressions.
"""

from __future__ import annotations

from collections.abc import Callable

from . import (
    after_match,
    composition,
    functions,
    kleene,
    names,
    negation,
    strategy,
    timeouts,
    types,
    windows,
)
from .context import Context

Rule = Callable[[Context], None]

RULES: tuple[Rule, ...] = (
    names.check_names,
    names.check_bound_once,
    windows.check_windows,
    kleene.check_quantifiers,
    composition.check_any,
    negation.check_negation,
    negation.check_not_only_optional,
    strategy.check_strategy,
    after_match.check_after_match,
    timeouts.check_timeouts,
    names.check_references,
    negation.check_negation_conditions,
    names.check_clause_variables,
    kleene.check_indexes,
    functions.check_functions,
    kleene.check_aggregates,
    kleene.check_running,
    composition.check_or_branches,
    types.check_types,
)

__all__ = ["RULES", "Context", "Rule"]
