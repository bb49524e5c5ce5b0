"""Every fixture parses in its dialect, prints to the expected canonical text, round-trips, is
recognised without naming the dialect, and validates (docs/language.md, "Dialects")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kleene.lang import parse, to_text
from kleene.semantic import analyze

from .fixtures import Fixture, load

DIALECT_FILES = ("canonical", "sase", "faem", "logpp", "cem", "snoop", "match_recognize")
CASES = [(d, f) for d in DIALECT_FILES for f in load(f"{d}.txt")]


def _udfs(f: Fixture) -> dict[str, Callable[..., Any]]:
    names = [n.strip() for n in f.settings.get("udfs", "").split(",") if n.strip()]
    return {n: (lambda *args: None) for n in names}


@pytest.mark.parametrize(("dialect", "fixture"), CASES, ids=[f.id for _, f in CASES])
def test_fixture_prints_expected_canonical_text(dialect: str, fixture: Fixture) -> None:
    query = parse(fixture.text, dialect=dialect)
    expected = fixture.expected if fixture.expected is not None else fixture.text
    assert to_text(query) == expected


@pytest.mark.parametrize(("dialect", "fixture"), CASES, ids=[f.id for _, f in CASES])
def test_fixture_round_trips(dialect: str, fixture: Fixture) -> None:
    query = parse(fixture.text, dialect=dialect)
    assert parse(to_text(query)) == query
    assert parse(to_text(query), dialect="canonical") == query


@pytest.mark.parametrize(("dialect", "fixture"), CASES, ids=[f.id for _, f in CASES])
def test_fixture_dialect_is_detected(dialect: str, fixture: Fixture) -> None:
    assert parse(fixture.text) == parse(fixture.text, dialect=dialect)


@pytest.mark.parametrize(("dialect", "fixture"), CASES, ids=[f.id for _, f in CASES])
def test_fixture_validates(dialect: str, fixture: Fixture) -> None:
    analyzed = analyze(parse(fixture.text, dialect=dialect), udfs=_udfs(fixture))
    assert analyzed.strategy is not None
    assert list(analyzed.variables)


def test_every_dialect_has_fixtures() -> None:
    counts = {d: sum(1 for dd, _ in CASES if dd == d) for d in DIALECT_FILES}
    assert all(n >= 5 for n in counts.values()), counts
