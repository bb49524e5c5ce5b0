"""The public façade exports exactly what it documents."""

import kleene
import kleene.errors


def test_all_names_exist() -> None:
    """Every name in __all__ is importable from the package."""
    for name in kleene.__all__:
        assert hasattr(kleene, name), name


def test_errors_subclass_builtins() -> None:
    """Query errors are ValueErrors; engine errors RuntimeErrors (so plain except clauses work)."""
    assert issubclass(kleene.QuerySyntaxError, ValueError)
    assert issubclass(kleene.QueryValidationError, ValueError)
    assert issubclass(kleene.InputError, ValueError)
    assert issubclass(kleene.EngineError, RuntimeError)
    assert issubclass(kleene.errors.MissingExtraError, ImportError)


def test_compile_options_reach_run() -> None:
    """Caps given to kleene.compile apply to query.run, and a backend without options refuses
    them by name instead of ignoring them."""
    import pytest

    from kleene.errors import CapacityError, QueryValidationError
    from kleene.testing.timeline import events

    stream = events("a1@1 a2@2 b1@3 b2@4")
    text = "PATTERN SEQ(A a, B b) WITHIN 10 seconds USING skip-till-any-match"
    assert len(kleene.compile(text).run(stream)) == 4
    with pytest.raises(CapacityError, match="max_matches_per_call"):
        kleene.compile(text, max_matches_per_call=2).run(stream)
    with pytest.raises(QueryValidationError, match="engine 'oracle' takes no options"):
        kleene.compile(text, engine="oracle", max_matches_per_call=2).run(stream)
