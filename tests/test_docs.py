"""Every docstring example in the package runs (sqlglot's test_docs): one test per module, so
no module can add an example that silently stops being true. kleene.spark is covered by the
Spark tests (its examples need a session)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import kleene

MODULES = ["kleene", *sorted(
    m.name for m in pkgutil.walk_packages(kleene.__path__, "kleene.")
    if not m.name.startswith("kleene.spark")
)]


def test_the_walk_finds_every_layer() -> None:
    """Guard against an empty parametrization: each layer has modules here."""
    for layer in ("kleene.lang.", "kleene.semantic.", "kleene.plan.", "kleene.runtime.",
                  "kleene.events.", "kleene.testing.", "kleene.cli."):
        assert any(m.startswith(layer) for m in MODULES), layer


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
