"""A complete match before negation checks and output policies, and the documented output
order -- shared by every matcher and the runtime."""

from __future__ import annotations

from typing import Any

from ..frozen import dataclass
from ..plan.layout import GPOS


@dataclass(slots=True)
class Candidate:
    """A complete match before negation checks and policies."""

    B: tuple[Any, ...]
    first_ts: int
    first_wpos: int
    last_gpos: int
    last_ts: int
    last_wpos: int
    positions: tuple[int, ...]
    trailing: tuple[Any, ...] = ()
    """Open tails of trailing NOTs the match waits on (matcher-specific plain tuples)."""


def cand_state(c: Candidate) -> tuple[Any, ...]:
    """A candidate as plain data (snapshots)."""
    return (c.B, c.first_ts, c.first_wpos, c.last_gpos, c.last_ts, c.last_wpos, c.positions,
            c.trailing)


def output_sort_key(c: Candidate, order: tuple[str, ...] | list[str],
                    slot: dict[str, int]) -> tuple[Any, ...]:
    """The documented output order (docs/semantics.md 10): position of the last event, the
    sorted positions, then per variable in pattern order ``(0,)`` if unbound, else
    ``(1, positions...)``. Shared by every matcher so all plans sort identically."""
    per_var: list[tuple[Any, ...]] = []
    for v in order:
        x = c.B[slot[v]]
        if x is None:
            per_var.append((0,))
        elif isinstance(x, tuple) and (not x or isinstance(x[0], tuple)):
            per_var.append((1, tuple(r[GPOS] for r in x)))
        else:
            per_var.append((1, (x[GPOS],)))
    return (c.last_gpos, c.positions, tuple(per_var))


__all__ = ["Candidate", "cand_state", "output_sort_key"]
