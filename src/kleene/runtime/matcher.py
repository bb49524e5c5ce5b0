"""The seam between the shared runtime and an evaluation algorithm.

The :class:`~kleene.runtime.engine.Runtime` owns everything that is the same for every
algorithm: reordering and lateness, the vectorized candidate masks, routing events to per-key
state, positions, negation history hand-off, output order and the output policies. An
algorithm (a *plan kind*, registered in :mod:`kleene.plans`) supplies a :class:`Matcher`: it
evaluates the events of ONE key at a time against explicit per-key state, the way Flink's
``NFA.process(state, event, ...)`` does, and appends complete candidates to ``out``.

Everything a matcher needs is plain data handed to its constructor: the compiled plan, the
:class:`MatcherOptions` (caps, ``on_cap``, count mode) and nothing else -- a matcher never sees
the AST or the analyzed query. Per-key state is created by :meth:`Matcher.new_state`, and
:meth:`Matcher.dump_state` / :meth:`Matcher.load_state` turn it into plain data and back (the
runtime's snapshot is the union of those, so an algorithm snapshots by construction).

:class:`OutputSpec` is what the runtime's policy step needs of the query (PICK, EMIT, CONSUME,
the query window, whether per-key positions are read), compiled from the query by the plan
layer, so the runtime does not read the query either.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..frozen import dataclass
from ..vocab import Emit, PickMode, Strategy, Window

if TYPE_CHECKING:
    from .linear import Candidate

Rec = tuple[Any, ...]
"""One event as the matcher sees it: ``(gpos, ts, id, cpos, wpos, *attributes)`` in the plan's
layout order (kleene.plan.expr's GPOS, TS, ... constants index it)."""


@dataclass(frozen=True, slots=True)
class MatcherOptions:
    """How a matcher is built: its caps and what it produces. Constructor data, never set
    after construction."""

    max_runs: int | None = 100_000
    """Live partial matches per key (``max_runs_per_partition``)."""
    max_matches_per_event: int | None = 1_000_000
    max_matches_per_call: int | None = 2_000_000
    on_cap: str = "error"
    """``"error"`` or ``"truncate"``."""
    count_only: bool = False
    """Only the number of matches is wanted (a matcher may count instead of building them)."""
    use_kernel: bool = True
    """Let the matcher use generated code where it has one (tests turn it off to compare)."""


@dataclass(frozen=True, slots=True)
class PickSpec:
    """One PICK clause as data."""

    var: str
    mode: PickMode
    from_var: str | None = None
    within: Window | None = None


@dataclass(frozen=True, slots=True)
class ConsumeSpec:
    """The CONSUME clause as data."""

    all_vars: bool
    vars: tuple[str, ...] = ()


PreferNode = tuple[Any, ...]
"""A pattern as plain data for SQL's preference order (docs/semantics.md 19):
``("e", var)``, ``("s", items)``, ``("o", items)`` or ``("k", body, min, max, reluctant)``."""


@dataclass(frozen=True, slots=True)
class AfterMatchSpec:
    """``AFTER MATCH SKIP`` as data: the mode (``"TO NEXT ROW"``, ``"PAST LAST ROW"``,
    ``"TO FIRST"``, ``"TO LAST"``), its variable, the pattern for the preference order and
    the PARTITION BY attributes (read from the records to group candidates)."""

    mode: str
    var: str | None
    pattern: PreferNode
    partition_by: tuple[str, ...] = ()
    rows: tuple[str, ...] | None = None
    """``EMIT ROWS``: one Match per row of each match (its RETURN evaluated as of the row);
    the excluded variables. None: one Match per match."""


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """What the runtime's policy and routing steps need of the query (plain data)."""

    name: str
    strategy: Strategy
    emit: Emit = Emit.ALL
    picks: tuple[PickSpec, ...] = ()
    consume: ConsumeSpec | None = None
    within: Window | None = None
    """The query-level window (PICK groups are complete once the stream is past it)."""
    needs_positions: bool = False
    """Some rule reads per-key positions (contiguity, count windows)."""
    after_match: AfterMatchSpec | None = None
    """SQL's preferred match per start row and skip rule (docs/semantics.md 19)."""
    timeouts: bool = False
    """``EMIT ... TIMEOUTS``: the matcher also reports timed-out partial matches
    (``expired_partials``, docs/semantics.md 20)."""

    @property
    def plain(self) -> bool:
        """No PICK, no EMIT RECENT, no CONSUME, no AFTER MATCH SKIP: matches go out as the
        matcher made them."""
        return (not self.picks and self.consume is None and self.emit is Emit.ALL
                and self.after_match is None)


@runtime_checkable
class Matcher(Protocol):
    """One evaluation algorithm over one key's events (see the module docstring).

    Attributes every matcher has:

    * ``has_trailing`` -- some match can wait on a trailing NOT (``release_pending`` hands it
      over once decided);
    * ``decides_negation`` -- every NOT is decided inside the matcher (complete candidates need
      no history check);
    * ``truncated_runs`` / ``truncated_matches`` -- what ``on_cap="truncate"`` dropped;
    * ``counted`` -- in count mode, complete matches counted since the runtime last read it.
    """

    has_trailing: bool
    decides_negation: bool
    truncated_runs: int
    truncated_matches: int

    def mask_specs(self) -> Sequence[tuple[str | None, Any]]:
        """Per candidate bit: the event type it needs and its vectorized mask (or None). The
        runtime computes the bits of every event of a batch in bulk from these."""
        ...

    def new_state(self) -> Any:
        """Fresh per-key state."""
        ...

    def process(self, st: Any, recs: list[Rec], bits: list[int], out: list[Any],
                max_matches: int | None, budget: int | None = None) -> None:
        """Evaluate one key's events (in stream order, with their candidate bits) against
        ``st``; append complete candidates to ``out`` (at most ``budget`` of them)."""
        ...

    def sort_key(self, c: Candidate) -> tuple[Any, ...]:
        """The documented output order of a candidate (docs/semantics.md 10)."""
        ...

    def negation_ok(self, st: Any, c: Candidate) -> bool:
        """Does no negated event forbid ``c`` (history check)?"""
        ...

    def match_preds_ok(self, c: Candidate) -> bool:
        """Conjuncts decided on the complete match."""
        ...

    def needs_trailing(self, c: Candidate) -> bool:
        """Must ``c`` wait for a trailing NOT's interval to close?"""
        ...

    def admit_pending(self, st: Any, c: Candidate) -> None:
        """Keep ``c`` until its trailing NOT is decided."""
        ...

    def release_pending(self, st: Any, watermark: int | None) -> list[Candidate]:
        """Waiting candidates decided by ``watermark`` (None: end of stream)."""
        ...

    def forget(self, c: Candidate) -> None:
        """``c`` left the matcher's hands (bookkeeping hook)."""
        ...

    def oldest(self, st: Any) -> int | None:
        """The smallest position a live partial match of ``st`` binds (CONSUME pruning)."""
        ...

    def prune(self, st: Any) -> None:
        """Drop negation history no future match can need."""
        ...

    def dump_state(self, st: Any) -> Any:
        """Per-key state as plain data (snapshots)."""
        ...

    def load_state(self, data: Any) -> Any:
        """Inverse of :meth:`dump_state`."""
        ...


__all__ = ["AfterMatchSpec", "ConsumeSpec", "Matcher", "MatcherOptions", "OutputSpec", "PickSpec", "PreferNode", "Rec"]
