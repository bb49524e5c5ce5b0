"""The examples in the language layer's docstrings run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "kleene.lang", "kleene.lang.lexer", "kleene.lang.parser", "kleene.lang.printer",
    "kleene.lang.dialects.sase", "kleene.lang.dialects.faem", "kleene.lang.dialects.logpp",
    "kleene.lang.dialects.cem", "kleene.lang.dialects.snoop", "kleene.semantic.analyzer",
    "kleene.builder", "kleene.diagnostics", "kleene.lang.dialects._text",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
