"""Issue 17: a UDF whose module only the driver can import (``--udf mod:f`` next to the query)
runs on Spark: kleene ships the module to the workers (kleene.spark.ship); a worker that still
cannot import it fails with one line naming the module (exit 3), not a traceback.

The session's workers started before these tests, in another directory: a module written to
``tmp_path`` is on the driver's path only (the CLI adds the working directory; the API test
adds ``tmp_path``), never on the workers'."""

from __future__ import annotations

import importlib
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import kleene
from kleene.cli.main import cli

pytestmark = pytest.mark.spark

UDF = "def close(x, y):\n    return abs(x - y) <= 1\n"
QUERY = "PATTERN SEQ(A a, B b) WHERE close(a.x, b.x) PARTITION BY k WITHIN 5 seconds"
ROWS = [(i, "AB"[i % 2], f"k{i % 3}", (i * 7) % 5) for i in range(40)]


@pytest.fixture
def driver_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh module name; ``tmp_path`` is the working directory and on the driver's path."""
    name = f"kleene_udf_{uuid.uuid4().hex[:10]}"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    yield name
    for mod in [m for m in sys.modules if m.split(".")[0].startswith("kleene_udf_")
                or m.startswith("kleene_helper_")]:
        del sys.modules[mod]


def _input(tmp_path: Path) -> str:
    src = tmp_path / "e.csv"
    src.write_text("ts,type,k,x\n" + "".join(f"{t},{ty},{k},{x}\n" for t, ty, k, x in ROWS))
    return str(src)


def _cli(*args: str) -> Any:
    return CliRunner().invoke(cli, ["run", *args, "--quiet"])


@pytest.mark.parametrize("layout", ["module", "package", "vectorized"])
def test_cli_udf_module_only_the_driver_sees_runs_on_spark(spark: Any, tmp_path: Path,
                                                          driver_only: str,
                                                          layout: str) -> None:
    if layout == "module":
        (tmp_path / f"{driver_only}.py").write_text(UDF)
        spec = f"{driver_only}:close"
    elif layout == "vectorized":  # kleene.udf(vectorized=True): over pyarrow arrays
        (tmp_path / f"{driver_only}.py").write_text(
            "import pyarrow.compute as pc\n\ndef close(x, y):\n"
            "    return pc.less_equal(pc.abs(pc.subtract(x, y)), 1)\n")
        spec = f"{driver_only}:close:vectorized"
    else:  # the function in a submodule: the whole top-level package is shipped
        pkg = tmp_path / driver_only
        pkg.mkdir()
        (pkg / "__init__.py").write_text("")
        (pkg / "funcs.py").write_text(UDF)
        spec = f"{driver_only}.funcs:close:pure"
    src = _input(tmp_path)
    embedded = _cli(QUERY, "--input", src, "--udf", spec)
    assert embedded.exit_code == 0, embedded.output
    assert embedded.stdout.count("\n") >= 5
    on_spark = _cli(QUERY, "--input", src, "--udf", spec, "--spark")
    assert on_spark.exit_code == 0, on_spark.output
    assert on_spark.stdout == embedded.stdout


def test_api_udf_from_a_driver_only_module(spark: Any, tmp_path: Path,
                                          driver_only: str) -> None:
    import kleene.spark as ks
    from kleene.spark.tasks import END_US, LAST_POS, SEQ

    (tmp_path / f"{driver_only}.py").write_text(UDF)
    mod = importlib.import_module(driver_only)
    udfs = {"close": mod.close}
    df = spark.createDataFrame(ROWS, "ts long, type string, k string, x long")
    m = ks.match(df, QUERY, time_col="ts", type_col="type", udfs=udfs)
    got = [(r["match"]["a"], r["match"]["b"]) for r in m.orderBy(END_US, LAST_POS, SEQ).collect()]
    batch = kleene.EventBatch.from_records(
        [{"ts": t, "type": ty, "k": k, "x": x} for t, ty, k, x in ROWS])
    expected = [([m.bindings["a"]], [m.bindings["b"]])
                for m in kleene.compile(QUERY, udfs=udfs).run(batch)]
    assert len(expected) >= 5 and got == expected


def test_a_worker_that_cannot_import_the_udf_module_is_one_line(spark: Any, tmp_path: Path,
                                                               driver_only: str) -> None:
    # the UDF module is shipped, but what it imports is on the driver's path only
    helper = f"kleene_helper_{uuid.uuid4().hex[:10]}"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / f"{helper}.py").write_text("LIMIT = 1\n")
    sys.path.insert(0, str(elsewhere))  # undone with sys.path by the fixture
    (tmp_path / f"{driver_only}.py").write_text(
        f"import {helper}\n\ndef close(x, y):\n    return abs(x - y) <= {helper}.LIMIT\n")
    src = _input(tmp_path)
    assert _cli(QUERY, "--input", src, "--udf", f"{driver_only}:close").exit_code == 0
    res = _cli(QUERY, "--input", src, "--udf", f"{driver_only}:close", "--spark")
    assert res.exit_code == 3, res.output
    assert "Traceback" not in res.output
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("kleene: runtime error")]
    assert errors == [
        f"kleene: runtime error: UDF module '{driver_only}' cannot be imported on the Spark "
        f"workers (ModuleNotFoundError: No module named '{helper}'); kleene sends a UDF's own "
        "module or package to the workers, but what it imports must be installed there (or "
        "added with spark-submit --py-files)"], res.stderr


def test_stream_udf_from_a_driver_only_module(spark: Any, tmp_path: Path,
                                             driver_only: str) -> None:
    import json

    import kleene.spark as ks

    (tmp_path / f"{driver_only}.py").write_text(UDF)
    mod = importlib.import_module(driver_only)
    udfs = {"close": mod.close}
    src = tmp_path / "in"
    src.mkdir()
    rows = [{"id": i, "ts": t, "type": ty, "k": k, "x": x} for i, (t, ty, k, x) in enumerate(ROWS)]
    end = {"id": 999, "ts": 10_000, "type": "END", "k": "k9", "x": 0}  # moves the watermark
    (src / "p0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*rows, end]))
    sdf = spark.readStream.schema("id long, ts long, type string, k string, x long").json(str(src))
    m = ks.match_stream(sdf, QUERY, watermark="1 seconds", time_col="ts", type_col="type",
                        id_col="id", udfs=udfs)
    out = tmp_path / "out"
    (m.writeStream.format("json").option("checkpointLocation", str(tmp_path / "ck"))
     .option("path", str(out)).trigger(availableNow=True).start().awaitTermination())
    got = spark.read.schema("kind string, match map<string, array<bigint>>").json(str(out))
    found = sorted((r["match"]["a"][0], r["match"]["b"][0])
                   for r in got.where("kind = 'match'").collect())
    batch = kleene.EventBatch.from_records(
        [{"ts": t, "type": ty, "k": k, "x": x} for t, ty, k, x in ROWS])
    expected = sorted((m.bindings["a"], m.bindings["b"])
                      for m in kleene.compile(QUERY, udfs=udfs).run(batch))
    assert len(expected) >= 5 and found == expected
