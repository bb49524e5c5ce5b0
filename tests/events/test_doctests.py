"""The examples in the events modules' docstrings run as tests."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["kleene.events.model", "kleene.events.readers", "kleene.events.writers",
           "kleene.events.convert", "kleene.events.badrows", "kleene.events.ordering",
           "kleene.events.sources", "kleene.events.sources.csvrange", "kleene.events.textcols",
           "kleene.udf"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0
