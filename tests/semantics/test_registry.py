"""Every registered backend must load; the oracle must be one of them."""

from __future__ import annotations

import pytest

from kleene.backends import BACKENDS


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_every_registered_backend_importable(name: str) -> None:
    fn = BACKENDS[name].load()  # raises ImportError/AttributeError loudly if missing
    assert callable(fn)


def test_oracle_is_registered() -> None:
    from kleene.testing.oracle import evaluate

    assert BACKENDS["oracle"].load() is evaluate
