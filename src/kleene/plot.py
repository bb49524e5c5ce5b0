"""A picture of where matches fall: events as ticks per partition, matches as spans with their
variables marked (``kleene run --plot PATH``, :func:`timeline`).

matplotlib is an optional extra (``pip install "kleene[plot]"``); without it :func:`timeline`
raises :class:`~kleene.errors.MissingExtraError` with that command.

Layout: one row per partition (the values of the query's PARTITION BY columns; one row for
an unpartitioned query), at most ``max_rows`` of them, those with the most matches first, in
the order of their first event. Each event of a shown row is a grey tick at its time; each
match is a translucent span from its start to its end on its row (the row of its first bound
event), and each variable's events are marked with the variable's own marker and colour. The
legend names them. The figure is ``WIDTH_PX`` pixels wide and :func:`height_px` high.

Example:
    >>> import kleene                                                      # doctest: +SKIP
    >>> events, _ = kleene.read_events("flights.csv.gz", time_col="dep_time_utc",
    ...                                event_type="Flight")                # doctest: +SKIP
    >>> found = kleene.match(events, QUERY, output="matches")              # doctest: +SKIP
    >>> timeline(events, found, partition_by=["tailnum"], path="t.png")    # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import MissingExtraError
from .events import EventBatch, Match

WIDTH_PX = 1200
"""The width of a timeline figure, in pixels (``DPI`` dots per inch)."""
DPI = 100
MAX_MATCHES = 5_000
"""Matches drawn at most (the title says when there were more)."""
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
_COLOURS = ("tab:red", "tab:blue", "tab:green", "tab:purple", "tab:orange", "tab:brown",
            "tab:pink", "tab:olive", "tab:cyan", "tab:gray")

INSTALL_HINT = 'drawing a timeline needs matplotlib: pip install "kleene[plot]"'


def height_px(rows: int) -> int:
    """The height in pixels of a timeline with ``rows`` partition rows."""
    return int(round(DPI * (2.0 + 0.5 * max(1, rows))))


def require_matplotlib() -> Any:
    """Import matplotlib, or raise :class:`MissingExtraError` with the install command.
    (Figures are drawn without pyplot, so no backend is chosen or changed: a notebook keeps
    its inline display, a terminal needs no display.)"""
    try:
        import matplotlib
    except ImportError:
        raise MissingExtraError(INSTALL_HINT) from None
    return matplotlib


def _row_keys(events: EventBatch, partition_by: Sequence[str]) -> list[Any]:
    """Each event's partition value (a tuple of the PARTITION BY columns; ``None``)."""
    n = len(events)
    if not partition_by:
        return [None] * n
    cols = [events.table.column(c).to_pylist() if c in events.table.column_names
            else [None] * n for c in partition_by]
    if len(cols) == 1:
        return cols[0]
    return list(zip(*cols, strict=True))


def _label(key: Any, partition_by: Sequence[str]) -> str:
    if not partition_by:
        return "all events"
    values = key if isinstance(key, tuple) else (key,)
    return ", ".join(f"{c}={v}" for c, v in zip(partition_by, values, strict=True))


def _ids(binding: Any) -> list[Any]:
    return list(binding) if isinstance(binding, tuple | list) else [binding]


def timeline(events: EventBatch, matches: Sequence[Match], *,
             partition_by: Sequence[str] = (), path: str | None = None,
             title: str | None = None, max_rows: int = 12) -> Any:
    """Draw ``matches`` over ``events`` (see the module docstring); returns the matplotlib
    ``Figure`` and, with ``path``, writes it as a PNG there.

    ``partition_by``: the query's PARTITION BY columns (``compiled.analyzed.partition_by``),
    one row per value. ``max_rows``: rows shown at most.
    """
    require_matplotlib()
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    partition_by = list(partition_by)
    keys = _row_keys(events, partition_by)
    ids = events.ids
    shown_matches = list(matches[:MAX_MATCHES])
    # the row of each match: the partition of its first bound event
    first_ids = []
    for m in shown_matches:
        bound = [i for b in m.bindings.values() for i in _ids(b)]
        first_ids.append(bound[0] if bound else None)
    id_type = ids.type
    all_ids = ids.combine_chunks()
    pos = (pc.index_in(pa.array(first_ids, id_type), value_set=all_ids).to_pylist()
           if first_ids else [])
    match_row = [keys[p] if p is not None else None for p in pos]
    counts: dict[Any, int] = {}
    for k in match_row:
        counts[k] = counts.get(k, 0) + 1
    first_seen: dict[Any, int] = {}
    for i, k in enumerate(keys):
        first_seen.setdefault(k, i)
    candidates = sorted(first_seen, key=lambda k: (-counts.get(k, 0), first_seen[k]))
    rows = sorted(candidates[:max_rows], key=lambda k: first_seen[k])
    row_of = {k: r for r, k in enumerate(rows)}

    datetime = events.time.kind == "datetime"
    ts = events.ts
    unit = events.time.unit_us

    def x_of(us: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return us.astype("datetime64[us]") if datetime else us / unit

    fig = Figure(figsize=(WIDTH_PX / DPI, height_px(len(rows)) / DPI), dpi=DPI)
    ax = fig.add_subplot(1, 1, 1)
    # events: grey ticks, one line per row
    key_arr = np.array([row_of.get(k, -1) for k in keys], dtype=np.int64)
    for r in range(len(rows)):
        sel = ts[key_arr == r]
        ax.eventplot([x_of(sel)], lineoffsets=r, linelengths=0.6, colors="0.6",
                     linewidths=0.6)
    # matches: spans and variable markers
    variables: list[str] = []
    for m in shown_matches:
        for v in m.bindings:
            if v not in variables:
                variables.append(v)
    marks: dict[str, list[tuple[int, Any]]] = {v: [] for v in variables}
    pos_of_id: dict[Any, int] = {}
    all_bound = [i for m in shown_matches for b in m.bindings.values() for i in _ids(b)]
    if all_bound:
        found = pc.index_in(pa.array(all_bound, id_type), value_set=all_ids).to_pylist()
        pos_of_id = {i: p for i, p in zip(all_bound, found, strict=True) if p is not None}
    drawn = 0
    for m, k in zip(shown_matches, match_row, strict=True):
        row = row_of.get(k)
        if row is None:
            continue
        drawn += 1
        lo, hi = x_of(np.array([m.start, m.end], dtype=np.int64))
        ax.plot([lo, hi], [row, row], color="tab:blue", alpha=0.35, linewidth=9,
                solid_capstyle="butt")
        for v, b in m.bindings.items():
            for i in _ids(b):
                p = pos_of_id.get(i)
                if p is not None:
                    marks[v].append((row, ts[p]))
    for j, v in enumerate(variables):
        if marks[v]:
            rr = np.array([r for r, _ in marks[v]])
            xx = x_of(np.array([t for _, t in marks[v]], dtype=np.int64))
            ax.scatter(xx, rr + 0.18 * ((j % 3) - 1), s=22, marker=_MARKERS[j % len(_MARKERS)],
                       color=_COLOURS[j % len(_COLOURS)], zorder=3)
    ax.set_yticks(range(len(rows)), [_label(k, partition_by) for k in rows])
    ax.set_ylim(-0.8, len(rows) - 0.2)
    ax.invert_yaxis()
    ax.set_xlabel("event time" + (" (UTC)" if datetime and events.time.tz else ""))
    more = [f"{len(matches):,} matches" if len(matches) == drawn
            else f"{drawn:,} of {len(matches):,} matches drawn"]
    if len(first_seen) > len(rows):
        more.append(f"{len(rows)} of {len(first_seen):,} partitions (most matches first)")
    ax.set_title((title + ": " if title else "") + "; ".join(more), fontsize=10)
    handles = [Line2D([], [], color="0.6", marker="|", linestyle="none", markersize=10,
                      label="event"),
               Patch(color="tab:blue", alpha=0.35, label="match (start to end)")]
    handles += [Line2D([], [], color=_COLOURS[j % len(_COLOURS)],
                       marker=_MARKERS[j % len(_MARKERS)], linestyle="none",
                       label=f"variable {v}") for j, v in enumerate(variables)]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8,
              frameon=False)
    ax.grid(axis="x", color="0.9")
    fig.subplots_adjust(left=0.16, right=0.84, top=1 - 0.45 / (height_px(len(rows)) / DPI),
                        bottom=0.75 / (height_px(len(rows)) / DPI))
    if path is not None:
        fig.savefig(path, dpi=DPI, format="png")
    return fig


__all__ = ["DPI", "INSTALL_HINT", "MAX_MATCHES", "WIDTH_PX", "height_px", "require_matplotlib",
           "timeline"]
