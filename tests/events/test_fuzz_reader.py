"""Fuzzing the CSV reader (issue 17, hardening): corrupted files never crash it with anything
but kleene's InputError, and under ``--on-bad-row skip`` every data line is accounted for:
events + bad rows == the non-empty lines after the header.

The normal run tries a small budget. A long run:

    KLEENE_FUZZ_EXAMPLES=100000 KLEENE_FUZZ_REPORT=/tmp/fuzz.json \\
        pytest -p no:cacheprovider tests/events/test_fuzz_reader.py

(``KLEENE_FUZZ_REPORT`` writes the inputs tried and the outcomes; docs/reliability.md has the
figures of the last long run.)
"""

from __future__ import annotations

import atexit
import collections
import gzip
import json
import os
import tempfile
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kleene.errors import InputError
from kleene.events import EventBatch
from kleene.events.readers import ReadReport, read_events

EXAMPLES = int(os.environ.get("KLEENE_FUZZ_EXAMPLES", "80"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 80,
                    suppress_health_check=list(HealthCheck))
OUTCOMES: collections.Counter[str] = collections.Counter()


def _report() -> None:
    path = os.environ.get("KLEENE_FUZZ_REPORT")
    if path and OUTCOMES:
        with open(path, "w") as f:
            json.dump(dict(OUTCOMES), f, indent=1)


atexit.register(_report)

# -- inputs ------------------------------------------------------------------------------------

good_row = st.builds(lambda ts, t, x: f"{ts},{t},{x}".encode(),
                     st.integers(0, 10**6), st.sampled_from(["A", "B"]),
                     st.one_of(st.integers(-5, 5), st.floats(allow_nan=False, width=32),
                               st.sampled_from(["", "NA", "abc", '"q,q"', '"say ""hi"""'])))


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A row, maybe mutated: ragged, a stray quote, NUL, bad UTF-8, a BOM, a huge value."""
    row = draw(good_row)
    kind = draw(st.sampled_from(["good"] * 6 + ["ragged", "more", "quote", "nul", "latin1",
                                                 "utf8-cut", "bom", "huge", "bytes", "empty",
                                                 "spaces"]))
    if kind == "ragged":
        return row.rsplit(b",", 1)[0]
    if kind == "more":
        return row + b",extra"
    if kind == "quote":
        at = draw(st.integers(0, len(row)))
        return row[:at] + b'"' + row[at:]
    if kind == "nul":
        at = draw(st.integers(0, len(row)))
        return row[:at] + b"\x00" + row[at:]
    if kind == "latin1":
        return row + "é".encode("latin-1")
    if kind == "utf8-cut":
        return row + "é".encode()[:1]
    if kind == "bom":
        return b"\xef\xbb\xbf" + row
    if kind == "huge":
        return row + b"<huge:%d>" % draw(st.integers(1000, 300_000))
    if kind == "bytes":
        return draw(st.binary(max_size=40))
    if kind == "empty":
        return b""
    if kind == "spaces":
        return b"  "
    return row


class File(tuple[bytes, bytes, str]):
    """(file bytes, the uncompressed text, how it is packed), with a short repr."""

    def __repr__(self) -> str:
        return f"File({len(self[0])} bytes, {self[2]}, text={self[1][:300]!r}...)"


@st.composite
def csv_files(draw: st.DrawFn) -> File:
    """(file bytes, the uncompressed text, how it is packed)."""
    header = draw(st.sampled_from([b"ts,type,x", b"\xef\xbb\xbfts,type,x"]))
    ends = st.sampled_from([b"\n"] * 6 + [b"\r\n", b"\r"])
    lines = [_huge(line) for line in draw(st.lists(mutated(), max_size=60))]
    text = header + draw(st.sampled_from([b"\n", b"\r\n"]))
    for k, line in enumerate(lines):
        last = k == len(lines) - 1
        text += line + (draw(st.sampled_from([b"\n", b""])) if last else draw(ends))
    pack = draw(st.sampled_from(["plain"] * 4 + ["gzip", "gzip-truncated"]))
    if pack == "plain":
        return File((text, text, pack))
    data = gzip.compress(text)
    if pack == "gzip-truncated":
        data = data[: draw(st.integers(0, len(data) - 1))]
    return File((data, text, pack))


def _huge(line: bytes) -> bytes:
    """``<huge:N>`` becomes N bytes of text (kept out of the drawn values, whose repr
    Hypothesis prints)."""
    head, sep, tail = line.partition(b"<huge:")
    return head + b"x" * int(tail[:-1]) if sep else line


def data_lines(text: bytes) -> int:
    """Non-empty lines after the header (LF, CRLF or a bare CR end a line)."""
    head, _, rest = text.partition(b"\n")
    return sum(1 for line in rest.splitlines() if line)


def read(data: bytes, **kw: Any) -> tuple[EventBatch, ReadReport] | InputError:
    with tempfile.NamedTemporaryFile(suffix=".csv") as f:
        f.write(data)
        f.flush()
        try:
            return read_events(f.name, **kw)
        except InputError as e:
            assert "\n" not in str(e) and str(e).isprintable(), repr(str(e))
            return e


# -- properties --------------------------------------------------------------------------------


@SETTINGS
@given(csv_files(), st.sampled_from([64, 1000, 1 << 16, 1 << 22]), st.integers(1, 100))
def test_every_line_is_an_event_or_a_bad_row(file: File, block: int,
                                              batch: int) -> None:
    data, text, pack = file
    OUTCOMES["inputs"] += 1
    got = read(data, on_bad_row="skip", block_bytes=block, batch_size=batch)
    expected = data_lines(text)
    if isinstance(got, InputError):
        OUTCOMES[f"input error ({pack})"] += 1
        # only whole-input faults: a truncated file, or no data line at all
        assert pack == "gzip-truncated" or expected == 0, str(got)
        return
    batch_, report = got
    assert pack != "gzip-truncated" or len(data) >= len(gzip.compress(text))
    OUTCOMES["read"] += 1
    OUTCOMES["bad rows"] += report.bad_rows
    OUTCOMES["events"] += report.events
    assert report.events == len(batch_)
    assert report.events + report.bad_rows == report.rows_read == expected
    # an empty line is no row but takes an id: an event's id is its line's index
    lines = text.partition(b"\n")[2].splitlines()
    assert report.blank_lines == lines.count(b"")
    assert set(batch_.ids.to_pylist()) <= {i for i, line in enumerate(lines) if line}
    if report.events + report.bad_rows != expected:  # pragma: no cover (counted, then failed)
        OUTCOMES["unaccounted"] += 1


@SETTINGS
@given(csv_files())
def test_fail_policy_reads_or_names_the_first_bad_row(file: File) -> None:
    data, text, pack = file
    OUTCOMES["inputs (fail policy)"] += 1
    got = read(data)
    if not isinstance(got, InputError):
        _, report = got
        assert report.bad_rows == 0 and report.events == data_lines(text)


@SETTINGS
@given(st.binary(max_size=3000), st.sampled_from(["skip", "fail"]))
def test_random_bytes_never_crash(data: bytes, policy: str) -> None:
    OUTCOMES["inputs (random bytes)"] += 1
    got = read(data, on_bad_row=policy)
    if not isinstance(got, InputError):
        _, report = got
        assert report.events + report.bad_rows == report.rows_read
