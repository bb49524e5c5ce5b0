"""``make demo`` with the core install only (no matplotlib): the matches and a one-line note,
no picture; with matplotlib: the timeline PNG too. A stand-in venv runs this interpreter, so
the test installs nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def fake_venv(tmp: Path, *, matplotlib: bool) -> Path:
    """bin/python and bin/kleene that run this interpreter; without ``matplotlib`` the
    Makefile's probe (``python -c "import matplotlib"``) fails."""
    venv = tmp / "venv"
    (venv / "bin").mkdir(parents=True)
    probe = "" if matplotlib else (
        'if [ "$1" = "-c" ] && [ "$2" = "import matplotlib" ]; then exit 1; fi\n')
    (venv / "bin" / "python").write_text(f'#!/bin/sh\n{probe}exec "{sys.executable}" "$@"\n')
    (venv / "bin" / "kleene").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m kleene "$@"\n')
    for f in ("python", "kleene"):
        (venv / "bin" / f).chmod(0o755)
    (venv / ".core").touch()  # newer than pyproject.toml: make installs nothing
    return venv


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
@pytest.mark.parametrize("matplotlib", [False, True])
def test_make_demo(tmp_path: Path, matplotlib: bool) -> None:
    if matplotlib:
        pytest.importorskip("matplotlib")
    venv = fake_venv(tmp_path, matplotlib=matplotlib)
    png = tmp_path / "out" / "demo.png"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    res = subprocess.run(["make", "-s", "demo", f"VENV={venv}", f"DEMO_PLOT={png}"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count('"query": "delay_propagation"') == 28
    note = "note: matplotlib is not installed (pip install -e '.[plot]'): no timeline picture"
    if matplotlib:
        assert note not in res.stderr and f"timeline        {png}" in res.stderr
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert res.stderr.splitlines()[0] == note
        assert not png.exists()
