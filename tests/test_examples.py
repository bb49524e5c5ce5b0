"""The examples in examples/: each query's matches equal an independent pandas computation of
the same pattern over the same data slice, and examples/README.md states their counts."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from kleene.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples"


def run_example(query: str, data: str, *args: str) -> list[dict[str, object]]:
    res = CliRunner().invoke(cli, ["run", str(EX / query), "--input", str(EX / "data" / data),
                                   "--quiet", *args])
    assert res.exit_code == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines()]


def consecutive_runs(df: pd.DataFrame, key: str, time: str, a: np.ndarray, b: np.ndarray,
                     c: np.ndarray, window: pd.Timedelta) -> set[tuple[int, int]]:
    """SEQ(a, b+, c) under strict contiguity per key, as (a id, c id) pairs: a at row i, every
    row up to the first that is not a b, that row a c, at least one b, within the window.
    Ids are file rows (0-based); rows are in time order within a key."""
    out = set()
    df = df.assign(_a=a, _b=b, _c=c, _row=np.arange(len(df)))
    for _, g in df.groupby(key, sort=False):
        g = g.sort_values([time, "_row"], kind="stable")
        ga, gb, gc = g._a.to_numpy(), g._b.to_numpy(), g._c.to_numpy()
        ts, rows = g[time].to_numpy(), g._row.to_numpy()
        for i in np.flatnonzero(ga):
            j = i + 1
            while j < len(g) and gb[j]:
                j += 1
            if j >= i + 2 and j < len(g) and gc[j] and ts[j] - ts[i] <= window:
                out.add((int(rows[i]), int(rows[j])))
    return out


def documented_count(name: str) -> int:
    """The match count examples/README.md gives for an example file."""
    text = (EX / "README.md").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if f"[{name}]" in line)
    return int(re.search(r"\*\*([\d,]+)\*\*", row).group(1).replace(",", ""))  # type: ignore[union-attr]


def test_flight_delay_propagation() -> None:
    found = run_example("flight_delay_propagation.kleene", "nycflights13_sample.csv.gz",
                        "--time-col", "dep_time_utc", "--event-type", "Flight")
    df = pd.read_csv(EX / "data" / "nycflights13_sample.csv.gz", parse_dates=["dep_time_utc"])
    d = df.dep_delay.to_numpy()
    expected = consecutive_runs(df, "tailnum", "dep_time_utc", d > 60, d > 15, d <= 15,
                                pd.Timedelta(days=1))
    assert {(m["match"]["a"], m["match"]["c"]) for m in found} == expected  # type: ignore[index]
    assert len(found) == len(expected) == documented_count("flight_delay_propagation.kleene")


def test_traffic_congestion() -> None:
    found = run_example("traffic_congestion.kleene", "aarhus_traffic_week.csv.gz",
                        "--event-type", "Traffic")
    df = pd.read_csv(EX / "data" / "aarhus_traffic_week.csv.gz", parse_dates=["TIMESTAMP"])
    s, v = df.avgSpeed.to_numpy(), df.vehicleCount.to_numpy()
    expected = consecutive_runs(df, "REPORT_ID", "TIMESTAMP", s >= 40, (s < 20) & (v > 0),
                                s >= 40, pd.Timedelta(hours=1))
    assert {(m["match"]["a"], m["match"]["c"]) for m in found} == expected  # type: ignore[index]
    assert len(found) == len(expected) == documented_count("traffic_congestion.kleene")
    assert len(expected) > 10


def test_glucose_hypo_after_fall() -> None:
    found = run_example("glucose_hypo_after_fall.kleene", "cgm_glucose_2010-08.csv.gz",
                        "--time-col", "datetime", "--event-type", "Reading",
                        "--null-values", "nil")
    df = pd.read_csv(EX / "data" / "cgm_glucose_2010-08.csv.gz", parse_dates=["datetime"],
                     na_values=["nil"], keep_default_na=False)
    assert df.isig.isna().sum() == 1_061
    g, t = df.glucose.to_numpy(), df.datetime.to_numpy()
    window = np.timedelta64(45 * 60, "s")
    expected = {(i, j) for j in np.flatnonzero(g < 70) for i in range(j)
                if g[i] >= 120 and t[j] - t[i] <= window}
    assert {(m["match"]["a"], m["match"]["b"]) for m in found} == expected  # type: ignore[index]
    assert all(m["values"]["fall"] > 50 for m in found)  # type: ignore[index]
    assert len(found) == len(expected) == documented_count("glucose_hypo_after_fall.kleene")


def test_notebook_runs_and_its_stored_outputs_are_current() -> None:
    """examples/quickstart.ipynb executes top to bottom; its stored text outputs are what it
    prints now (so the notebook a reader sees on GitHub is true), and it draws a picture."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("matplotlib")
    path = EX / "quickstart.ipynb"
    stored = nbformat.read(path, as_version=4)
    fresh = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(fresh, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(EX)}}).execute()

    def texts(nb: object) -> list[str]:
        return [o.get("text", "") or o.get("data", {}).get("text/plain", "")
                for c in nb.cells if c.cell_type == "code"  # type: ignore[attr-defined]
                for o in c.outputs if "image/png" not in o.get("data", {})]

    assert texts(fresh) == texts(stored)
    images = [o for c in fresh.cells if c.cell_type == "code" for o in c.outputs
              if "image/png" in o.get("data", {})]
    assert len(images) == 1
