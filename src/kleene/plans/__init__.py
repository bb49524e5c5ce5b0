"""Evaluation algorithms ("plan kinds") behind one seam, and the chooser among them.

Each module here is one algorithm: it compiles a query to an immutable plan (or says why it
cannot), estimates its cost, explains it and builds the matcher the shared runtime drives
(kleene.runtime.matcher.Matcher). :mod:`kleene.plans.registry` lists them, one line each, and
picks the cheapest supported one for a query (docs/engine.md, "Plans and the chooser").
"""

from .registry import (
                       REGISTRY,
                       Choice,
                       CompiledPlan,
                       PlanKind,
                       Stats,
                       choose,
                       evaluate,
                       get_plan_kind,
                       plan_kinds,
                       plan_names,
                       start,
)

__all__ = ["REGISTRY", "Choice", "CompiledPlan", "PlanKind", "Stats", "choose", "evaluate",
           "get_plan_kind", "plan_kinds", "plan_names", "start"]
