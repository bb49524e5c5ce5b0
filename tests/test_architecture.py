"""The layer contracts in pyproject.toml hold: runtime never imports the language layer, the
oracle shares no code with the engines, and only kleene.spark imports pyspark."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold() -> None:
    """lint-imports keeps every contract (on failure it lists the offending import chain)."""
    exe = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(exe), "--config", str(ROOT / "pyproject.toml")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout, proc.stdout
