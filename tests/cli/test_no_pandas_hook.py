"""``kleene`` (the console process) keeps pyarrow from importing pandas for kleene's own code,
and leaves every other import of pandas alone (a --udf may use it, pyarrow's own conversions
to pandas still work)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

RUN = """
import sys
from kleene.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    assert not e.code, e.code
print("PANDAS", "pandas" in sys.modules)
"""


def _run(tmp_path: Path, *args: str) -> list[str]:
    (tmp_path / "ev.csv").write_text("id,ts,price\n0,2024-01-01T00:00:00,1\n"
                                     "1,2024-01-01T00:00:01,3\n")
    done = subprocess.run([sys.executable, "-c", RUN, "run", *args, "--input", "ev.csv",
                           "--time-col", "ts", "--event-type", "Stock", "--id-col", "id", "-q"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_a_run_does_not_import_pandas(tmp_path: Path) -> None:
    out = _run(tmp_path, "PATTERN SEQ(Stock a, Stock b) WHERE b.price > a.price")
    assert out == [
        '{"query": "query", "match": {"a": 0, "b": 1}, "start": "2024-01-01T00:00:00", '
        '"end": "2024-01-01T00:00:01", "values": {}}',
        "PANDAS False",
    ]


def test_a_udf_may_import_pandas(tmp_path: Path) -> None:
    (tmp_path / "pdudf.py").write_text(
        "def dbl(x):\n    import pandas as pd\n    return float(pd.Series([x]).iloc[0]) * 2\n")
    out = _run(tmp_path, "PATTERN SEQ(Stock a, Stock b) WHERE b.price > dbl(a.price)",
               "--udf", "pdudf:dbl")
    assert out[-1] == "PANDAS True"
    assert out[0].startswith('{"query": "query", "match": {"a": 0, "b": 1}')


@pytest.mark.parametrize("extra", [(), ("--stream",), ("--format", "csv"),
                                   ("--format", "parquet", "--output", "o.parquet")])
def test_a_run_with_a_type_column_does_not_import_pandas(tmp_path: Path,
                                                          extra: tuple[str, ...]) -> None:
    """The reader's ``pc.equal(types, "")`` (a compute wrapper given a Python scalar) made
    pyarrow import pandas in every run with a type column, past session 10's import hook."""
    (tmp_path / "ev.csv").write_text("ts,type,x\n1,A,1\n2,B,2\n3,B,3\n")
    done = subprocess.run([sys.executable, "-c", RUN, "run", "PATTERN SEQ(A a, B b)",
                           "--input", "ev.csv", "-q", *extra],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "PANDAS False"
    if "o.parquet" in extra:
        assert pq.read_table(tmp_path / "o.parquet").num_rows == 2


def test_pyarrow_still_converts_to_pandas_after_a_run(tmp_path: Path) -> None:
    """pyarrow's one look for pandas found none during the run; a conversion that needs
    pandas afterwards imports it (pyarrow retries then)."""
    (tmp_path / "ev.csv").write_text("ts,type,x\n1,A,1\n2,B,2\n")
    code = RUN + "import pyarrow as pa\nprint(type(pa.table({'x': [1]}).to_pandas()).__name__)\n"
    done = subprocess.run([sys.executable, "-c", code, "run", "PATTERN SEQ(A a, B b)",
                           "--input", "ev.csv", "-q"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == ["PANDAS False", "DataFrame"]
