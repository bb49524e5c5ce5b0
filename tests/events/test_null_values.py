"""``null_values`` / ``--null-values``: listed text values are NULL in every column, before
types are inferred, and counted (issue 16, item 3)."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import kleene
from kleene.cli.main import EXIT_INPUT, cli
from kleene.errors import InputError
from kleene.events.options import ReadOptions, null_values
from kleene.events.readers import read_events

DATA = Path(os.environ.get("KLEENE_SHARED_DATA", "/work/shared/data"))
GLUCOSE = DATA / "cgm_glucose" / "cgm_glucose.csv.gz"


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_the_list_forms() -> None:
    assert null_values("nil,NA,") == ("nil", "NA", "")
    assert null_values(["-", "?", "-"]) == ("-", "?")
    assert ReadOptions(null_values="nil").null_values == ("nil",)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be strings"):
        null_values([1])  # type: ignore[list-item]


def test_csv_values_become_null_in_every_column(tmp_path: Path) -> None:
    p = write(tmp_path / "e.csv", "ts,type,x,s\n1,A,1.5,a\n2,A,nil,nil\n3,A,-,b\n4,A,7,-\n")
    plain, _ = read_events(p)  # half the x values are not numbers: x is text
    assert plain.column("x").to_pylist() == ["1.5", "nil", "-", "7"]
    batch, report = read_events(p, null_values="nil,-")
    assert batch.column("x").to_pylist() == [1.5, None, None, 7.0]
    assert batch.column("s").to_pylist() == ["a", None, "b", None]
    assert report.nulled == 4 and report.bad_rows == 0


def test_nulls_come_before_type_inference(tmp_path: Path) -> None:
    """Without null_values half 'nil' makes x text; with them x is integers with NULLs."""
    p = write(tmp_path / "e.csv", "ts,type,x\n" + "".join(
        f"{i},A,{'nil' if i % 2 else i}\n" for i in range(10)))
    assert read_events(p)[0].column("x").type == "string"
    batch, _ = read_events(p, null_values=["nil"])
    assert batch.column("x").type == "int64"
    assert batch.column("x").to_pylist() == [None if i % 2 else i for i in range(10)]
    q = write(tmp_path / "f.csv", "ts,type,x\n1,A,1\n2,A,2\n3,A,nil\n")
    with pytest.raises(InputError, match="'nil' is not an integer"):
        read_events(q)


def test_a_null_time_or_type_is_a_bad_row_not_a_silent_drop(tmp_path: Path) -> None:
    p = write(tmp_path / "e.csv", "ts,type,x\n1,A,1\nnil,A,2\n3,nil,3\n")
    batch, report = read_events(p, null_values="nil", on_bad_row="skip")
    assert batch.ids.to_pylist() == [0] and report.skipped == 2
    assert [e.split(": ", 1)[1] for e in report.bad_examples] == [
        "missing timestamp", "missing event type"]


def test_jsonl_strings_become_null(tmp_path: Path) -> None:
    rows = [{"ts": 1, "type": "A", "v": 1, "s": "x"}, {"ts": 2, "type": "A", "v": "NA",
                                                       "s": "NA"},
            {"ts": 3, "type": "A", "v": 3, "s": "y"}]
    p = write(tmp_path / "e.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    batch, report = read_events(p, null_values=["NA"])
    assert batch.column("v").to_pylist() == [1, None, 3]
    assert batch.column("s").to_pylist() == ["x", None, "y"]
    assert report.nulled == 2


def test_match_takes_null_values(tmp_path: Path) -> None:
    p = write(tmp_path / "e.csv", "ts,type,x\n1,A,5\n2,A,nil\n3,A,9\n")
    out = kleene.match(p, "PATTERN SEQ(A a) WHERE a.x > 4", null_values="nil")
    assert out["a"].tolist() == [0, 2]


@pytest.mark.skipif(not GLUCOSE.exists(), reason="the glucose data is not here")
def test_glucose_isig_nil_with_the_cli() -> None:
    """The real glucose file has isig='nil' at 1,061 rows: a query reading isig fails without
    --null-values and, with it, matches what pandas counts with na_values=['nil']."""
    query = "PATTERN SEQ(G a) WHERE a.isig < 10 AND a.glucose < 70"
    args = ["run", query, "--input", str(GLUCOSE), "--time-col", "datetime",
            "--event-type", "G", "--count"]
    failed = CliRunner().invoke(cli, args)
    assert failed.exit_code == EXIT_INPUT and "'nil' is not a number" in failed.stderr
    assert "--null-values" in failed.stderr
    ok = CliRunner().invoke(cli, [*args, "--null-values", "nil"])
    assert ok.exit_code == 0, ok.stderr
    with gzip.open(GLUCOSE, "rt") as f:
        df = pd.read_csv(f, na_values=["nil"], keep_default_na=False)
    expected = int(((df.isig < 10) & (df.glucose < 70)).sum())
    assert df.isig.isna().sum() == 1_061
    assert int(ok.stdout) == expected
    assert "null values            1,061" in ok.stderr
