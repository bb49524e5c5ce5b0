"""Issue 16, item 2: explosion guidance. ``check``/``explain`` warn when a Kleene variable under
skip-till-any-match can produce exponentially many matches, and say what to use instead; every
engine cap has a CLI flag, and a cap's message names it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import kleene
from kleene.cli.main import EXIT_RUNTIME, EXIT_USAGE, cli
from kleene.semantic.advice import TIGHT_COUNT_WINDOW, explosion_warning

# the congestion query of the traffic data's SOURCE.md, as a new user writes it (default strategy)
CONGESTION = ("PATTERN SEQ(Traffic a, Traffic+ b[], Traffic c) WHERE a.avgSpeed > 50 AND "
              "b[i].avgSpeed < 20 AND c.avgSpeed > 50 PARTITION BY REPORT_ID WITHIN 1 hour")


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("command", ["check", "explain"])
def test_check_and_explain_warn_about_the_default_strategy(command: str) -> None:
    code, out, err = invoke(command, CONGESTION)
    assert code == 0 and out
    assert err.startswith("kleene: warning: query 'query': the Kleene variable 'b' "
                          "(Traffic+ b[]) under skip-till-any-match (the default strategy) can "
                          "produce exponentially many matches")
    for advice in ("USING skip-till-next-match", "USING strict-contiguity",
                   f"WITHIN {TIGHT_COUNT_WINDOW} EVENTS", "--max-runs-per-partition",
                   "--max-matches-per-event", "--max-matches-per-call",
                   "a time window does not bound n"):
        assert advice in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("query", [
    CONGESTION + " USING skip-till-next-match",
    CONGESTION + " USING strict-contiguity",
    CONGESTION.replace("WITHIN 1 hour", "WITHIN 12 EVENTS"),
    CONGESTION.replace("Traffic+ b[]", "Traffic{1,5} b[]"),
    "PATTERN SEQ(A a, B b) WITHIN 1 hour",                         # no Kleene
    "PATTERN SEQ(A a, NOT(B+ b[]), C c) WITHIN 1 hour",            # never bound
    "PATTERN SEQ(A a, SEQ(B+ b[], C c) WITHIN 8 EVENTS) WITHIN 1 hour",  # a nested count window
])
def test_no_warning_when_matches_cannot_explode(query: str) -> None:
    code, _, err = invoke("check", query)
    assert (code, err) == (0, "")
    assert explosion_warning(kleene.analyze(query)) is None


@pytest.mark.parametrize(("query", "says"), [
    ("PATTERN SEQ(A a, B* b[])", "nothing bounds n (no WITHIN)"),
    ("PATTERN SEQ(A a, B+ b[]) WITHIN 100 EVENTS", "WITHIN 100 EVENTS allows n up to 100"),
    ("PATTERN SEQ(A a, SEQ(B b, C c)+) WITHIN 5 minutes USING skip-till-any-match",
     "the Kleene variables 'b, c' (SEQ(B b, C c)+) under skip-till-any-match can"),
])
def test_warning_texts(query: str, says: str) -> None:
    warning = explosion_warning(kleene.analyze(query))
    assert warning is not None and says in warning
    assert ("(the default strategy)" in warning) == ("USING" not in query)


def _burst(tmp_path: Path, n_b: int) -> str:
    """One A, then n_b B events: SEQ(A a, B+ b[]) has 2^n_b - 1 matches under any-match."""
    src = tmp_path / "burst.csv"
    src.write_text("ts,type\n0,A\n" + "".join(f"{i},B\n" for i in range(1, n_b + 1)))
    return str(src)


BURST = "PATTERN SEQ(A a, B+ b[]) WITHIN 100 seconds"


def test_every_cap_has_a_flag_and_its_message_names_it(tmp_path: Path) -> None:
    src = _burst(tmp_path, 12)
    code, out, err = invoke("run", BURST, "--input", src, "--quiet",
                            "--max-matches-per-event", "0", "--max-runs-per-partition", "0")
    assert code == 0, err
    assert len(out.splitlines()) == 2 ** 12 - 1  # every non-empty subset of the 12 B events
    assert {tuple(json.loads(line)["match"]["b"]) for line in out.splitlines()} == {
        tuple(i for i in range(1, 13) if mask >> (i - 1) & 1) for mask in range(1, 2 ** 12)}

    code, out, err = invoke("run", BURST, "--input", src, "--max-runs-per-partition", "50")
    assert code == EXIT_RUNTIME
    assert "exceed max_runs_per_partition=50" in err
    assert "CLI --max-runs-per-partition N, 0 for no cap" in err and "--on-cap truncate" in err

    code, out, err = invoke("run", BURST, "--input", src, "--max-matches-per-event", "100")
    assert code == EXIT_RUNTIME
    assert "event 8 completed 128 matches, more than max_matches_per_event=100" in err
    assert "CLI --max-matches-per-event N, 0 for no cap" in err and "--on-cap truncate" in err

    code, out, err = invoke("run", BURST, "--input", src, "--max-matches-per-event", "100",
                            "--on-cap", "truncate", "--quiet")
    assert code == 0
    assert "kleene: warning: a cap was reached and --on-cap truncate dropped" in err
    assert 0 < len(out.splitlines()) < 2 ** 12 - 1

    code, _, err = invoke("run", BURST, "--input", src, "--engine", "oracle",
                          "--max-runs-per-partition", "5")
    assert code == EXIT_USAGE and "--max-runs-per-partition" in err


def test_the_api_caps_match_the_cli(tmp_path: Path) -> None:
    """The flags set the Runtime options of the same names (0 on the CLI is None)."""
    events, _ = kleene.read_events(_burst(tmp_path, 10))
    q = kleene.compile(BURST, max_runs_per_partition=None, max_matches_per_event=None)
    code, out, _ = invoke("run", BURST, "--input", str(tmp_path / "burst.csv"), "--count",
                          "--max-runs-per-partition", "0", "--max-matches-per-event", "0", "-q")
    assert code == 0 and int(out) == len(q.run(events)) == 2 ** 10 - 1
