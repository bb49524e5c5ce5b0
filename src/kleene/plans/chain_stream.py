"""Lazy output of the chain plan's ``SEQ(a, b+ b[], c)`` join (docs/engine.md, "Streaming
output"): one :class:`KleeneBlock` per last event describes all of its matches -- the first
events that pass the condition and, per first event, the b nodes after it -- and the matches
are generated as columns, a bounded chunk at a time, only when they are read.

The order is the join's (docs/semantics.md 10): first events ascending, then per first event
the non-empty subsets of its b nodes in the order of their bit masks (bit i: the i-th b node
after it). A chunk is built with numpy: the masks of its matches, their bits (one row per
match), and the set bits as list offsets into a table of ids (``MatchColumns.items``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..events.matchtable import MatchBlock, MatchColumns

MAX_SPAN = 62
"""The most b nodes after one first event a block describes (its masks are int64); beyond,
the join writes the matches itself (2**62 matches of one pair cannot be enumerated anyway)."""


class KleeneBlock(MatchBlock):
    """The matches ending with one ``c`` event: ``firsts[i]`` (an ``a`` event's id and time)
    with every non-empty subset of ``b_ids[m1[i]:]`` (``m1`` nondecreasing)."""

    __slots__ = ("query", "names", "c_id", "c_ts", "c_gpos", "a_ids", "a_ts", "m1", "b_ids",
                 "n")

    def __init__(self, query: str, names: tuple[str, ...], c_id: Any, c_ts: int, c_gpos: int,
                 a_ids: list[Any], a_ts: list[int], m1: list[int], b_ids: list[Any],
                 n: int) -> None:
        self.query = query
        self.names = names
        self.c_id, self.c_ts, self.c_gpos = c_id, c_ts, c_gpos
        self.a_ids, self.a_ts, self.m1, self.b_ids = a_ids, a_ts, m1, b_ids
        self.n = n

    def __len__(self) -> int:
        return self.n

    @classmethod
    def columns(cls, blocks: Sequence[MatchBlock], chunk: int) -> Iterator[MatchColumns]:
        """Consecutive blocks' matches as column parts of at most ``chunk`` matches."""
        if chunk < 1:
            raise ValueError(f"chunk must be a positive number of matches, not {chunk}")
        segs: list[tuple[KleeneBlock, int, int, int]] = []  # block, first index, masks lo..hi
        room = chunk
        for blk in blocks:
            assert isinstance(blk, KleeneBlock)
            nb = len(blk.b_ids)
            for i, m1 in enumerate(blk.m1):
                lo, end = 1, 1 << (nb - m1)
                while lo < end:
                    hi = min(end, lo + room)
                    segs.append((blk, i, lo, hi))
                    room -= hi - lo
                    lo = hi
                    if room == 0:
                        yield _chunk(segs, chunk)
                        segs, room = [], chunk
        if segs:
            yield _chunk(segs, chunk - room)


def _chunk(segs: list[tuple[KleeneBlock, int, int, int]], total: int) -> MatchColumns:
    """One column part: ``segs`` are (block, first index, mask lo, mask hi) in order."""
    ids: list[Any] = []
    seen: dict[int, int] = {}  # id(block) -> offset of its rows in ``ids``: b, a, then c
    s_b, s_a, s_c, s_ats, s_cts, s_cg, s_lo, s_k = ([] for _ in range(8))
    blk0 = segs[0][0]
    for blk, i, lo, _hi in segs:
        off = seen.get(id(blk))
        if off is None:
            off = seen[id(blk)] = len(ids)
            ids += blk.b_ids
            ids += blk.a_ids
            ids.append(blk.c_id)
        nb = len(blk.b_ids)
        m1 = blk.m1[i]
        s_b.append(off + m1)
        s_a.append(off + nb + i)
        s_c.append(off + nb + len(blk.a_ids))
        s_ats.append(blk.a_ts[i])
        s_cts.append(blk.c_ts)
        s_cg.append(blk.c_gpos)
        s_lo.append(lo)
        s_k.append(nb - m1)
    cnt = np.fromiter((h - lo for _b, _i, lo, h in segs), np.int64, len(segs))
    seg = np.repeat(np.arange(len(segs), dtype=np.int64), cnt)
    first = np.zeros(len(segs), np.int64)
    np.cumsum(cnt[:-1], out=first[1:])
    mask = np.arange(total, dtype=np.int64) + (np.asarray(s_lo, np.int64) - first)[seg]
    kmax = max(s_k)
    bits = (mask[:, None] >> np.arange(kmax, dtype=np.int64)) & 1
    rows, cols = np.nonzero(bits)
    items = np.asarray(s_b, np.int64)[seg[rows]] + cols
    hi = np.cumsum(bits.sum(axis=1))
    lo_b = hi - bits.sum(axis=1) if kmax > 1 else hi - 1
    arr: np.ndarray[Any, Any] | list[Any] = ids
    if ids and all(type(x) is int for x in ids):
        try:
            arr = np.asarray(ids, np.int64)
        except OverflowError:
            arr = ids
    return MatchColumns(blk0.query, blk0.names, arr,
                        (np.asarray(s_a, np.int64)[seg], lo_b, np.asarray(s_c, np.int64)[seg]),
                        (None, hi, None),
                        np.asarray(s_ats, np.int64)[seg], np.asarray(s_cts, np.int64)[seg],
                        np.asarray(s_cg, np.int64)[seg], (None, items, None))


__all__ = ["MAX_SPAN", "KleeneBlock"]
