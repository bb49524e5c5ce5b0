"""``kleene run`` with several queries writes through ``QuerySetRuntime.push_to`` (one process,
with and without --stream): the bytes are those of the set's ``push`` list written whole, as
before (JSON Lines and CSV; Parquet the same rows)."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import kleene
from kleene.cli.main import _output_time, cli
from kleene.events.writers import open_writer

QUERIES = [
    # the runs plan (columns), the network (lists), the NFA (lists)
    "NAME st PATTERN SEQ(A a, B+ b[], C c) PARTITION BY src WITHIN 6 seconds "
    "USING strict-contiguity",
    "NAME ab PATTERN SEQ(A a, B b) PARTITION BY src WITHIN 4 seconds",
    "NAME bc PATTERN SEQ(B b, C c) PARTITION BY src WITHIN 4 seconds",
    "NAME kl PATTERN SEQ(A a, B+ b[], C c) WITHIN 5 seconds",
]


def _input(tmp_path: Path) -> Path:
    rng = random.Random(21)
    rows = ["id,ts,type,src"] + [f"r{i},{i // 2},{rng.choice('AABBC')},{rng.randint(1, 2)}"
                                 for i in range(160)]
    src = tmp_path / "in.csv"
    src.write_text("\n".join(rows) + "\n")
    return src


def _before(src: Path, fmt: str) -> bytes:
    """What the CLI wrote before push_to: the set's push list, written by one writer."""
    events, _ = kleene.read_events(str(src), id_col="id", time_unit="s")
    ms = kleene.compile_many(QUERIES).run(events)
    buf = io.StringIO()
    with open_writer(buf, fmt, _output_time(events.time, True)) as w:
        w.write(ms)
    return buf.getvalue().encode()


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
@pytest.mark.parametrize("stream", [False, True])
def test_set_output_is_byte_for_byte_as_before(tmp_path: Path, fmt: str, stream: bool) -> None:
    src = _input(tmp_path)
    files = []
    for i, q in enumerate(QUERIES):
        (tmp_path / f"q{i}.kleene").write_text(q + "\n")
        files.append(str(tmp_path / f"q{i}.kleene"))
    dest = tmp_path / f"out.{fmt}"
    args = ["run", *files, "-i", str(src), "--id-col", "id", "--time-unit", "s",
            "-o", str(dest), "--format", fmt, "-q"]
    if stream:
        args += ["--stream", "--batch-size", "16"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    got = dest.read_bytes()
    assert got == _before(src, fmt)
    assert got.count(b"\n") > 200 and (b'"st"' in got or b"\nst," in got)


def test_parquet_and_summary_counts(tmp_path: Path) -> None:
    src = _input(tmp_path)
    (tmp_path / "set.kleene").write_text("\n;\n".join(QUERIES) + "\n")
    dest = tmp_path / "out.parquet"
    res = CliRunner().invoke(cli, ["run", str(tmp_path / "set.kleene"), "-i", str(src),
                                   "--id-col", "id", "--time-unit", "s", "-o", str(dest),
                                   "--format", "parquet"])
    assert res.exit_code == 0, res.output
    events, _ = kleene.read_events(str(src), id_col="id", time_unit="s")
    ms = kleene.compile_many(QUERIES).run(events)
    table = pq.read_table(dest)
    assert table.column("query").to_pylist() == [m.query for m in ms]
    for name in ("st", "ab", "bc", "kl"):
        n = sum(m.query == name for m in ms)
        assert n and f"  {name:<13} {n:>12,}" in res.stderr, res.stderr
