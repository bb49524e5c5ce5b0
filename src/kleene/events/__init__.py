"""Events in and out: the columnar event model, readers, writers and the match record."""

from .match import Binding, EventId, Match
from .model import ID, RESERVED, TS, TYPE, EventBatch, TimeInfo

__all__ = ["ID", "RESERVED", "TS", "TYPE", "Binding", "EventBatch", "EventId", "Match", "TimeInfo"]
