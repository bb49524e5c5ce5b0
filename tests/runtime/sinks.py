"""The sink the streaming-output tests hand ``push_to`` / ``close_to``: it keeps the pieces."""

from __future__ import annotations

from kleene.events import Match
from kleene.events.matchtable import MatchColumns


class Collect:
    """A sink that keeps the pieces (and the matches they hold)."""

    def __init__(self) -> None:
        self.pieces: list[MatchColumns | list[Match]] = []

    def __call__(self, piece: MatchColumns | list[Match]) -> None:
        self.pieces.append(piece)

    @property
    def matches(self) -> list[Match]:
        out: list[Match] = []
        for p in self.pieces:
            out += p.matches() if isinstance(p, MatchColumns) else p
        return out

    @property
    def column_pieces(self) -> int:
        """How many pieces came as columns."""
        return sum(isinstance(p, MatchColumns) for p in self.pieces)

    @property
    def column_matches(self) -> int:
        """How many matches came in column pieces."""
        return sum(len(p) for p in self.pieces if isinstance(p, MatchColumns))
