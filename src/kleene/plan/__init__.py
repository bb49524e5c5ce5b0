"""Immutable compiled plans: the NFA^b automaton (linear SEQ plans and their per-branch union
for a top-level OR), the logical-block pushdown plan (AND / ANY / groups), predicate compilation
(vectorized masks and generated Python) and the plans' explain text.

Plan *data* lives in modules that import no AST or analysis (``layout``, ``predicate``,
``linear``, ``nodes``, ``blocks``): the runtime imports only those. The compilers
(``automaton``, ``groups``, ``expr``, ``vector``, ``patterns``) read the analyzed query. The
names below are loaded on first use, so importing a data module does not load the compilers.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Plan": "linear", "UnionPlan": "linear", "GroupPlan": "blocks",
    "compile_plan": "automaton", "compile_union_plan": "automaton",
    "compile_group_plan": "groups",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["GroupPlan", "Plan", "UnionPlan", "compile_group_plan", "compile_plan",
           "compile_union_plan"]
