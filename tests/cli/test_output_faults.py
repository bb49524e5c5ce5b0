"""Issue 17's query and output faults: a huge number in a query, an unwritable output, and a run
that fails half way (items 1, 5 and 11). Real processes, real files, no mocks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SMALL = "ts,type,x,s\n1,A,1,foo\n2,B,2,bar\n3,C,3,baz\n4,A,0,qux\n5,B,5,quux\n"


def kleene(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kleene", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


@pytest.fixture
def small(tmp_path: Path) -> Path:
    p = tmp_path / "small.csv"
    p.write_text(SMALL)
    return p


def test_a_number_longer_than_python_converts_is_a_query_error(small: Path) -> None:
    done = kleene("run", "PATTERN A a WHERE a.x > " + "9" * 5000, "--input", str(small))
    assert done.returncode == 1
    assert "number has 5,000 digits; at most 4,000 are supported" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_a_full_disk_is_an_input_error_naming_the_output(small: Path) -> None:
    done = kleene("run", "PATTERN SEQ(A a, B b)", "--input", str(small), "-o", "/dev/full")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "kleene: input error: cannot write matches to /dev/full: No space left on device")


def test_an_unwritable_folder_names_the_path_the_user_gave(small: Path, tmp_path: Path) -> None:
    out = tmp_path / "no" / "such" / "dir" / "m.jsonl"
    done = kleene("run", "PATTERN SEQ(A a, B b)", "--input", str(small), "-o", str(out))
    assert done.returncode == 2 and f"{out}: cannot write the output file" in done.stderr
    assert ".partial" not in done.stderr and "Traceback" not in done.stderr


def test_a_finished_run_leaves_only_the_output(small: Path, tmp_path: Path) -> None:
    for extra in ([], ["--stream"]):
        out = tmp_path / f"m{len(extra)}.jsonl"
        done = kleene("run", "PATTERN SEQ(A a, B b)", "--input", str(small), "-o", str(out),
                      "-q", *extra)
        assert done.returncode == 0, done.stderr
        assert [json.loads(x)["match"] for x in out.read_text().splitlines()] == [
            {"a": 0, "b": 1}, {"a": 0, "b": 4}, {"a": 3, "b": 4}]
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(out.name)) == [
            out.name]


UDF = '''
def fine_until(x):
    if x >= 40:
        raise ValueError("the model server went away")
    return True
'''


@pytest.mark.parametrize("stream", [False, True])
def test_a_run_that_fails_half_way_never_leaves_a_complete_looking_file(
        tmp_path: Path, stream: bool) -> None:
    """Without --stream nothing is left; with --stream the matches written so far stay under
    the ``.partial`` name, never under the name of a finished output."""
    (tmp_path / "udfmod.py").write_text(UDF)
    rows = "".join(f"{i},{'AB'[i % 2]},{i}\n" for i in range(60))
    (tmp_path / "in.csv").write_text("ts,type,x\n" + rows)
    out = tmp_path / "m.jsonl"
    args = ["run", "PATTERN SEQ(A a, B b) WHERE fine_until(b.x) WITHIN 3 EVENTS",
            "--input", "in.csv", "-o", str(out), "--udf", "udfmod:fine_until",
            "--batch-size", "8"] + (["--stream"] if stream else [])
    done = kleene(*args, cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert "the model server went away" in done.stderr
    assert not out.exists()
    partial = tmp_path / "m.jsonl.partial"
    if stream:
        lines = partial.read_text().splitlines()
        # the chunks before the failing one were written, all of them complete matches
        assert lines and all(json.loads(x)["match"]["b"] < 40 for x in lines)
    else:
        assert not partial.exists()


def test_late_rows_do_not_depend_on_batch_size_and_are_written(tmp_path: Path) -> None:
    """Issue 16 item 5: with lateness 0 the late rows are the rows behind the newest earlier
    row, whatever --batch-size is, and --late-output writes each of them."""
    rows = [(5, "A", 1), (6, "B", 2), (1, "A", 3), (7, "B", 4), (7, "A", 5), (2, "B", 6),
            (9, "B", 7), (8, "A", 8), (10, "B", 9)]
    (tmp_path / "in.csv").write_text("ts,type,x\n" + "".join(f"{t},{k},{x}\n" for t, k, x in rows))
    want_late = [2, 5, 7]  # rows 2 (1 < 6), 5 (2 < 7) and 7 (8 < 9)
    outputs = set()
    for size in ("1", "2", "3", "100", "65536"):
        late = tmp_path / f"late{size}.jsonl"
        out = tmp_path / f"m{size}.jsonl"
        done = kleene("run", "PATTERN SEQ(A a, B b)", "--input", "in.csv", "--stream",
                      "--batch-size", size, "--late-output", str(late), "-o", str(out),
                      cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        recs = [json.loads(x) for x in late.read_text().splitlines()]
        assert [r["row"] for r in recs] == want_late, size
        assert all(r["reason"].startswith("late: behind the newest earlier event") for r in recs)
        assert "late                       3" in done.stderr
        outputs.add(out.read_text())
    assert len(outputs) == 1  # the same matches for every batch size
    refused = kleene("run", "PATTERN SEQ(A a, B b)", "--input", "in.csv", "--late-output",
                     "x.jsonl", cwd=tmp_path)
    assert refused.returncode == 1 and "--late-output needs --stream" in refused.stderr  # usage


def test_a_failed_run_removes_a_partial_output_folder(tmp_path: Path) -> None:
    """``--spark`` writes Parquet as a folder (``PATH.partial/part-*``): a run that fails once
    Spark has started it leaves no ``.partial`` folder behind (it was only ever a file)."""
    from kleene.cli.main import output_target
    from kleene.errors import InputError

    out = tmp_path / "m.parquet"
    with pytest.raises(InputError, match="a task failed"), output_target(str(out)) as target:
        assert target == f"{out}.partial"
        Path(target).mkdir()
        (Path(target) / "part-00000.parquet").write_bytes(b"PAR1")
        raise InputError("a task failed")
    assert list(tmp_path.iterdir()) == []
