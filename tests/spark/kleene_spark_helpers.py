"""Shared helpers for the Spark tests: run a query embedded and on Spark, as JSON Lines."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import kleene
from kleene.events import EventBatch
from kleene.events.writers import match_line
from kleene.spark.tasks import END_US, LAST_POS, SEQ

SCHEMA = "ts long, type string, k string, x long"
QUERY_SET = {
    "keyed": "PATTERN SEQ(A a, B b) WHERE b.x > a.x PARTITION BY k WITHIN 5 seconds "
             "RETURN a.x AS ax",
    "other": "PATTERN AND(B b, C c) WHERE [k] WITHIN 4 seconds",
    "global": "PATTERN SEQ(C c, A a) WHERE a.x < 3 WITHIN 3 seconds",
    "kleene": "PATTERN SEQ(A a, C+ c[]) PARTITION BY k WITHIN 3 seconds",
}
"""A query set for the Spark set tests: different keys (k, none) and plans (keyed, time split /
one task), a RETURN column one query has, AND and Kleene."""


def embedded_lines(query: str, rows: Sequence[dict[str, Any]], engine: str) -> list[str]:
    """The embedded engine's JSON Lines for ``rows`` (ids = row index)."""
    batch = EventBatch.from_records(rows)
    return [match_line(m, batch.time) for m in kleene.compile(query, engine=engine).run(batch)]


def spark_lines(spark: Any, query: str, rows: Sequence[dict[str, Any]], *,
                schema: str = SCHEMA, **options: Any) -> list[str]:
    """kleene.spark.match over the same rows, sorted into the documented order."""
    from kleene.spark import match

    cols = [c.split()[0] for c in schema.split(",")]
    df = spark.createDataFrame([tuple(r.get(c) for c in cols) for r in rows], schema)
    m = match(df, query, time_col="ts", type_col="type", output="json", **options)
    return [r[0] for r in m.orderBy(END_US, LAST_POS, SEQ).select("record").collect()]


def random_rows(seed: int, n: int = 40, keys: int = 3, types: str = "ABC") -> list[dict[str, Any]]:
    """A random stream: integer seconds with ties, a few keys and types, small integers."""
    rnd = random.Random(seed)
    ts = 0
    rows = []
    for _ in range(n):
        ts += rnd.choice([0, 1, 1, 2, 3])
        rows.append({"ts": ts, "type": rnd.choice(types), "k": f"k{rnd.randrange(keys)}",
                     "x": rnd.randrange(10)})
    return rows
