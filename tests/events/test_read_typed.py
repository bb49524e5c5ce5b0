"""The typed CSV parse (issue 18): once the first block has decided the column types, later
blocks are parsed by Arrow straight to int64, float64 and ISO-8601 timestamps. It must change
speed only: every value it takes is the value the text conversion gives, and a file read with
it gives the same events, report, bad rows and messages as one read without it."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kleene.errors import InputError
from kleene.events import convert, decisions
from kleene.events.convert import convert_column
from kleene.events.readers import read_events
from kleene.events.sources import csvfile

LONG = int(os.environ.get("KLEENE_FUZZ_EXAMPLES", "0"))
"""A long run sets KLEENE_FUZZ_EXAMPLES (as for tests/events/test_fuzz_reader.py)."""
NAIVE, ZONED = pa.timestamp("us"), pa.timestamp("us", "UTC")
TRICKY: dict[pa.DataType, list[str]] = {
    pa.int64(): ["5", "+5", " 5", "5 ", "\t5", "-0", "0x10", "1.0", "1e3", "007",
                 "9223372036854775807", "9223372036854775808", "-9223372036854775809",
                 "٣", "００1", "5\u00a0", "NA", "nan", "null", "-", "+", "1 2", "True"],
    pa.float64(): ["1.5", " 1.5", "1.5 ", "1e400", "-1e400", "1e-400", "nan", "NaN", " nan",
                   "inf", "Inf", "-inf", "Infinity", "INF", "1,5", ".5", "5.", "+.5", "1e",
                   "0x1p3", "1_000", "1.5\u00a0", "-nan", "4.9e-324", "1" * 40, "1d5"],
    NAIVE: ["2020-01-01", "2020-01-01T00:00:00", "2020-01-01 00:00:00", " 2020-01-01 00:00:00",
            "2020-01-01 00:00:00 ", "2020-01-01T00:00:00Z", "2020-01-01T00:00:00+01:00",
            "2020-01-01T00:00:00.1234567", "2020-01-01T00:00:00.123456", "2020-01-01T00:00:00.1",
            "2020-01-01T00:00", "2020-01-01T00", "2020-01-01 00:00:00,5", "2020-1-1", "20200101",
            "2020-01-01T24:00:00", "2020-02-30", "2020-01-01T00:00:60", "1900-01-01",
            "9999-12-31T23:59:59.999999", "0001-01-01", "2020-01-01T00:00:00.", "2020-W01",
            "2020-01-01T00:00:00-0500", "2020-01-01T00:00:00.000000000", "1583020800"],
}
TRICKY[ZONED] = TRICKY[NAIVE] + [
    "2020-01-01T00:00:00-05:00", "2020-01-01T00:00:00+0530", "2020-01-01T00:00:00z",
    "2020-01-01T00:00:00 Z", "2020-01-01T00:00:00+01", "2020-01-01T00:00:00.5Z",
    " 2020-01-01T00:00:00Z"]


def _same(a: Any, b: Any) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a)
                      and math.isnan(b))


def _check_value(text: str, target: pa.DataType) -> bool:
    """Parse one cell both ways; True when the typed parse took it. Fails the test when the
    typed parse takes a value the text conversion rejects or reads otherwise."""
    parser = csvfile._Parser(["x"], ",")
    parser.types = {"x": target}
    chunk = b'"' + text.replace('"', '""').encode() + b'"\n'
    raw = parser.typed(chunk, 0)
    if raw is None:
        return False
    typed = raw.table.column("x").combine_chunks()
    assert raw.text is not None
    as_text = raw.text().column("x").combine_chunks()
    ref, errors = convert_column(as_text, target, "x", True)
    assert errors == [], (text, target, typed.to_pylist())
    assert typed.type == ref.type
    assert _same(typed[0].as_py(), ref[0].as_py()), (text, target)
    return True


@pytest.mark.parametrize("target", list(TRICKY), ids=str)
def test_typed_parse_takes_only_what_the_text_conversion_reads_alike(
        target: pa.DataType) -> None:
    took = [v for v in TRICKY[target] if _check_value(v, target)]
    # it is a real fast path: the plain forms go through it
    plain = {pa.int64(): "5", pa.float64(): "1.5", NAIVE: "2020-01-01 00:00:00",
             ZONED: "2020-01-01T00:00:00Z"}[target]
    assert plain in took


@settings(max_examples=LONG or 150, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=st.text(st.sampled_from("0123456789+-.eEnaifINTZT:x ,\t\u00a0\u0663"), max_size=26),
       target=st.sampled_from(list(TRICKY)))
def test_typed_parse_is_exact_on_random_text(text: str, target: pa.DataType) -> None:
    _check_value(text, target)


# -- whole files: typed parse on and off give the same reading --------------------------------

TIMES = {
    "naive": lambda i: f"2024-01-02 09:{i // 60 % 60:02d}:{i % 60:02d}",
    "fraction": lambda i: f"2024-01-02T09:30:{i % 60:02d}.{i % 1000:03d}",
    "zoned": lambda i: f"2024-01-02T09:30:{i % 60:02d}+01:00",
    "epoch": lambda i: str(1_700_000_000 + i),
    "epoch-float": lambda i: f"{1_700_000_000 + i}.5",
}
ODD_CELLS = ["", "NA", "abc", " 7", "7 ", "2.5", "1e3", '"q,q"', "nan", "x\u00a0"]


@st.composite
def csv_files(draw: st.DrawFn) -> tuple[str, bytes]:
    mode = draw(st.sampled_from(sorted(TIMES)))
    n = draw(st.integers(30, 160))
    lines = ["ts,type,n,f,s"]
    for _ in range(n):
        ts = TIMES[mode](draw(st.integers(0, 5000)))
        cells = [ts, draw(st.sampled_from(["A", "B"])), str(draw(st.integers(-99, 99))),
                 repr(draw(st.floats(-1e6, 1e6, allow_nan=False))), draw(st.sampled_from(
                     ["a", "b", "c d"]))]
        if draw(st.integers(0, 9)) == 0:  # a cell or line that is odd
            kind = draw(st.sampled_from(["cell", "ts", "blank", "ragged", "quote"]))
            if kind == "cell":
                cells[draw(st.integers(1, 4))] = draw(st.sampled_from(ODD_CELLS))
            elif kind == "ts":
                cells[0] = draw(st.sampled_from(["", "soon", " " + ts, "2024-01-02T09:30:00Z",
                                                 "2024-01-02", "1700000000"]))
            elif kind == "blank":
                lines.append("")
            elif kind == "ragged":
                cells.append("extra")
            else:
                cells[4] = '"said ""hi"""'
        lines.append(",".join(cells))
    return mode, ("\n".join(lines) + "\n").encode()


def _read(path: Path, monkeypatch: pytest.MonkeyPatch, *, typed: bool,
          **kw: Any) -> tuple[str, Any]:
    with monkeypatch.context() as m:
        if not typed:
            m.setattr(csvfile._Parser, "typed", lambda self, chunk, start: None)
        try:
            batch, report = read_events(str(path), **kw)
        except InputError as e:
            return "error", str(e)
    return "ok", (batch.table, batch.time, report)


@settings(max_examples=LONG or 60, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=csv_files(), block=st.integers(256, 2048), batch=st.integers(7, 100))
def test_a_file_reads_the_same_with_and_without_the_typed_parse(
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
        case: tuple[str, bytes], block: int, batch: int) -> None:
    mode, data = case
    d = tmp_path_factory.mktemp("typed")
    path = d / "e.csv"
    path.write_bytes(data)
    kw: dict[str, Any] = {"block_bytes": block, "batch_size": batch}
    if mode.startswith("epoch"):
        kw["time_unit"] = "s"
    for policy in ("fail", "skip", "dead-letter"):
        results = []
        for typed in (True, False):
            dead = d / f"dead-{typed}.jsonl"
            on_bad = f"dead-letter={dead}" if policy == "dead-letter" else policy
            kind, got = _read(path, monkeypatch, typed=typed, on_bad_row=on_bad, **kw)
            letters = dead.read_text() if policy == "dead-letter" else ""
            results.append((kind, got, letters))
        (k1, g1, l1), (k2, g2, l2) = results
        assert k1 == k2
        if k1 == "error":
            assert g1 == g2  # the same one-line message
            continue
        assert g1[0].equals(g2[0]), (mode, policy)
        assert g1[1] == g2[1] and g1[2] == g2[2]
        assert l1 == l2


def test_clean_blocks_after_the_first_take_the_typed_parse(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "e.csv"
    path.write_text("ts,type,n,f\n" + "".join(
        f"2024-01-02T09:{i // 60:02d}:{i % 60:02d}.{i % 1000:03d},A,{i},{i / 4}\n"
        for i in range(2000)))
    taken: list[int] = []
    real = csvfile._Parser.typed

    def counting(self: Any, chunk: bytes, start: int) -> Any:
        raw = real(self, chunk, start)
        if raw is not None:
            taken.append(raw.rows)
        return raw

    monkeypatch.setattr(csvfile._Parser, "typed", counting)
    batch, report = read_events(str(path), block_bytes=4096)
    assert report.events == 2000 and report.bad_rows == 0
    assert sum(taken) > 1500  # every block but the first
    assert batch.column("n").to_pylist() == list(range(2000))
    assert batch.column("f").type == pa.float64()
    assert batch.column("ts").type == pa.timestamp("us")
    assert batch.ts[1] - batch.ts[0] == 1_001_000


def test_a_bad_row_in_a_typed_block_is_reported_from_its_text(tmp_path: Path) -> None:
    rows = [f"2024-01-02 09:30:{i % 60:02d},A,{i}" for i in range(400)]
    rows[300] = "2024-01-02 09:35:00,,7"  # no type: the typed parse takes it; the event is bad
    path = tmp_path / "e.csv"
    path.write_text("ts,type,n\n" + "\n".join(rows) + "\n")
    with pytest.raises(InputError) as e:
        read_events(str(path), block_bytes=1024)
    assert str(e.value) == f"{path}, row 301, column 'type': missing event type"
    dead = tmp_path / "dead.jsonl"
    batch, report = read_events(str(path), block_bytes=1024, on_bad_row=f"dead-letter={dead}")
    assert report.dead_lettered == 1 and report.events == 399
    assert '"record": {"ts": "2024-01-02 09:35:00", "type": null, "n": "7"}' in dead.read_text()


@pytest.mark.parametrize("bad", [b"0,A", b"0,A,0\xe9", b"0,A,0,extra", b'0,"A,0'])
@pytest.mark.parametrize("at", [30_000, 35_000, 39_990])
def test_a_block_split_in_halves_reads_like_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 bad: bytes, at: int) -> None:
    # a block over 64 KiB that Arrow refuses is parsed again in halves; with the bad line in
    # the second half (at 35_000 and 39_990), the typed parse took the clean first half and the text
    # path the other, and the two tables did not concatenate (found by the fuzz test)
    lines = [b"%d,A,%d" % (i, i % 7) for i in range(40_000)]
    lines[at] = bad
    path = tmp_path / "e.csv"
    path.write_bytes(b"ts,type,x\n" + b"\n".join(lines) + b"\n")
    kw: dict[str, Any] = {"block_bytes": 1 << 17, "batch_size": 5, "on_bad_row": "skip"}
    kind, got = _read(path, monkeypatch, typed=True, **kw)
    assert kind == "ok", got
    table, _, report = got
    assert report.events == 39_999 and report.skipped == 1
    assert table.column("__id").to_pylist() == [i for i in range(40_000) if i != at]
    assert table.column("x").type == pa.int64()
    kind, untyped = _read(path, monkeypatch, typed=False, **kw)
    assert kind == "ok" and untyped[0].equals(table) and untyped[2] == report


# ------------------------------------------------------------------ the first block's sample
def _read_sampled(path: Path, monkeypatch: pytest.MonkeyPatch, *, sample: bool,
                  infer: int | None = None, **kw: Any) -> tuple[str, Any, int]:
    """A read with the first block's sample (its types decided by its first lines, then the
    block parsed straight to them) on or off, and how many samples decided."""
    taken = []
    with monkeypatch.context() as m:
        if infer is not None:  # a small INFER_ROWS, so that small files take the sample
            for module in (convert, decisions, csvfile):
                m.setattr(module, "INFER_ROWS", infer)
        m.setattr(csvfile, "_SAMPLE_MIN", 0 if sample else 1 << 62)
        original = csvfile._Parser.sample

        def counted(self: Any, chunk: Any) -> Any:
            raw = original(self, chunk)
            taken.append(raw is not None)
            return raw
        m.setattr(csvfile._Parser, "sample", counted)
        kind, got = _read(path, monkeypatch, typed=True, **kw)
    return kind, got, sum(taken)


@settings(max_examples=LONG or 60, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=csv_files(), block=st.integers(256, 4096), batch=st.integers(7, 100),
       infer=st.integers(1, 12))
def test_a_file_reads_the_same_with_and_without_the_first_block_sample(
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
        case: tuple[str, bytes], block: int, batch: int, infer: int) -> None:
    mode, data = case
    d = tmp_path_factory.mktemp("sample")
    path = d / "e.csv"
    path.write_bytes(data)
    kw: dict[str, Any] = {"block_bytes": block, "batch_size": batch}
    if mode.startswith("epoch"):
        kw["time_unit"] = "s"
    for policy in ("fail", "skip", "dead-letter"):
        results = []
        for sample in (True, False):
            dead = d / f"dead-{sample}.jsonl"
            on_bad = f"dead-letter={dead}" if policy == "dead-letter" else policy
            kind, got, _ = _read_sampled(path, monkeypatch, sample=sample, infer=infer,
                                         on_bad_row=on_bad, **kw)
            results.append((kind, got, dead.read_text() if policy == "dead-letter" else ""))
        (k1, g1, l1), (k2, g2, l2) = results
        assert k1 == k2
        if k1 == "error":
            assert g1 == g2
            continue
        assert g1[0].equals(g2[0]), (mode, policy)
        assert g1[1] == g2[1] and g1[2] == g2[2]
        assert l1 == l2


def _stock_lines(n: int) -> list[bytes]:
    return [b"%d,S%d,2024-01-01T%02d:%02d:%02d.%03d,%d.%02d,%d" % (
        i, i % 50, i // 3_600_000 % 24, i // 60_000 % 60, i // 1000 % 60, i % 1000,
        100 + i % 37, i % 100, i % 1000) for i in range(n)]


@pytest.mark.parametrize(("case", "sampled"), [
    ("clean", True),
    ("bad line in the sample", False),  # (Arrow refuses the sample: the block decides)
    ("bad line after the sample", True),
    ("text in an int column, then a fraction", True),
    ("no time in the first lines", False),
    ("a zone after the sample", True),
    ("a quote left open", False),
])
def test_a_large_first_block_decides_from_its_sample(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    case: str, sampled: bool) -> None:
    lines = _stock_lines(70_000)  # about 3 MB: one first block of 4 MB
    if case == "bad line in the sample":
        lines[100] = b"100,S0,2024-01-01T00:00:00.100,1.0"
    elif case == "bad line after the sample":
        lines[50_000] = b"50000,S0,2024-01-01T00:00:50.000,1.0,1,extra"
    elif case == "text in an int column, then a fraction":
        lines[50] = b"50,S0,2024-01-01T00:00:00.050,1.0,abc"
        lines[40_000] = b"40000,S0,2024-01-01T00:00:40.000,1.0,2.5"
    elif case == "no time in the first lines":
        lines[:30_000] = [b"%d,S0,,1.0,1" % i for i in range(30_000)]
    elif case == "a zone after the sample":
        lines[60_000] = b"60000,S0,2024-01-01T00:01:00.000Z,1.0,1"
    elif case == "a quote left open":
        lines[10] = b'10,"S0,2024-01-01T00:00:00.010,1.0,1'
    path = tmp_path / "e.csv"
    path.write_bytes(b"id,sym,ts,price,volume\n" + b"\n".join(lines) + b"\n")
    for policy in ("fail", "skip"):
        kw: dict[str, Any] = {"on_bad_row": policy, "time_col": "ts", "event_type": "S",
                              "id_col": "id"}
        kind, got, taken = _read_sampled(path, monkeypatch, sample=True, **kw)
        old_kind, old, _ = _read_sampled(path, monkeypatch, sample=False, **kw)
        assert taken == sampled
        assert kind == old_kind
        if kind == "error":
            assert got == old
            continue
        assert got[0].equals(old[0]) and got[1:] == old[1:]
    if case == "text in an int column, then a fraction":  # (skip: the last read)
        assert got[0].column("volume").type == pa.float64() and got[2].skipped == 1
