"""Static checks are part of the suite: ruff on everything, mypy --strict on src/kleene.

Tool versions are pinned in the dev extra, so a new ruff or mypy release cannot turn CI red
without a change here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def test_ruff_is_clean() -> None:
    """ruff reports nothing on src, tests and benchmarks."""
    proc = _run("ruff", "check", "src", "tests", "benchmarks")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_strict_is_clean() -> None:
    """mypy --strict (configured in pyproject.toml) reports nothing on src/kleene."""
    proc = _run("mypy", "--no-incremental")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Success" in proc.stdout
