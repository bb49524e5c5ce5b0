"""The capacity caps every matcher applies (``Runtime`` options ``max_runs_per_partition``,
``max_matches_per_event``, ``max_matches_per_call`` and ``on_cap``; docs/engine.md, "Bounded
memory").

Each cap either raises :class:`CapacityError` (``on_cap='error'``) or, with
``on_cap='truncate'``, counts what it drops in the matcher's ``truncated_runs`` /
``truncated_matches``. A truncating :class:`~kleene.runtime.engine.Runtime` gives its matcher
``on_cap='saturate'``: the match caps truncate as above, and the runs cap raises, so the
runtime saturates the partition instead of advancing ``max_runs`` runs per event. ``m`` is any
matcher: it has ``plan.name``, ``on_cap``, ``max_runs``,
``truncated_runs``, ``truncated_matches`` and (set by the runtime) ``max_matches_per_call``.
The helpers run only once a cap is exceeded: the run loops test the limits themselves.
"""

from __future__ import annotations

from typing import Any

from ..errors import CapacityError
from ..plan.layout import GPOS

Rec = tuple[Any, ...]


def too_many_matches(m: Any, e: Rec, nm: int, cap: int) -> int:
    """Event ``e`` completed ``nm > cap`` matches (``max_matches_per_event``): raise, or
    (``on_cap='truncate'``) count and return how many of them to drop (the last ones)."""
    if m.on_cap in ("truncate", "saturate"):
        m.truncated_matches += nm - cap
        return nm - cap
    raise CapacityError(
        f"query {m.plan.name!r}: event {e[2]!r} completed {nm} matches, more than "
        f"max_matches_per_event={cap}; narrow the pattern (WITHIN, PARTITION BY, a stricter "
        "strategy such as skip-till-next-match), raise the cap (CLI --max-matches-per-event N, "
        "0 for no cap; Runtime option max_matches_per_event=N, None for no cap), or keep the "
        "first matches and count the rest (CLI --on-cap truncate; on_cap='truncate')",
        cap="event", gpos=e[GPOS], built=nm)


def too_many_runs(m: Any, nruns: int, e: Rec | None = None) -> int:
    """``nruns > m.max_runs`` live runs in one partition (``max_runs_per_partition``):
    raise, or (``on_cap='truncate'``) count and return how many of them to drop (the oldest
    ones)."""
    cap: int = m.max_runs
    if m.on_cap == "truncate":
        m.truncated_runs += nruns - cap
        return nruns - cap
    raise CapacityError(
        f"query {m.plan.name!r}: {nruns} live runs in one partition exceed "
        f"max_runs_per_partition={cap}; narrow the pattern (WITHIN, PARTITION BY, a stricter "
        "strategy such as skip-till-next-match), raise the cap (CLI --max-runs-per-partition "
        "N, 0 for no cap; Runtime option max_runs_per_partition=N, None for no cap), or stop "
        "matching the partition for the rest of the call and count what that drops (CLI "
        "--on-cap truncate; on_cap='truncate')",
        cap="runs", built=nruns, gpos=None if e is None else e[GPOS])


def over_budget(m: Any, e: Rec | None, out: list[Any], budget: int) -> None:
    """The matches-per-call cap (``max_matches_per_call``): ``out`` holds more than
    ``budget`` matches after event ``e`` (None: not known). Raises, or with
    ``on_cap='truncate'`` drops the excess -- the matches produced last -- and counts it."""
    over = len(out) - budget
    if m.on_cap in ("truncate", "saturate"):
        m.truncated_matches += over
        del out[budget:]
        return
    cap = getattr(m, "max_matches_per_call", None)
    at = "" if e is None else f" (reached at event {e[2]!r})"
    raise CapacityError(
        f"query {m.plan.name!r}: more than max_matches_per_call={cap} complete matches in "
        f"one push/advance/close call{at}; raise the cap (Runtime option "
        "max_matches_per_call=N, None for no cap; CLI --max-matches-per-call N, 0 for no "
        "cap), push smaller batches, narrow the pattern (WITHIN, PARTITION BY, a stricter "
        "strategy), or pass on_cap='truncate' (CLI --on-cap truncate) to keep the first "
        "matches and count the rest", cap="call", gpos=None if e is None else e[GPOS])


def event_caps(m: Any, e: Rec, nm: int, out: list[Any], max_matches: int | None,
               budget: int | None, nruns: int) -> int:
    """Every cap after event ``e``, in order: its ``nm`` matches (the last ``nm`` of
    ``out``) against ``max_matches``, ``out`` against ``budget``, the ``nruns`` live runs
    against ``m.max_runs``. Returns how many of the oldest runs to drop (0: none)."""
    if max_matches is not None and nm > max_matches:
        del out[len(out) - too_many_matches(m, e, nm, max_matches):]
    if budget is not None and len(out) > budget:
        over_budget(m, e, out, budget)
    if m.max_runs is not None and nruns > m.max_runs:
        return too_many_runs(m, nruns, e)
    return 0


__all__ = ["event_caps", "over_budget", "too_many_matches", "too_many_runs"]
