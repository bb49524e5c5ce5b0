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

from abc import ABC, abstractmethod
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
    each match's last event (the keyed parallel runtime merges by it). With ``items``, a
    Kleene variable whose ``items[k]`` is not None binds ``tuple(ids[items[k][lo[k]:hi[k]]])``
    instead (list offsets into a flat array of rows: a list that is not a contiguous range,
    the chain plan's subsets of ``b+`` nodes)."""

    query: str
    names: tuple[str, ...]
    ids: Arr | list[Any]
    lo: tuple[Arr, ...]
    hi: tuple[Arr | None, ...]
    start: Arr
    end: Arr
    last_gpos: Arr
    items: tuple[Arr | None, ...] | None = None

    def __len__(self) -> int:
        return len(self.start)

    def slice(self, i: int, j: int) -> MatchColumns:
        """Matches ``i..j-1`` (sharing the ids)."""
        return MatchColumns(self.query, self.names, self.ids, tuple(x[i:j] for x in self.lo),
                            tuple(None if x is None else x[i:j] for x in self.hi),
                            self.start[i:j], self.end[i:j], self.last_gpos[i:j], self.items)

    def take(self, idx: Arr) -> MatchColumns:
        """The matches at ``idx`` (an index array), in that order (sharing the ids)."""
        return MatchColumns(self.query, self.names, self.ids, tuple(x[idx] for x in self.lo),
                            tuple(None if x is None else x[idx] for x in self.hi),
                            self.start[idx], self.end[idx], self.last_gpos[idx], self.items)

    def layout(self) -> tuple[Any, ...]:
        """What :func:`concat_columns` needs equal: the query, its variables, and per
        variable whether it binds a row, a range of rows or a list of rows."""
        items = self.items or (None,) * len(self.lo)
        return (self.query, self.names, tuple(0 if h is None else 1 if it is None else 2
                                              for h, it in zip(self.hi, items, strict=True)))

    def compact(self) -> MatchColumns:
        """The same matches with only the rows (and list offsets) they bind: a slice of a
        large part without the rest of its ids (to pickle, or to join to others)."""
        if not len(self):
            return self
        items = self.items or (None,) * len(self.lo)
        los: list[Arr] = []
        his: list[Arr | None] = []
        its: list[Arr | None] = []
        rlo, rhi = len(self.ids), 0  # the rows read: rlo..rhi-1
        for lo, hi, it in zip(self.lo, self.hi, items, strict=True):
            if hi is None:
                rlo, rhi = min(rlo, int(lo.min())), max(rhi, int(lo.max()) + 1)
            elif it is not None:
                a, b = int(lo.min()), int(hi.max())
                lo, hi, it = lo - a, hi - a, it[a:b]
                if len(it):
                    rlo, rhi = min(rlo, int(it.min())), max(rhi, int(it.max()) + 1)
            else:
                full = hi > lo
                if full.any():
                    rlo, rhi = min(rlo, int(lo[full].min())), max(rhi, int(hi[full].max()))
                lo, hi = np.where(full, lo, 0), np.where(full, hi, 0)  # () reads no row
            los.append(lo)
            his.append(hi)
            its.append(it)
        if rhi <= rlo:
            rlo = rhi = 0
        for k, (lo, hi, it) in enumerate(zip(los, his, its, strict=True)):
            if it is not None:
                its[k] = it - rlo
            else:
                los[k] = np.where(lo < hi, lo - rlo, 0) if hi is not None else lo - rlo
                his[k] = None if hi is None else np.where(lo < hi, hi - rlo, 0)
        return MatchColumns(self.query, self.names, self.ids[rlo:rhi], tuple(los), tuple(his),
                            self.start, self.end, self.last_gpos,
                            None if self.items is None else tuple(its))

    def id_list(self) -> list[Any]:
        ids = self.ids
        return ids.tolist() if isinstance(ids, np.ndarray) else ids

    def matches(self) -> list[Match]:
        """The ``Match`` objects, in order."""
        if not len(self):
            return []
        ids = self.id_list()
        cols: list[list[Any]] = []
        items = self.items or (None,) * len(self.lo)
        for lo, hi, it in zip(self.lo, self.hi, items, strict=True):
            if hi is None:
                cols.append([ids[i] for i in lo.tolist()])
            elif it is not None:
                rows = [ids[i] for i in it.tolist()]
                cols.append([tuple(rows[i:j]) for i, j in zip(lo.tolist(), hi.tolist(),
                                                              strict=True)])
            else:
                cols.append([tuple(ids[i:j]) for i, j in zip(lo.tolist(), hi.tolist(),
                                                             strict=True)])
        names, q = self.names, self.query
        return [Match(q, dict(zip(names, b, strict=True)), s, e, {})
                for b, s, e in zip(zip(*cols, strict=True), self.start.tolist(),
                                   self.end.tolist(), strict=True)]


def concat_columns(parts: Sequence[MatchColumns]) -> MatchColumns:
    """Column parts of one :meth:`~MatchColumns.layout`, one after the other, as one part
    (each compacted, then ids, list offsets and matches concatenated, indices shifted)."""
    ps = [p.compact() for p in parts]
    first = ps[0]
    arrays = [p.ids for p in ps if isinstance(p.ids, np.ndarray)]
    ids: Arr | list[Any]
    if len(arrays) == len(ps) and len({a.dtype for a in arrays}) == 1:
        ids = np.concatenate(arrays)
    else:
        ids = [x for p in ps for x in p.id_list()]
    rows = np.zeros(len(ps), np.int64)  # each part's first row in ``ids``
    np.cumsum([len(p.ids) for p in ps[:-1]], out=rows[1:])
    los: list[Arr] = []
    his: list[Arr | None] = []
    its: list[Arr | None] = []
    for k, (hi0, it0) in enumerate(zip(first.hi, first.items or (None,) * len(first.lo),
                                       strict=True)):
        if it0 is not None:
            per: list[Arr] = [p.items[k] for p in ps]  # type: ignore[index,misc]
            offs = np.zeros(len(ps), np.int64)  # each part's first list offset
            np.cumsum([len(x) for x in per[:-1]], out=offs[1:])
            its.append(np.concatenate([x + r for x, r in zip(per, rows, strict=True)]))
            shift = offs
        else:
            its.append(None)
            shift = rows
        los.append(np.concatenate([p.lo[k] + d for p, d in zip(ps, shift, strict=True)]))
        his.append(None if hi0 is None else np.concatenate(
            [p.hi[k] + d for p, d in zip(ps, shift, strict=True)]))  # type: ignore[operator]
    return MatchColumns(first.query, first.names, ids, tuple(los), tuple(his),
                        np.concatenate([p.start for p in ps]),
                        np.concatenate([p.end for p in ps]),
                        np.concatenate([p.last_gpos for p in ps]),
                        None if first.items is None else tuple(its))


class MatchBlock(ABC):
    """Many matches of one query described compactly in a plan's own layout (the chain plan's
    ``SEQ(a, b+, c)`` join: one block per last event), consecutive in the output order;
    expanded into bounded :class:`MatchColumns` only when read, so a call's output is held
    as blocks, never as one object per match."""

    @abstractmethod
    def __len__(self) -> int:
        """How many matches the block describes."""

    @classmethod
    @abstractmethod
    def columns(cls, blocks: Sequence[MatchBlock], chunk: int
                ) -> Iterator[MatchColumns | list[Match]]:
        """The matches of consecutive ``blocks`` (all of this class), in order, as column
        parts of at most ``chunk`` matches each (or lists of ``Match`` where the matches
        carry RETURN values, which columns do not hold)."""


class MatchBlocks(Sequence[Match]):
    """Consecutive blocks (of one class) as a part of a :class:`MatchTable`: a sequence of
    ``Match`` when read as one, column parts through :meth:`columns`."""

    def __init__(self, blocks: list[MatchBlock]) -> None:
        self.blocks = blocks
        self.n = sum(map(len, blocks))

    def __len__(self) -> int:
        return self.n

    def columns(self, chunk: int = 65_536) -> Iterator[MatchColumns | list[Match]]:
        """The matches as column parts (or ``Match`` lists) of at most ``chunk`` matches,
        in order."""
        if self.blocks:
            yield from type(self.blocks[0]).columns(self.blocks, chunk)

    def matches(self) -> list[Match]:
        """Every match as a ``Match`` (built now, not kept)."""
        out: list[Match] = []
        for mc in self.columns():
            out += mc if isinstance(mc, list) else mc.matches()
        return out

    def __iter__(self) -> Iterator[Match]:
        for mc in self.columns():
            yield from mc if isinstance(mc, list) else mc.matches()

    @overload
    def __getitem__(self, i: int) -> Match: ...

    @overload
    def __getitem__(self, i: slice) -> list[Match]: ...

    def __getitem__(self, i: int | slice) -> Match | list[Match]:
        return self.matches()[i]


Part = MatchColumns | MatchBlocks | list[Match]


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
                out += p if isinstance(p, list) else p.matches()
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


def parts_in_chunks(part: Part, chunk: int) -> Iterator[MatchColumns | list[Match]]:
    """``part`` cut into pieces of at most ``chunk`` matches (blocks expanded as they are
    read: one piece in memory at a time)."""
    if isinstance(part, MatchBlocks):
        yield from part.columns(chunk)
        return
    for i in range(0, len(part), chunk):
        yield part.slice(i, min(i + chunk, len(part))) if isinstance(part, MatchColumns) \
            else part[i:i + chunk]


__all__ = ["MatchBlock", "MatchBlocks", "MatchColumns", "MatchTable", "concat_columns",
           "parts_in_chunks"]
