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
