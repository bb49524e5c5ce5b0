"""The conformance suite runs every case on every registered backend (kleene.backends.BACKENDS).

A new engine joins every case by being registered there — no case is edited. Backends whose
module cannot be imported yet are left out of the parametrization, and
``test_every_registered_backend_importable`` fails loudly for them instead.
"""

from __future__ import annotations

from typing import Any

import pytest

from kleene.backends import BACKENDS, BackendFn


def _loadable() -> list[Any]:
    params: list[Any] = []
    for name, backend in BACKENDS.items():
        try:
            backend.load()
        except (ImportError, AttributeError):
            continue  # reported by test_every_registered_backend_importable
        marks = [pytest.mark.spark] if backend.needs_spark else []
        params.append(pytest.param(name, marks=marks, id=name))
    return params


LOADABLE = _loadable()


@pytest.fixture(params=LOADABLE)
def backend_name(request: pytest.FixtureRequest) -> str:
    """The name of a registered, importable backend."""
    name: str = request.param
    return name


@pytest.fixture
def backend(backend_name: str) -> BackendFn:
    """A registered backend's evaluation function ``(AnalyzedQuery, EventBatch) -> matches``."""
    return BACKENDS[backend_name].load()
