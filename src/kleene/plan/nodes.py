"""The logical-block node tree (LogCEP's pushdown automaton), as plain data.

Each logical block is one node whose run state records which sub-expressions are satisfied (a
tuple of child states, the "bitset" on the stack): a take edge advances one child, and the
block's *proceed* fires when its boolean condition holds (all children for AND, exactly ``k``
started-and-done children for ANY / OR). Used by the group plan (:mod:`kleene.plan.blocks`) and
for negated sub-patterns of linear plans; evaluated by :mod:`kleene.runtime.nodes`.

Node states (all plain tuples, so runs are hashable and snapshot as data):

* ``Ev``      0 (waiting) or 1 (bound)
* ``Seq``     ``(index of the current item, its state)``
* ``And``     ``(state of each item)``
* ``Any``     ``(state of each item)``; an item is *chosen* once it has taken an event
* ``Rep``     ``(completed repetitions, state of the one in progress or None)``
* ``Win``     ``(state of the body, first timestamp / position in the body or None)``
"""

from __future__ import annotations

from ..frozen import dataclass


@dataclass(frozen=True, slots=True)
class Ev:
    """One event bound to ``var`` (a list variable appends)."""

    var: str
    type: str | None
    slot: int
    bit: int
    is_list: bool


@dataclass(frozen=True, slots=True)
class Seq:
    """Items in order (NOT items removed; they are negation guards)."""

    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class And:
    """All items, any order, interleaving allowed."""

    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class AnyK:
    """Exactly ``k`` of the items (OR is ``k = 1``)."""

    k: int
    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Rep:
    """``min``..``max`` repetitions of the body, each binding at least one event."""

    body: Node
    min: int
    max: int | None


@dataclass(frozen=True, slots=True)
class Win:
    """A window over the body's positive events."""

    body: Node
    amount: int
    count: bool


Node = Ev | Seq | And | AnyK | Rep | Win


__all__ = ["And", "AnyK", "Ev", "Node", "Rep", "Seq", "Win"]
