"""A plain ``kleene run`` (one process, no --workers, no error) does not import what only
other runs need: start-up time (issue 18, item 4). And the buffer route to Arrow that avoids
``numpy.ma`` gives what ``pa.array`` gives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from kleene.events.model import bool_array, int64_array

SRC = str(Path(__file__).resolve().parents[2] / "src")
NOT_AT_START = ("multiprocessing", "concurrent.futures", "numpy.ma", "difflib",
                "kleene.runtime.parallel", "kleene.runtime.nested", "kleene.runtime.groups",
                "kleene.runtime.union")

RUN = f"""
import sys
from kleene.cli.main import main
try:
    main(["run", *sys.argv[1:]])
except SystemExit as e:
    assert not e.code, e.code
print("IMPORTED", sorted(m for m in {NOT_AT_START!r} if m in sys.modules))
"""

STOCK = ("PATTERN SEQ(Stock a, Stock+ b[], Stock c) WHERE b[1].price > a.price AND "
         "b[i].price > b[i-1].price AND c.price < a.price PARTITION BY sym WITHIN 10 minutes "
         "USING strict-contiguity")


@pytest.mark.parametrize(("query", "options", "match"), [
    # the nfa plan (more than one worker by default on a multi-core machine: one here)
    ("PATTERN SEQ(Stock a, Stock b) WHERE b.price > a.price PARTITION BY sym",
     ["--id-col", "id", "--workers", "1"], '"match": {"a": 0, "b": 1}'),
    # the benchmark's stock query: the runs plan, one process on its own
    (STOCK, ["--id-col", "id"], '"match": {"a": 0, "b": [1, 2], "c": 3}'),
    # ids from the row numbers (no --id-col): built without pa.array's look at numpy.ma
    (STOCK, [], '"match": {"a": 0, "b": [1, 2], "c": 3}'),
])
def test_a_plain_run_does_not_import_the_lazy_modules(tmp_path: Path, query: str,
                                                      options: list[str], match: str) -> None:
    (tmp_path / "ev.csv").write_text("id,sym,ts,price\n0,x,2024-01-01T00:00:00,2\n"
                                     "1,x,2024-01-01T00:00:01,3\n2,x,2024-01-01T00:00:02,4\n"
                                     "3,x,2024-01-01T00:00:03,1\n")
    done = subprocess.run([sys.executable, "-c", RUN, query, "-i", "ev.csv", "--time-col", "ts",
                           "--event-type", "Stock", "-q", *options],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    *matches, imported = done.stdout.splitlines()
    assert any(match in m for m in matches), matches
    assert imported == "IMPORTED []"


@pytest.mark.parametrize("values", [
    np.array([], dtype=np.int64),
    np.array([3, -1, 2**62], dtype=np.int64),
    np.array([5, 6, 7], dtype=np.int32),
    np.arange(10, dtype=np.int64)[::3],  # not contiguous
])
def test_int64_array_is_pa_array(values: np.ndarray) -> None:
    got = int64_array(values)
    assert got.type == pa.int64()
    assert got.equals(pa.array(values, type=pa.int64()))
    assert got.to_pylist() == [int(v) for v in values]



@pytest.mark.parametrize("values", [
    np.array([], dtype=bool),
    np.array([True, False, True], dtype=bool),
    np.arange(21) % 3 == 0,  # not a multiple of 8
    (np.arange(40) % 2 == 0)[::3],  # not contiguous
])
def test_bool_array_is_pa_array(values: np.ndarray) -> None:
    got = bool_array(values)
    assert got.type == pa.bool_() and got.null_count == 0
    assert got.equals(pa.array(values))
    assert got.to_pylist() == [bool(v) for v in values]


FORMAT = """
import sys
import numpy as np
from kleene.cli.main import _skip_pandas_probe
_skip_pandas_probe()  # as the command does (pandas imports numpy.ma)
from kleene.events.model import TimeInfo
from kleene.events.textcols import id_list_pieces, time_pieces
us = np.array([0, 1_500_000, 3_000_000, 4_000_001], dtype=np.int64)  # whole and fractional
texts = [time_pieces(us, TimeInfo(kind="datetime")),
         time_pieces(us * 0 + 2_000_000, TimeInfo(kind="numeric", unit="s")),
         id_list_pieces([(1, 2), (3,)])]
print("TEXT", [str(p) for ps in texts for p in ps if not isinstance(p, str)][:1] != [])
print("IMPORTED", "numpy.ma" in sys.modules)
"""


def test_formatting_times_and_lists_imports_no_numpy_ma(tmp_path: Path) -> None:
    """The JSON Lines formatter's Arrow arrays come from numpy buffers (int64_array,
    bool_array), not ``pa.array``, whose first call imports numpy.ma (12 ms, paid in every
    keyed worker and in the calling process's merge)."""
    done = subprocess.run([sys.executable, "-c", FORMAT], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": SRC})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == ["TEXT True", "IMPORTED False"]

DATACLASSES = """
import dataclasses, sys
from kleene.cli.main import main
try:
    main(["run", *sys.argv[1:]])
except SystemExit as e:
    assert not e.code, e.code
built, compiled = 0, []
for name, module in list(sys.modules.items()):
    if not name.startswith("kleene"):
        continue
    for value in list(vars(module).values()):
        if isinstance(value, type) and value.__module__ == name and dataclasses.is_dataclass(value):
            built += 1
            eq = value.__dict__.get("__eq__")
            if getattr(getattr(eq, "__code__", None), "co_filename", "") == "<string>":
                compiled.append(value.__qualname__)
print("BUILT", built)
print("COMPILED", sorted(compiled))
"""


def test_a_plain_run_compiles_one_method_per_dataclass(tmp_path: Path) -> None:
    # kleene.frozen builds kleene's dataclasses with __init__ the one method compiled (the
    # standard library compiles six per frozen class: half of kleene's start-up); only a
    # class with a dataclass base is left to the standard library
    (tmp_path / "ev.csv").write_text("id,sym,ts,price\n0,x,2024-01-01T00:00:00,2\n"
                                     "1,x,2024-01-01T00:00:01,3\n2,x,2024-01-01T00:00:02,4\n"
                                     "3,x,2024-01-01T00:00:03,1\n")
    done = subprocess.run([sys.executable, "-c", DATACLASSES, STOCK, "-i", "ev.csv",
                           "--time-col", "ts", "--event-type", "Stock", "--id-col", "id", "-q"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    *_matches, built, compiled = done.stdout.splitlines()
    assert int(built.split()[1]) > 80
    assert compiled == "COMPILED ['ChainState', 'RunsPlan', 'TaskPlan']"  # dataclass bases


BLAS = """
import os, sys
import kleene
before = sorted(m for m in ("numpy", "pyarrow") if m in sys.modules)
from kleene.cli.main import main
try:
    main(["run", *sys.argv[1:]])
except SystemExit as e:
    assert not e.code, e.code
print("BEFORE", before)
print("BLAS", os.environ.get("OPENBLAS_NUM_THREADS"))
"""

_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "GOTO_NUM_THREADS")


@pytest.mark.parametrize(("chosen", "blas"), [
    ({}, "1"),  # the CLI's default: one BLAS thread (numpy's OpenBLAS starts one per core)
    ({"OMP_NUM_THREADS": "3"}, "None"),  # the user chose: left alone
    ({"OPENBLAS_NUM_THREADS": "2"}, "2"),
])
def test_the_command_line_starts_numpy_with_one_blas_thread_unless_told(
        tmp_path: Path, chosen: dict[str, str], blas: str) -> None:
    # `import kleene` imports neither numpy nor pyarrow (the façade is lazy), so the CLI can
    # set OPENBLAS_NUM_THREADS before numpy loads: ~0.07 s of every run's start-up
    (tmp_path / "ev.csv").write_text("sym,ts,price\nx,2024-01-01T00:00:00,2\n"
                                     "x,2024-01-01T00:00:01,3\nx,2024-01-01T00:00:02,4\n"
                                     "x,2024-01-01T00:00:03,1\n")
    env = {k: v for k, v in os.environ.items() if k not in _THREAD_VARS} | chosen
    done = subprocess.run([sys.executable, "-c", BLAS, STOCK, "-i", "ev.csv", "--event-type",
                           "Stock", "-q"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    *matches, before, threads = done.stdout.splitlines()
    assert any('"match": {"a": 0, "b": [1, 2], "c": 3}' in m for m in matches), matches
    assert before == "BEFORE []"
    assert threads == f"BLAS {blas}"


EXIT = """
import atexit, gc, sys
from kleene.cli.main import main
atexit.register(lambda: print("FROZEN", gc.get_freeze_count() > 0, gc.isenabled()))
sys.argv = ["kleene", *sys.argv[1:]]
if sys.argv[1] == "--as-caller":  # a caller's main([...]): its process is left as it was
    try:
        main(sys.argv[2:])
    except SystemExit:
        pass
else:
    main()
"""


@pytest.mark.parametrize("caller", [False, True])
def test_the_command_skips_the_exits_last_collection(tmp_path: Path, caller: bool) -> None:
    """The ``kleene`` command (``main()``) freezes the collector's view before the
    interpreter's exit (its last full collection only scans what the exit frees anyway);
    ``main([...])`` from a caller's process leaves the collector as it was."""
    (tmp_path / "ev.csv").write_text("sym,ts,price\nx,2024-01-01T00:00:00,2\n"
                                     "x,2024-01-01T00:00:01,3\n")
    args = ["run", "PATTERN SEQ(Stock a, Stock b) WHERE b.price > a.price", "-i", "ev.csv",
            "--time-col", "ts", "--event-type", "Stock", "-q", "-o", "out.jsonl"]
    done = subprocess.run([sys.executable, "-c", EXIT, *(["--as-caller"] if caller else []),
                           *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out.jsonl").read_text().count("\n") == 1  # written and closed
    assert done.stdout.splitlines()[-1] == ("FROZEN False True" if caller
                                            else "FROZEN True False")
