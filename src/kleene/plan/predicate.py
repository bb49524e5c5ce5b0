"""A placed WHERE conjunct and when it is evaluated (plain plan data, shared by every plan).

The conjunct's expression is kept as data (for explain); what a matcher runs is its compiled
function and, for the generated kernel, its inline source -- both produced by the plan
compiler, so a matcher never needs the AST.
"""

from __future__ import annotations

import enum
import itertools
from dataclasses import field
from typing import TYPE_CHECKING, Any

from ..errors import EngineError
from ..frozen import dataclass
from .layout import CompiledExpr

if TYPE_CHECKING:
    from .. import ast


class Timing(enum.Enum):
    """When a placed predicate is evaluated."""

    TAKE = "take"
    """On the take edge of its variable (for a Kleene variable: per appended element)."""
    CLOSE = "close"
    """On the proceed edge that closes its Kleene variable (``last``, aggregates)."""
    NEGATION = "negation"
    """Restricts a negated variable; checked against the candidate negating events."""
    MATCH = "match"
    """Checked once on the complete match (variables in optional OR branches)."""


@dataclass(frozen=True, slots=True)
class Predicate:
    """A placed WHERE conjunct."""

    expr: ast.Expr
    var: str
    """The variable it is placed at (the last one it mentions, in pattern order)."""
    timing: Timing
    compiled: CompiledExpr
    iter_var: str | None
    """The list variable it ranges over element by element, if any."""
    prev: bool
    """True if it uses ``v[i-1]`` (then it ranges over consecutive pairs)."""
    abs_need: int
    """Largest absolute index used on its own variable (0 if none)."""
    vars: frozenset[str]
    opt_slots: tuple[int, ...] = ()
    """Slots of OR-branch variables it mentions: if one is unbound the conjunct is skipped."""
    general: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    """For a conjunct over several list variables: (slots sharing ``i``, slots ranging
    independently); the compiled function then takes ``(B, (i, j...))``."""
    inline: tuple[str | None, str | None] = field(default=(None, None), compare=False)
    """For a take predicate, the generated kernel's inline source of "the conjunct is TRUE"
    over the event ``e`` and the parent run's bindings ``B`` (no new ``B`` needed): when ``e``
    is the first event of its variable, and when it is a later element of a list variable.
    None where there is no inline form (the kernel then calls :attr:`compiled`)."""
    inline_plain: tuple[str | None, str | None] | None = field(default=None, compare=False)
    """:attr:`inline` for attribute values that are never booleans (no bool-vs-number guard:
    the runtime selects it from the columns' Arrow types), or None where it is the same."""
    inline_env: tuple[tuple[str, Any], ...] = field(default=(), compare=False)
    """The names the inline sources use (helpers and UDF objects, never user text)."""

    def skipped(self, b: tuple[Any, ...]) -> bool:
        """True when it mentions an unbound variable (docs/semantics.md 5: skipped)."""
        for s in self.opt_slots:
            if b[s] is None:
                return True
        return False

    def check_all(self, b: tuple[Any, ...], slot: int | None) -> bool:
        """Evaluate over every element (or pair) of the iterated variable; TRUE required."""
        if self.opt_slots and self.skipped(b):
            return True
        fn = self.compiled.fn
        if self.general is not None:
            idx, free = self.general
            if idx:
                n = max(len(b[s]) for s in idx)
                irange: Any = range(1 if self.prev else 0, n)
            else:
                irange = (None,)
            for i in irange:
                for combo in itertools.product(*(range(len(b[s])) for s in free)):
                    if fn(b, (i, *combo)) is not True:  # type: ignore[arg-type]
                        return False
            return True
        if slot is None:
            return fn(b, 0) is True
        lst = b[slot]
        for i in range(1 if self.prev else 0, len(lst)):
            if fn(b, i) is not True:
                return False
        return True


class Unsupported(EngineError):
    """A plan kind does not cover this pattern (another one may)."""


__all__ = ["Predicate", "Timing", "Unsupported"]
