"""Evaluation engines. The streaming automaton engine lives in :mod:`kleene.runtime.engine`
(``evaluate`` for bounded input, ``start`` for push / advance / close streams).

Layering: this package imports only ``kleene.plan``, ``kleene.events``, ``kleene.errors``,
``kleene.ast`` and ``kleene.semantic.analyzed`` — it is what a Spark executor imports.
"""

from .engine import Counters, Runtime, evaluate, start

__all__ = ["Counters", "Runtime", "evaluate", "start"]
