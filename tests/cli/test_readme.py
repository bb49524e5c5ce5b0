"""The README's 30-second example prints what the README says it prints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from kleene.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]


def test_readme_example_output_is_real(monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (ROOT / "README.md").read_text()
    m = re.search(r'kleene run "(PATTERN.*?)" \\\n\s+(--input [^\n]*)', readme, re.S)
    assert m is not None, "the README's example command is missing"
    query, args = m.group(1), m.group(2).split()
    shown = [line for line in readme.splitlines() if line.startswith('{"query": ')]
    assert shown
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(cli, ["run", query, *args, "-q"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == shown
