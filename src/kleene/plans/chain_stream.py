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


BITS_PER_MATCH = 16
"""A chunk holds at most ``chunk`` matches, and fewer when its lists are longer than this on
average (its arrays grow with matches x the longest list): memory flat in the output size
and bounded in the list length."""


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
        # (block, first index, masks lo..hi), or (block, -1, 0, 0): every match of the block
        segs: list[tuple[KleeneBlock, int, int, int]] = []
        width = chunk * BITS_PER_MATCH  # a chunk's bit matrix: matches x its widest list
        taken = kmax = 0
        for blk in blocks:
            assert isinstance(blk, KleeneBlock)
            nb = len(blk.b_ids)
            km = max(kmax, nb - blk.m1[0])  # (the first first has the longest lists)
            if taken + blk.n <= max(1, min(chunk, width // km)):
                segs.append((blk, -1, 0, 0))  # the whole block fits (the common case)
                taken += blk.n
                kmax = km
                continue
            for i, m1 in enumerate(blk.m1):
                k = nb - m1
                lo, end = 1, 1 << k
                while lo < end:
                    km = max(kmax, k)
                    cap = max(1, min(chunk, width // km))
                    if taken >= cap:
                        yield _chunk(segs, taken)
                        segs, taken, kmax = [], 0, 0
                        continue
                    hi = min(end, lo + cap - taken)
                    segs.append((blk, i, lo, hi))
                    taken += hi - lo
                    kmax = km
                    lo = hi
        if segs:
            yield _chunk(segs, taken)


def _chunk(segs: list[tuple[KleeneBlock, int, int, int]], total: int) -> MatchColumns:
    """One column part: ``segs`` are (block, first index, mask lo, mask hi) in order, or
    (block, -1, 0, 0) for all of a block's matches; one segment per first event below."""
    ids: list[Any] = []
    seen: dict[int, int] = {}  # id(block) -> offset of its rows in ``ids``: b, a, then c
    s_b: list[int] = []
    s_a: list[int] = []
    s_c: list[int] = []
    s_ats: list[int] = []
    s_cts: list[int] = []
    s_cg: list[int] = []
    s_lo: list[int] = []
    s_k: list[int] = []
    s_n: list[int] = []
    blk0 = segs[0][0]
    for blk, i, lo, hi in segs:
        off = seen.get(id(blk))
        nb = len(blk.b_ids)
        na = len(blk.a_ids)
        if off is None:
            off = seen[id(blk)] = len(ids)
            ids += blk.b_ids
            ids += blk.a_ids
            ids.append(blk.c_id)
        if i < 0:
            ks = [nb - m for m in blk.m1]
            s_b += [off + m for m in blk.m1]
            s_a += range(off + nb, off + nb + na)
            s_c += [off + nb + na] * na
            s_ats += blk.a_ts
            s_cts += [blk.c_ts] * na
            s_cg += [blk.c_gpos] * na
            s_lo += [1] * na
            s_k += ks
            s_n += [(1 << k) - 1 for k in ks]
            continue
        m1 = blk.m1[i]
        s_b.append(off + m1)
        s_a.append(off + nb + i)
        s_c.append(off + nb + na)
        s_ats.append(blk.a_ts[i])
        s_cts.append(blk.c_ts)
        s_cg.append(blk.c_gpos)
        s_lo.append(lo)
        s_k.append(nb - m1)
        s_n.append(hi - lo)
    segs_n = len(s_n)
    cnt = np.asarray(s_n, np.int64)
    seg = np.repeat(np.arange(segs_n, dtype=np.int64), cnt)
    first = np.zeros(segs_n, np.int64)
    np.cumsum(cnt[:-1], out=first[1:])
    mask = np.arange(total, dtype=np.int64) + (np.asarray(s_lo, np.int64) - first)[seg]
    kmax = max(s_k)
    # one row of bits per match (little-endian bytes of the mask, unpacked): row-major set
    # bits are each match's b nodes in ascending order
    le = mask.astype("<i8", copy=False)  # (bytes in little-endian order on any machine)
    bits = np.unpackbits(le.view(np.uint8).reshape(total, 8), axis=1, count=kmax,
                         bitorder="little").view(bool)
    rows, cols = np.nonzero(bits)
    items = np.asarray(s_b, np.int64)[seg[rows]] + cols
    hi_b = np.cumsum(np.count_nonzero(bits, axis=1), dtype=np.int64)
    lo_b = np.empty_like(hi_b)
    lo_b[0] = 0
    lo_b[1:] = hi_b[:-1]
    return MatchColumns(blk0.query, blk0.names, id_array(ids),
                        (np.asarray(s_a, np.int64)[seg], lo_b, np.asarray(s_c, np.int64)[seg]),
                        (None, hi_b, None),
                        np.asarray(s_ats, np.int64)[seg], np.asarray(s_cts, np.int64)[seg],
                        np.asarray(s_cg, np.int64)[seg], (None, items, None))


class SeqBlock(MatchBlock):
    """The matches ending with one last event ``c`` of a SEQ of single variables (the
    generated join :func:`~kleene.plans.chain.fast_joiner`), described by a copy of the
    reachable nodes: ``ids[k]`` (and the first state's ``ts0``) of partition ``k`` (``k`` <
    ``L``, the last state's index) and, for ``k`` >= 1, ``snaps[k][i]``: how many nodes of
    partition ``k - 1`` node ``i`` reaches (local indices). O(reachable nodes) per last
    event, whatever the number of matches; expanded a bounded piece at a time when written,
    in the join's order (first event ascending, then the second-to-last variable down to the
    second)."""

    __slots__ = ("query", "names", "comp", "c_id", "c_ts", "c_gpos", "ids", "ts0", "snaps",
                 "n")

    def __init__(self, query: str, names: tuple[str, ...], comp: tuple[int, ...], c_id: Any,
                 c_ts: int, c_gpos: int, ids: list[list[Any]], ts0: list[int],
                 snaps: list[list[int]]) -> None:
        self.query, self.names, self.comp = query, names, comp
        self.c_id, self.c_ts, self.c_gpos = c_id, c_ts, c_gpos
        self.ids, self.ts0, self.snaps = ids, ts0, snaps
        # the exact number of matches: W_k[i] partial matches end at node i of partition k
        w = [1] * len(ids[0])
        for k in range(1, len(ids)):
            pre = [0]
            for x in w:
                pre.append(pre[-1] + x)
            w = [pre[s] for s in snaps[k]]
        self.n = sum(w)

    def __len__(self) -> int:
        return self.n

    @classmethod
    def columns(cls, blocks: Sequence[MatchBlock], chunk: int) -> Iterator[MatchColumns]:
        """Each block's matches as column parts of at most ``chunk`` matches (a part never
        spans two blocks)."""
        if chunk < 1:
            raise ValueError(f"chunk must be a positive number of matches, not {chunk}")
        for blk in blocks:
            assert isinstance(blk, SeqBlock)
            for cols in blk._index_chunks(chunk):
                yield blk._part(cols)

    def _index_chunks(self, chunk: int) -> Iterator[list[list[int]]]:
        """Lists of local node indices per partition (``cols[k]``), at most ``chunk``
        matches each, in the join's order."""
        L = len(self.ids)
        snaps = self.snaps
        cols: list[list[int]] = [[] for _ in range(L)]
        size = 0
        n0 = len(self.ids[0])
        if L == 1:
            for lo in range(0, n0, chunk):
                yield [list(range(lo, min(n0, lo + chunk)))]
            return
        m = [0] * L  # m[k]: the first node of partition k after m[k - 1] (m[0] = i0)
        idx = [0] * L  # the current node per partition
        for i0 in range(n0):
            m[0] = idx[0] = i0
            for k in range(1, L):
                sk = snaps[k]
                mk = m[k]
                while mk < len(sk) and sk[mk] <= m[k - 1]:
                    mk += 1
                m[k] = mk
            # depth-first over partitions L-1 .. 2 (hi per level), partition 1 as ranges
            his = [0] * (L + 1)
            his[L - 1] = len(snaps[L - 1])
            level = L - 1
            cur = [0] * L
            cur[L - 1] = m[L - 1] - 1
            while level < L:
                if level == 1:
                    lo, hi = m[1], his[1]
                    while lo < hi:
                        take = min(hi - lo, chunk - size)
                        cols[1].extend(range(lo, lo + take))
                        for k in range(2, L):
                            cols[k].extend([idx[k]] * take)
                        cols[0].extend([i0] * take)
                        size += take
                        lo += take
                        if size == chunk:
                            yield cols
                            cols = [[] for _ in range(L)]
                            size = 0
                    level += 1
                    continue
                cur[level] += 1
                if cur[level] >= his[level]:
                    level += 1
                    continue
                idx[level] = cur[level]
                his[level - 1] = snaps[level][cur[level]]
                if level - 1 >= 2:
                    cur[level - 1] = m[level - 1] - 1
                level -= 1
        if size:
            yield cols

    def _part(self, cols: list[list[int]]) -> MatchColumns:
        ids: list[Any] = []
        offs = []
        for col_ids in self.ids:
            offs.append(len(ids))
            ids += col_ids
        ids.append(self.c_id)
        total = len(cols[0])
        rows = [np.asarray(c, np.int64) + o for c, o in zip(cols, offs, strict=True)]
        rows.append(np.full(total, len(ids) - 1, np.int64))
        return MatchColumns(self.query, self.names, id_array(ids), tuple(rows[k] for k in self.comp),
                            (None,) * len(self.comp),
                            np.asarray(self.ts0, np.int64)[np.asarray(cols[0], np.int64)],
                            np.full(total, self.c_ts, np.int64),
                            np.full(total, self.c_gpos, np.int64))


__all__ = ["MAX_SPAN", "KleeneBlock", "SeqBlock"]


def id_array(ids: list[Any]) -> np.ndarray[Any, Any] | list[Any]:
    """Event ids as an int64 array when every one is an int that fits, else the list."""
    if ids and all(type(x) is int for x in ids):
        try:
            return np.asarray(ids, np.int64)
        except OverflowError:
            pass
    return ids
