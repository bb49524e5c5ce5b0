"""The conformance suite runs every case on every registered backend (kleene.backends.BACKENDS).

A new engine joins every case by being registered there — no case is edited. Backends whose
module cannot be imported yet are left out of the parametrization, and
``test_every_registered_backend_importable`` (test_registry.py) fails loudly for them instead.
Spark backends carry the ``spark`` marker.
"""

from __future__ import annotations

from typing import Any

import pytest

from kleene.backends import BACKENDS, BackendFn
from kleene.testing.timeline import importable_backends


def backend_params(*, include_oracle: bool = True) -> list[Any]:
    """``pytest.param`` per importable backend, marked ``spark`` when it needs Spark."""
    return [pytest.param(name, id=name,
                         marks=[pytest.mark.spark] if BACKENDS[name].needs_spark else [])
            for name in importable_backends() if include_oracle or name != "oracle"]


@pytest.fixture(params=backend_params())
def backend_name(request: pytest.FixtureRequest) -> str:
    """The name of a registered, importable backend."""
    name: str = request.param
    return name


@pytest.fixture
def backend(backend_name: str) -> BackendFn:
    """A registered backend's evaluation function ``(AnalyzedQuery, EventBatch) -> matches``."""
    return BACKENDS[backend_name].load()
