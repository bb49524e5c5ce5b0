"""Query text is data: nothing from it reaches eval/exec/import, names cannot break out of
their quotes, and functions resolve only to built-ins or registered UDFs."""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from typing import Any

import pytest

from kleene import ast
from kleene.errors import QueryValidationError
from kleene.lang import parse, to_text
from kleene.semantic import analyze

PAYLOADS = [
    "__import__('os').system('touch /tmp/pwned')",
    "x' OR '1'='1",
    'A" b, C c) WHERE 1=1 --',
    "a.__class__.__bases__",
    "\\'; DROP TABLE events; --",
    "{{7*7}}",
    "line1\nline2 -- comment",
]


@pytest.fixture
def no_dynamic_code(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Fail if eval/exec/compile run; record every module imported meanwhile."""
    imported: list[str] = []
    real_import = builtins.__import__

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("dynamic code execution from the language layer")

    def recording_import(name: str, *args: Any, **kwargs: Any) -> Any:
        imported.append(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    monkeypatch.setattr(builtins, "compile", forbidden)
    monkeypatch.setattr(builtins, "__import__", recording_import)
    yield imported


@pytest.mark.parametrize("payload", PAYLOADS)
def test_payload_in_string_literal_stays_a_string(payload: str,
                                                  no_dynamic_code: list[str]) -> None:
    literal = "'" + payload.replace("'", "''") + "'"
    q = parse(f"PATTERN SEQ(A a, B b) WHERE a.s = {literal}")
    assert q.where == ast.Binary("=", ast.AttrRef("a", "s"), ast.Literal(payload))
    analyze(q)
    assert parse(to_text(q)) == q
    assert not any(name in ("os", "subprocess", "posix") for name in no_dynamic_code)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_payload_as_type_attribute_and_names_round_trips(payload: str,
                                                         no_dynamic_code: list[str]) -> None:
    q = ast.Query(
        pattern=ast.Seq((ast.EventPattern(payload, "a"), ast.EventPattern("B", "b"))),
        name=payload,
        where=ast.Binary("=", ast.AttrRef("a", payload), ast.AttrRef("b", "x")),
        partition_by=(payload,),
        returns=(ast.ReturnItem(ast.AttrRef("a", payload), payload),),
        return_type=payload,
    )
    text = to_text(q)
    again = parse(text)
    assert again == q
    assert isinstance(again.pattern, ast.Seq) and len(again.pattern.items) == 2
    with pytest.raises(QueryValidationError, match="PARTITION BY attribute"):
        analyze(again)  # partition attributes must be plain identifiers
    assert not any(name in ("os", "subprocess", "posix") for name in no_dynamic_code)


@pytest.mark.parametrize("name", ["eval", "exec", "__import__", "getattr", "open", "len",
                                  "compile", "globals"])
def test_python_builtins_are_not_functions_of_the_language(name: str) -> None:
    with pytest.raises(QueryValidationError, match=f"unknown function '{name}'"):
        analyze(parse(f"PATTERN SEQ(A a, B b) WHERE {name}(a.x) = 1"))


def test_dunder_attributes_are_plain_attribute_names(no_dynamic_code: list[str]) -> None:
    q = parse("PATTERN SEQ(A a, B b) WHERE a.__class__ = b.__dict__")
    assert q.where == ast.Binary("=", ast.AttrRef("a", "__class__"),
                                 ast.AttrRef("b", "__dict__"))
    analyze(q)


@pytest.mark.parametrize("var", ["a; import os", "a.b", "1a", "", "a b", "__import__('os')"])
def test_builder_made_variables_must_be_identifiers(var: str) -> None:
    q = ast.Query(pattern=ast.Seq((ast.EventPattern("A", var), ast.EventPattern("B", "b"))))
    with pytest.raises(QueryValidationError, match="is not an identifier"):
        analyze(q)


def test_udf_names_must_be_identifiers() -> None:
    with pytest.raises(QueryValidationError, match="must be an identifier"):
        analyze(parse("PATTERN A a"), udfs={"f(); import os": len})


def test_only_registered_udfs_resolve() -> None:
    calls: list[tuple[object, ...]] = []

    def sim(*args: object) -> float:
        calls.append(args)
        return 0.0

    aq = analyze(parse("PATTERN SEQ(A a, B b) WHERE sim(a.t, b.t) > 0.5"), udfs={"sim": sim})
    assert aq.udfs["sim"] is sim
    assert calls == []  # analysis never calls user code
