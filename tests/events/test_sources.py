"""The Source seam: every format is a module with a FileSource subclass plus one registry line.

``PipeSource`` below is the "adding a source" example of docs/architecture.md: a new format
(pipe-separated values) registered in one line gets the shared type decisions, bad-row policy,
ordering and ids of every other source.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from kleene.errors import InputError
from kleene.events.options import ReadOptions
from kleene.events.readers import read_events
from kleene.events.sources import FILE_SOURCES, FileSource, Raw, Source, detect_format, open_source
from kleene.events.sources.base import Raw as BaseRaw


class PipeSource(FileSource):
    """Pipe-separated values: a header line, then one row per line, every column as text."""

    format = "psv"
    extensions = (".psv",)

    def chunks(self) -> Iterator[Raw]:
        with open(self.path, encoding="utf-8") as f:
            names = f.readline().rstrip("\n").split("|")
            rows = [line.rstrip("\n").split("|") for line in f if line.strip()]
        table = pa.table({n: pa.array([r[i] for r in rows], pa.string())
                          for i, n in enumerate(names)})
        yield Raw(table, np.arange(len(rows), dtype=np.int64), frozenset(names), [], len(rows))


@pytest.fixture
def psv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(FILE_SOURCES, "psv", PipeSource)  # the one registry line


def test_a_new_format_is_one_class_and_one_registry_line(psv: None, tmp_path: Path) -> None:
    rows = [("3", "B", "2.5"), ("1", "A", "abc"), ("2", "A", "7")]
    (tmp_path / "e.psv").write_text("ts|type|x\n" + "".join("|".join(r) + "\n" for r in rows))
    (tmp_path / "e.csv").write_text("ts,type,x\n" + "".join(",".join(r) + "\n" for r in rows))
    assert detect_format(str(tmp_path / "e.psv")) == "psv"
    got, report = read_events(str(tmp_path / "e.psv"), on_bad_row="skip")
    want, want_report = read_events(str(tmp_path / "e.csv"), on_bad_row="skip")
    # the shared steps apply: x typed as float by inference, 'abc' skipped as a bad row with
    # its row kept in the message, events ordered by time with ids = input rows
    assert got.table.equals(want.table)
    assert got.ids.to_pylist() == [2, 0]
    assert (report.format, report.events, report.skipped) == ("psv", 2, 1)
    assert report.bad_examples == tuple(e.replace("e.csv", "e.psv")
                                        for e in want_report.bad_examples)
    assert "row 2, column 'x'" in report.bad_examples[0]


def test_unregistered_format_is_named_in_the_error(tmp_path: Path) -> None:
    (tmp_path / "e.psv").write_text("ts|type\n1|A\n")
    with pytest.raises(InputError, match=r"unknown file format \.psv; .*"
                                         r"--input-format csv\|jsonl\|parquet"):
        read_events(str(tmp_path / "e.psv"))


def test_every_source_satisfies_the_protocol(tmp_path: Path) -> None:
    (tmp_path / "e.csv").write_text("ts,type\n1,A\n")
    sources = [open_source(str(tmp_path / "e.csv"), _opts(), []),
               open_source(pa.table({"ts": [1], "type": ["A"]}), _opts(), []),
               open_source([{"ts": 1, "type": "A"}], _opts(), [])]
    assert [s.format for s in sources] == ["csv", "arrow", "records"]
    for s in sources:
        assert isinstance(s, Source)
        chunks = list(s.chunks())
        assert all(isinstance(c, BaseRaw) for c in chunks)
        assert sum(c.rows for c in chunks) == 1


def _opts() -> ReadOptions:
    return ReadOptions()
