"""Bad queries fail with QuerySyntaxError / QueryValidationError whose rendered text (line,
column, source line, caret, what is expected) is pinned in tests/fixtures/lang/errors.txt."""

from __future__ import annotations

import json

import pytest

from kleene import errors
from kleene.lang import parse
from kleene.semantic import analyze

from .fixtures import Fixture, load

CASES = load("errors.txt")


def _run(f: Fixture) -> None:
    udfs = {n.strip(): (lambda *a: None) for n in f.settings.get("udfs", "").split(",")
            if n.strip()}
    schema = json.loads(f.settings["schema"]) if "schema" in f.settings else None
    analyze(parse(f.text, dialect=f.settings.get("dialect")), udfs=udfs, schema=schema)


@pytest.mark.parametrize("fixture", CASES, ids=[f.name for f in CASES])
def test_error_message_is_rendered_exactly(fixture: Fixture) -> None:
    assert fixture.error_class is not None, "error fixtures need a '--- error Class' section"
    cls = getattr(errors, fixture.error_class)
    with pytest.raises(cls) as info:
        _run(fixture)
    assert str(info.value) == fixture.expected


@pytest.mark.parametrize("fixture", CASES, ids=[f.name for f in CASES])
def test_errors_are_value_errors_with_position(fixture: Fixture) -> None:
    with pytest.raises(ValueError) as info:
        _run(fixture)
    err = info.value
    assert isinstance(err, (errors.QuerySyntaxError, errors.QueryValidationError))
    if fixture.name != "syntax-unknown-dialect":
        assert err.line is not None and err.column is not None
        assert f"Line {err.line}, column {err.column}: " in str(err)


def test_kinds_are_split_between_syntax_and_validation() -> None:
    kinds = {f.error_class for f in CASES}
    assert kinds == {"QuerySyntaxError", "QueryValidationError"}
    assert sum(f.name.startswith("validation-") for f in CASES) >= 30
