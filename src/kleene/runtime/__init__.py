"""The shared streaming runtime and the matchers of the evaluation algorithms.

:class:`~kleene.runtime.engine.Runtime` does what every algorithm shares (reorder, vectorize,
route, match, release; docs/architecture.md) and drives one
:class:`~kleene.runtime.matcher.Matcher` per compiled plan. Plans are chosen and compiled by
:mod:`kleene.plans` (``kleene.plans.start`` / ``evaluate`` are the entry points).

Layering: this package imports only ``kleene.plan``'s plan data, ``kleene.events``,
``kleene.vocab`` and ``kleene.errors`` -- never the AST, the language or the semantic analysis
(an import-linter contract in pyproject.toml).
"""

from .engine import Counters, Runtime, run_batch
from .matcher import Matcher, MatcherOptions, OutputSpec

__all__ = ["Counters", "Matcher", "MatcherOptions", "OutputSpec", "Runtime", "run_batch"]
