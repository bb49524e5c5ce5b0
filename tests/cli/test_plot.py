"""``kleene run --plot PATH``: a timeline PNG of the matches (issue 16, item 8), rendered from
the demo's query and data."""

from __future__ import annotations

import csv
import gzip
import json
import struct
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kleene.cli.main import EXIT_RUNTIME, EXIT_USAGE, cli

ROOT = Path(__file__).resolve().parents[2]
DEMO = ["run", str(ROOT / "examples" / "flight_delay_propagation.kleene"), "--input",
        str(ROOT / "examples" / "data" / "nycflights13_sample.csv.gz"), "--time-col",
        "dep_time_utc", "--event-type", "Flight"]


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def red_pixels(path: Path) -> int:
    """Pixels in matplotlib's tab:red (variable a's marker colour)."""
    import matplotlib.image as mpimg
    import numpy as np

    img = (mpimg.imread(path)[..., :3] * 255).round().astype(int)
    return int(np.all(np.abs(img - np.array([214, 39, 40])) <= 8, axis=-1).sum())


def test_the_demo_renders(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from kleene.plot import WIDTH_PX, height_px

    out = tmp_path / "demo.png"
    res = CliRunner().invoke(cli, [*DEMO, "--plot", str(out)])
    assert res.exit_code == 0, res.stderr
    assert f"timeline        {out}" in res.stderr
    matches = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(matches) == 28
    with gzip.open(ROOT / "examples" / "data" / "nycflights13_sample.csv.gz", "rt") as f:
        aircraft = {row["tailnum"] for row in csv.DictReader(f)}
    # one row per aircraft, a fixed width
    assert png_size(out) == (WIDTH_PX, height_px(len(aircraft))) == (1200, 500)
    assert out.stat().st_size > 20_000
    # a query with no match draws the events but no variable marker
    empty = tmp_path / "empty.png"
    res = CliRunner().invoke(cli, [*DEMO[:1], "PATTERN SEQ(Flight a) WHERE a.dep_delay > 10000 "
                                   "PARTITION BY tailnum", *DEMO[2:], "--plot", str(empty),
                                   "--quiet"])
    assert res.exit_code == 0 and res.stdout == "", res.stderr
    assert png_size(empty) == (1200, 500)
    assert red_pixels(out) > 50 and red_pixels(empty) == 0


def test_plot_without_matplotlib_is_one_line_with_the_install_hint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises
    res = CliRunner().invoke(cli, [*DEMO, "--plot", str(tmp_path / "t.png")])
    assert res.exit_code == EXIT_RUNTIME and res.stdout == ""
    assert res.stderr == 'kleene: drawing a timeline needs matplotlib: pip install "kleene[plot]"\n'
    assert not (tmp_path / "t.png").exists()


@pytest.mark.parametrize(("extra", "message"), [
    (["--plot", "t.svg"], "name it *.png"),
    (["--plot", "t.png", "--count"], "not with --stream, --count"),
    (["--plot", "t.png", "--stream"], "not with --stream, --count"),
])
def test_plot_usage_errors(tmp_path: Path, extra: list[str], message: str) -> None:
    res = CliRunner().invoke(cli, [*DEMO, *extra])
    assert res.exit_code == EXIT_USAGE and message in res.stderr
