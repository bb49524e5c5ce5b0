"""The shared network under the conformance suite and the differential test (``queryset/...``).

Query sets evaluate each query as if it ran alone (docs/semantics.md §17), so every
single-query case the shared network supports is also a query-set case. Two backends run a case
query through :func:`kleene.compile_many` with ``plan="shared"``:

``queryset/shared``
    the query alone in a one-query set, the whole stream in one ``run``;
``queryset/shared+companions``
    the query in a set with *companions* built from it (the same query under another name, the
    other EMIT mode, the reversed sequence, the OR of its events; each kept only if the network
    takes it), so its instances, composition links and partial-match entries are shared with
    other queries; the stream is pushed a few events at a time and the network cleans after
    every event. The whole set's output must equal :func:`~kleene.testing.oracle.evaluate_set`
    (else ``AssertionError``); the case query's own matches are returned.

A query the network does not take raises :class:`~kleene.testing.timeline.PlanDoesNotApply`
with the network's reason (``kleene.plans.shared.shared_spec``), never a fallback.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .. import ast
from ..events import EventBatch, Match
from ..semantic.analyzed import AnalyzedQuery
from .timeline import PlanDoesNotApply

SET_BACKENDS = ("queryset/shared", "queryset/shared+companions")
_SET_OPTIONS = frozenset({"max_matches_per_event", "max_matches_per_call", "on_cap"})
"""Runtime options the network implements (any other option: the case is refused)."""
_CHUNK = 3
"""Events per push in the companions variant."""


def set_backends() -> list[str]:
    """The names of the query-set backends (:data:`SET_BACKENDS`)."""
    return list(SET_BACKENDS)


def _companions(aq: AnalyzedQuery) -> list[AnalyzedQuery]:
    """Queries that share the case query's classes and key: a twin, the other EMIT mode, the
    reversed sequence and the OR of its events (only those the network takes)."""
    from ..api import analyze
    from ..plans.shared import shared_spec

    q = aq.query
    out: list[AnalyzedQuery] = [dataclasses.replace(aq, name=f"{aq.name}__twin")]
    other = ast.Emit.RECENT if aq.emit is ast.Emit.ALL else ast.Emit.ALL
    variants: list[tuple[str, ast.Query]] = [("emit", dataclasses.replace(q, emit=other))]
    pat = q.pattern
    if isinstance(pat, (ast.Seq, ast.And, ast.Or)) and len(pat.items) > 1:
        if isinstance(pat, ast.Seq):
            variants.append(("rev", dataclasses.replace(
                q, pattern=ast.Seq(tuple(reversed(pat.items))))))
        variants.append(("or", dataclasses.replace(q, pattern=ast.Or(pat.items), within=None,
                                                   emit=None)))
    for tag, v in variants:
        try:
            c = analyze(dataclasses.replace(v, name=f"{aq.name}__{tag}"), udfs=aq.udfs)
        except Exception:  # noqa: BLE001 - a companion is optional; the case query is not
            continue
        if not isinstance(shared_spec(c), str):
            out.append(c)
    return out


class SetBackend:
    """A conformance backend running the case query in a query set on the shared network."""

    def __init__(self, name: str) -> None:
        if name not in SET_BACKENDS:
            raise ValueError(f"unknown query-set backend {name!r}; known: {SET_BACKENDS}")
        self.name = name
        self.companions = name.endswith("+companions")
        self.unsupported: dict[str, int] = {}
        self.evaluated = 0

    def reason(self, aq: AnalyzedQuery, **options: Any) -> str | None:
        """Why the shared network does not take ``aq`` (None: it does)."""
        from ..plans.shared import shared_spec

        spec = shared_spec(aq)
        if isinstance(spec, str):
            return spec
        extra = sorted(set(options) - _SET_OPTIONS)
        if extra:
            return f"runtime options {extra} (not implemented by the network)"
        return None

    def __call__(self, aq: AnalyzedQuery, events: EventBatch, **options: Any) -> list[Match]:
        why = self.reason(aq, **options)
        if why is not None:
            self.unsupported[why] = self.unsupported.get(why, 0) + 1
            raise PlanDoesNotApply(f"{self.name} does not apply: {why}")
        self.evaluated += 1
        if not self.companions:
            return list(self._set([aq], options).run(events))
        members = _companions(aq)
        members.insert(len(members) // 2, aq)  # neither first nor last in the set
        qs = self._set(members, {**options, "clean_period": 1})
        rt = qs.start()
        out: list[Match] = []
        for lo in range(0, len(events), _CHUNK):
            out += rt.push(events.slice(lo, min(_CHUNK, len(events) - lo)))
        out += rt.close()
        self._check_set(members, events, out, options)
        twin = [dataclasses.replace(m, query=aq.name) for m in out
                if m.query == f"{aq.name}__twin"]
        mine = [m for m in out if m.query == aq.name]
        if twin != mine:
            raise AssertionError(f"{self.name}: the twin of {aq.name!r} has other matches")
        return mine

    @staticmethod
    def _set(members: list[AnalyzedQuery], options: dict[str, Any]) -> Any:
        from ..api import CompiledQuery
        from ..queryset import QuerySet

        return QuerySet(tuple(CompiledQuery(a) for a in members), "shared", options)

    def _check_set(self, members: list[AnalyzedQuery], events: EventBatch,
                   got: list[Match], options: dict[str, Any]) -> None:
        """The whole set equals the oracle's query-set rule (only without caps: a capped
        case's expected matches are the case's own business)."""
        from .oracle import evaluate_set

        if options:
            return
        want = evaluate_set(members, events)
        if [m.key() for m in got] != [m.key() for m in want]:
            raise AssertionError(f"{self.name}: the set {[a.name for a in members]} differs "
                                 f"from oracle.evaluate_set")


__all__ = ["SET_BACKENDS", "SetBackend", "set_backends"]
