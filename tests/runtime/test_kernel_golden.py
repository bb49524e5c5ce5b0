"""Golden fixtures of the generated NFA kernel (``kleene explain --kernel``): a change to the
code generator shows up as a readable diff of the generated source. Regenerate after an
intended change with ``KLEENE_REGEN_GOLDEN=1 pytest tests/runtime/test_kernel_golden.py`` and
review the diff."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from kleene.cli.main import cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernels"
QUERIES = {
    "stock": """PATTERN SEQ(Stock a, Stock+ b[], Stock c)
WHERE b[1].price > a.price AND b[i].price > b[i-1].price AND c.price < a.price
PARTITION BY symbol WITHIN 10 minutes USING strict-contiguity""",
    "traffic": """PATTERN SEQ(Traffic a, Traffic+ b[], Traffic c)
WHERE a.avgSpeed >= 40 AND b[i].avgSpeed < 20 AND c.avgSpeed >= 40
PARTITION BY REPORT_ID WITHIN 2 hours USING skip-till-next-match""",
    "middle_not": """PATTERN SEQ(A a, NOT(C n), B b) WHERE n.x = a.x AND b.x > a.x
WITHIN 10 seconds""",
}


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_generated_kernel_matches_its_golden_fixture(name: str) -> None:
    # the NFA plan's kernel (the stock query's chosen plan is ``runs``, which has none)
    res = CliRunner().invoke(cli, ["explain", "--kernel", "--plan", "nfa", QUERIES[name]])
    assert res.exit_code == 0, res.output
    path = FIXTURES / f"{name}.py.txt"
    if os.environ.get("KLEENE_REGEN_GOLDEN"):
        path.write_text(res.output, encoding="utf-8")
    assert res.output == path.read_text(encoding="utf-8")
