"""The Spark pipeline as a backend: ``(AnalyzedQuery, EventBatch) -> list[Match]``.

Runs one bounded batch through :func:`kleene.spark.match` on the active (or a new local)
SparkSession and returns the matches in kleene's documented order, so the Spark path can join any
suite that runs backends. Each call is a Spark job (about a second): for many small cases at once,
see tests/spark/test_conformance.py, which runs every conformance case in one job.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from ..events import EventBatch, Match
from ..events.model import ID, TS, TYPE
from ..semantic.analyzed import AnalyzedQuery, VarKind
from .tasks import END_US, LAST_POS, SEQ


def evaluate(analyzed: AnalyzedQuery, events: EventBatch, **options: Any) -> list[Match]:
    """Evaluate on Spark (keyed / split / single as :func:`kleene.spark.explain` says)."""
    from .batch import match
    from .session import get_session

    spark = get_session()
    t = events.table
    t = (t.rename_columns(["_kid" if n == ID else "_kts" if n == TS else
                           "_ktype" if n == TYPE else n for n in t.column_names])
         .append_column("_kord", pa.array(range(t.num_rows), pa.int64())))
    if t.num_rows == 0:
        return []
    df = spark.createDataFrame(t)
    out = match(df, analyzed, time_col="_kts", type_col="_ktype", id_col="_kid",
                order_col="_kord", time_unit="us", output="json", **options)
    lists = {v.name for v in analyzed.variables.values() if v.kind is VarKind.LIST}
    result = []
    for row in out.orderBy(END_US, LAST_POS, SEQ).select("record").collect():
        r = json.loads(row[0])
        bindings = {k: tuple(v) if k in lists else v for k, v in r["match"].items()}
        result.append(Match(r["query"], bindings, int(r["start"]), int(r["end"]),
                            r["values"]))
    return result


__all__ = ["evaluate"]
