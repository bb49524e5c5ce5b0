"""Matches as data: :class:`Matches`, the list :meth:`kleene.CompiledQuery.run` returns, with
``to_arrow()``, ``to_pandas()`` and ``to_polars()``.

One row per match, in the output order: ``query``; ``start`` and ``end`` (timestamps when the
input's times are datetimes -- a datetime column, ISO-8601 text, or epoch numbers read with an
explicit unit on the command line --, else the numbers as read); one column per positive
variable, in pattern order, holding the event id it bound (a list of ids for a Kleene variable
or a variable inside a repeated group; null for a variable of an OR branch not taken); then one
column per RETURN value. A name already taken by an earlier column gets a ``values.`` prefix
(RETURN values) or ``match.`` prefix (variables), as in the CSV output.

Example:
    >>> import kleene
    >>> q = kleene.compile("PATTERN SEQ(A a, B+ b[]) WITHIN 10 seconds "
    ...                    "USING skip-till-next-match RETURN count(b) AS n")
    >>> events = kleene.EventBatch.from_records([
    ...     {"type": "A", "ts": 1}, {"type": "B", "ts": 2}, {"type": "B", "ts": 3}])
    >>> t = q.run(events).to_arrow()
    >>> t.column_names, t.to_pylist()[1]["b"], t.column("n").to_pylist()
    (['query', 'start', 'end', 'a', 'b', 'n'], [1, 2], [1, 2])
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

from ..errors import MissingExtraError
from .match import Match
from .model import TimeInfo


class Matches(list[Match]):
    """The matches of a run: a plain ``list`` of :class:`Match` (it compares equal to one),
    which also knows the input's time and the query's variables, so it converts to tables."""

    time: TimeInfo
    variables: tuple[tuple[str, bool], ...]
    """(name, binds a list) for every positive variable, in pattern order."""
    returns: tuple[str, ...]
    """The RETURN names, in order."""

    def __init__(self, matches: Iterable[Match] = (), *, time: TimeInfo | None = None,
                 variables: Sequence[tuple[str, bool]] = (),
                 returns: Sequence[str] = ()) -> None:
        super().__init__(matches)
        self.time = time or TimeInfo()
        self.variables = tuple(variables)
        self.returns = tuple(returns)

    def _columns(self) -> list[tuple[str, str, str]]:
        """(column name, what: fixed/var/value, source name) in output order."""
        cols: list[tuple[str, str, str]] = [("query", "fixed", "query"),
                                            ("start", "fixed", "start"),
                                            ("end", "fixed", "end")]
        taken = {"query", "start", "end"}
        if any(m.expired is not None for m in self):  # EMIT TIMEOUTS: null for a match
            cols.append(("expired", "fixed", "expired"))
            taken.add("expired")
        seen_vars = [v for v, _ in self.variables]
        for m in self:  # variables the query did not declare (a backend's extra binding)
            seen_vars += [v for v in m.bindings if v not in seen_vars]
        for v in seen_vars:
            name = v if v not in taken else f"match.{v}"
            cols.append((name, "var", v))
            taken.add(name)
        names = list(self.returns)
        for m in self:
            names += [k for k in m.values if k not in names]
        for k in names:
            name = k if k not in taken else f"values.{k}"
            cols.append((name, "value", k))
            taken.add(name)
        return cols

    def to_arrow(self) -> pa.Table:
        """The matches as a :class:`pyarrow.Table` (see the module docstring for the columns)."""
        is_list = dict(self.variables)
        arrays: dict[str, pa.Array] = {}
        for name, what, src in self._columns():
            if what == "fixed":
                arrays[name] = self._fixed(src)
            elif what == "var":
                values: list[Any] = [_ids(m.bindings.get(src)) for m in self]
                if is_list.get(src, False):
                    values = [None if v is None else (v if isinstance(v, list) else [v])
                              for v in values]
                arrays[name] = _array(values, pa.list_(pa.int64()) if is_list.get(src, False)
                                      else pa.int64())
            else:
                arrays[name] = _array([m.values.get(src) for m in self], None)
        return pa.table(arrays)

    def _fixed(self, name: str) -> pa.Array:
        if name == "query":
            return pa.array([m.query for m in self], pa.string())
        micros = [m.start if name == "start" else m.end if name == "end" else m.expired
                  for m in self]
        if self.time.kind == "datetime":
            return pa.array(micros, pa.int64()).cast(
                pa.timestamp("us", "UTC" if self.time.tz else None))
        out = [None if us is None else self.time.to_output(us) for us in micros]
        return pa.array(out, pa.float64() if any(isinstance(v, float) for v in out)
                        else pa.int64())

    def to_pandas(self) -> Any:
        """The matches as a pandas DataFrame (needs pandas): timestamps as ``datetime64``,
        variable ids as Python ints (lists of ints for Kleene variables)."""
        try:
            import pandas as pd
        except ImportError:
            raise MissingExtraError("Matches.to_pandas() needs pandas: pip install pandas "
                                    "(or use to_arrow())") from None
        table = self.to_arrow()
        df = table.to_pandas()
        for i, field in enumerate(table.schema):
            if pa.types.is_list(field.type):  # numpy arrays -> Python lists
                df[field.name] = pd.Series(table.column(i).to_pylist(), index=df.index,
                                           dtype=object)
        return df

    def to_polars(self) -> Any:
        """The matches as a polars DataFrame (needs polars)."""
        try:
            import polars as pl
        except ImportError:
            raise MissingExtraError("Matches.to_polars() needs polars: pip install polars "
                                    "(or use to_arrow())") from None
        return pl.from_arrow(self.to_arrow())


def _ids(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def _array(values: list[Any], typ: pa.DataType | None) -> pa.Array:
    """Values as an Arrow array: ``typ`` when they fit it (ids may be strings), else inferred,
    else JSON text (as the Parquet writer does)."""
    if typ is not None:
        try:
            return pa.array(values, typ)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            pass
    try:
        return pa.array(values)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return pa.array([None if v is None else json.dumps(v, default=str) for v in values],
                        pa.string())


__all__ = ["Matches"]
