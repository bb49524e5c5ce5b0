"""Every conformance case (tests/semantics) on Spark equals the embedded automaton engine.

All cases run in ONE Spark job (a union of one ``kleene.spark.match`` per case), so the ~150
cases cost seconds, not minutes. Each case keeps its own execution shape (keyed, split with
forced ranges, single); event ids are the case's event names (``a1``, ``b2``).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute
import pytest

import kleene
from kleene.errors import KleeneError
from kleene.events.model import ID, TS, TYPE
from kleene.spark import match
from kleene.spark.tasks import END_US, LAST_POS, SEQ
from kleene.testing.timeline import Case

pytestmark = pytest.mark.spark

SEMANTICS = Path(__file__).resolve().parent.parent / "semantics"


def _cases() -> list[Case]:
    out: list[Case] = []
    for path in sorted(SEMANTICS.glob("test_*.py")):
        spec = importlib.util.spec_from_file_location(f"_kleene_sem_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(mod)
        except Exception:  # noqa: BLE001 - a module that cannot load is its own test's failure
            continue
        for value in vars(mod).values():
            if isinstance(value, list) and value and all(isinstance(c, Case) for c in value):
                out.extend(value)
    return out


def _key(record: str) -> tuple[str, str]:
    r = json.loads(record)
    return json.dumps(r["match"], sort_keys=False), json.dumps(r["values"], sort_keys=True)


def test_every_conformance_case_on_spark_equals_the_embedded_engine(spark: Any) -> None:
    from pyspark.sql import functions as F

    from kleene.events import EventBatch
    from kleene.events.writers import match_line

    cases = _cases()
    assert len(cases) >= 50, "the conformance suite should have many cases"
    runnable = []
    for i, c in enumerate(cases):
        try:
            kleene.compile(c.query).run(c.stream)
        except KleeneError:
            continue  # not supported by the engine yet: the conformance suite reports it
        t = c.stream.table
        runnable.append((i, t.append_column("case", pa.array([i] * t.num_rows, pa.int64()))
                         .append_column("_kord", pa.array(range(t.num_rows), pa.int64()))))
    assert len(runnable) >= 50
    # one DataFrame for every case (attribute types unified), then one match() per case
    big = pa.concat_tables([t for _, t in runnable], promote_options="permissive")
    big = big.rename_columns(["_kid" if n == ID else "_kts" if n == TS else
                              "_ktype" if n == TYPE else n for n in big.column_names])
    all_df = spark.createDataFrame(big).cache()
    expected: dict[int, list[tuple[str, str]]] = {}
    frames = []
    for i, _ in runnable:
        c = cases[i]
        part = big.filter(pa.compute.equal(big.column("case"), i)).drop_columns(["case"])
        events = EventBatch(part.rename_columns(
            [ID if n == "_kid" else TS if n == "_kts" else TYPE if n == "_ktype" else n
             for n in part.column_names]).drop_columns(["_kord"]), c.stream.time)
        expected[i] = [_key(match_line(m, events.time))
                       for m in kleene.compile(c.query).run(events)]
        df = all_df.where(F.col("case") == i).drop("case")
        m = match(df, c.query, time_col="_kts", type_col="_ktype", id_col="_kid",
                  order_col="_kord", time_unit="us", output="json", partitions=1, ranges=3)
        frames.append(m.withColumn("case", F.lit(i)))
    while len(frames) > 1:  # a balanced tree: a chain of unions is re-analysed per step
        frames = [frames[k].unionByName(frames[k + 1]) if k + 1 < len(frames) else frames[k]
                  for k in range(0, len(frames), 2)]
    union = frames[0]
    got: dict[int, list[tuple[str, str]]] = {i: [] for i in expected}
    for row in union.orderBy("case", END_US, LAST_POS, SEQ).select("case", "record").collect():
        got[row["case"]].append(_key(row["record"]))
    all_df.unpersist()
    bad = [cases[i].name for i in expected if got[i] != expected[i]]
    assert not bad, f"Spark differs from the embedded engine on: {bad}"
    assert sum(len(v) for v in expected.values()) >= 100  # the cases do match things
