"""`kleene check` prints the canonical form of any dialect and fails cleanly on bad queries."""

from __future__ import annotations

from click.testing import CliRunner

from kleene.cli.main import cli


def test_check_prints_canonical_form_of_a_dialect() -> None:
    result = CliRunner().invoke(cli, ["check", "--dialect", "faem",
                                      "PATTERN Google; Microsoft+ WITHIN 5 UNIT"])
    assert result.exit_code == 0, result.output
    assert result.output == ("PATTERN SEQ(Google Google, Microsoft+ Microsoft[])\nWITHIN 5 events\n"
                             "USING maximal-grouping\n")


def test_check_detects_the_dialect() -> None:
    result = CliRunner().invoke(cli, ["check", "PATTERN Sequence WITH A, B WHERE [symbol] "
                                               "WITHIN 2 hours"])
    assert result.exit_code == 0, result.output
    assert result.output == "PATTERN SEQ(A A, B B)\nWHERE [symbol]\nWITHIN 2 hours\n"


def test_check_reports_a_bad_query_without_traceback() -> None:
    result = CliRunner().invoke(cli, ["check", "PATTERN SEQ(A a, B b) WHERE c.x > 1"])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "unknown variable 'c'; the pattern binds: a, b" in result.output
    assert "                              ^^^" in result.output
