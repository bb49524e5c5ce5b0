"""Matches handed over as columns: no ``Match`` object per match until one is read.

A plan that finds its matches with array operations (the ``runs`` plan) describes them as
:class:`MatchColumns`: the event ids of the rows it looked at, and per variable the row index
(or, for a Kleene variable, the range of rows) it binds, with the start and end times. A
:class:`MatchTable` is a sequence of such parts (and of plain ``Match`` lists): it has the
length, iteration, indexing and ``+=`` of the ``list[Match]`` every engine returns, builds the
``Match`` objects only when they are read, and the writers format its column parts in bulk
(:func:`kleene.events.textcols.jsonl_column_lines`) -- the same bytes as for the ``Match``
objects. The runtime returns one only when asked (``Runtime.columnar``, set by the CLI).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np

from ..frozen import dataclass
from .match import Match

Arr = np.ndarray[Any, Any]


@dataclass(frozen=True, eq=False)
class MatchColumns:
    """Matches of one query binding ``names`` in that order: variable ``k`` binds
    ``ids[lo[k]]``, or for a Kleene variable (``hi[k]`` not None) ``tuple(ids[lo[k]:hi[k]])``;
    ``start`` / ``end`` are internal (microsecond) times; ``last_gpos`` the stream position of
    each match's last event (the keyed parallel runtime merges by it)."""

    query: str
    names: tuple[str, ...]
    ids: Arr | list[Any]
    lo: tuple[Arr, ...]
    hi: tuple[Arr | None, ...]
    start: Arr
    end: Arr
    last_gpos: Arr

    def __len__(self) -> int:
        return len(self.start)

    def slice(self, i: int, j: int) -> MatchColumns:
        """Matches ``i..j-1`` (sharing the ids)."""
        return MatchColumns(self.query, self.names, self.ids, tuple(x[i:j] for x in self.lo),
                            tuple(None if x is None else x[i:j] for x in self.hi),
                            self.start[i:j], self.end[i:j], self.last_gpos[i:j])

    def id_list(self) -> list[Any]:
        ids = self.ids
        return ids.tolist() if isinstance(ids, np.ndarray) else ids

    def matches(self) -> list[Match]:
        """The ``Match`` objects, in order."""
        if not len(self):
            return []
        ids = self.id_list()
        cols: list[list[Any]] = []
        for lo, hi in zip(self.lo, self.hi, strict=True):
            if hi is None:
                cols.append([ids[i] for i in lo.tolist()])
            else:
                cols.append([tuple(ids[i:j]) for i, j in zip(lo.tolist(), hi.tolist(),
                                                             strict=True)])
        names, q = self.names, self.query
        return [Match(q, dict(zip(names, b, strict=True)), s, e, {})
                for b, s, e in zip(zip(*cols, strict=True), self.start.tolist(),
                                   self.end.tolist(), strict=True)]


Part = MatchColumns | list[Match]


class MatchTable(Sequence[Match]):
    """Matches as a sequence of parts (column parts and ``Match`` lists), in output order."""

    def __init__(self, parts: Sequence[Part] = ()) -> None:
        self.parts: list[Part] = [p for p in parts if len(p)]
        self._list: list[Match] | None = None

    def __len__(self) -> int:
        return sum(len(p) for p in self.parts)

    def to_list(self) -> list[Match]:
        """Every match as a ``Match`` (built once, then kept)."""
        if self._list is None:
            out: list[Match] = []
            for p in self.parts:
                out += p.matches() if isinstance(p, MatchColumns) else p
            self._list = out
        return self._list

    def __iter__(self) -> Iterator[Match]:
        return iter(self.to_list())

    @overload
    def __getitem__(self, i: int) -> Match: ...

    @overload
    def __getitem__(self, i: slice) -> list[Match]: ...

    def __getitem__(self, i: int | slice) -> Match | list[Match]:
        return self.to_list()[i]

    def __iadd__(self, other: Any) -> MatchTable:
        more = other.parts if isinstance(other, MatchTable) else [list(other)]
        self.parts += [p for p in more if len(p)]
        self._list = None
        return self

    def __add__(self, other: Any) -> MatchTable:
        return MatchTable(list(self.parts)).__iadd__(other)

    def __radd__(self, other: Any) -> list[Match]:
        return list(other) + self.to_list()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MatchTable):
            return self.to_list() == other.to_list()
        if isinstance(other, list):
            return self.to_list() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"MatchTable({len(self)} matches in {len(self.parts)} parts)"


__all__ = ["MatchColumns", "MatchTable"]
