"""The bad-row policy shared by every source: fail, skip, or dead-letter a row that is not an event.

A source reports rows it could not parse (:class:`BadRow`); conversion reports cells it could
not convert; :class:`BadRows` applies the policy to both, counts what it dropped, keeps a few
examples for the run summary and writes dead letters. Nothing is dropped silently.

Example:
    >>> BadRowPolicy.parse("dead-letter=bad.jsonl")
    BadRowPolicy(action='dead-letter', path='bad.jsonl')
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import IO, TYPE_CHECKING, Any, Literal

import numpy as np
import pyarrow as pa

from ..errors import InputError
from ..frozen import dataclass
from .convert import CellError

if TYPE_CHECKING:
    from .sources.base import Raw


@dataclass(frozen=True, slots=True)
class BadRowPolicy:
    """What to do with a bad row: ``fail``, ``skip`` or ``dead-letter`` to ``path``."""

    action: Literal["fail", "skip", "dead-letter"] = "fail"
    path: str | None = None

    @staticmethod
    def parse(text: str | BadRowPolicy) -> BadRowPolicy:
        """Parse ``fail``, ``skip`` or ``dead-letter=PATH``."""
        if isinstance(text, BadRowPolicy):
            return text
        t = text.strip()
        if t in ("fail", "skip"):
            return BadRowPolicy(t)  # type: ignore[arg-type]
        if t.startswith("dead-letter="):
            path = t.partition("=")[2].strip()
            if path:
                return BadRowPolicy("dead-letter", path)
        raise InputError(f"unknown bad-row policy {text!r}; use fail, skip or dead-letter=PATH")


@dataclass(frozen=True, slots=True)
class BadRow:
    """A row that did not become an event. ``row`` is its 0-based index in the input."""

    row: int
    reason: str
    column: str | None = None
    line: int | None = None
    record: Mapping[str, Any] | None = None
    text: str | None = None

    def error(self, source: str | None) -> InputError:
        """The user-facing error for this row (file, 1-based row, column, reason)."""
        reason = self.reason if self.line is None else f"{self.reason} (line {self.line})"
        return InputError(reason, path=source, row=self.row + 1, column=self.column)


class BadRows:
    """Applies a :class:`BadRowPolicy` to the bad rows of each chunk and counts them."""

    EXAMPLES = 3
    """How many bad-row messages the report keeps."""

    def __init__(self, policy: BadRowPolicy) -> None:
        self.policy = policy
        self.skipped = 0
        self.dead_lettered = 0
        self.examples: list[str] = []
        self._file: IO[str] | None = None
        if policy.action == "dead-letter":
            self._open()  # early: an unwritable path fails before any reading

    def apply(self, raw: Raw, errors: list[CellError], source: str,
              result: pa.Table | None = None) -> pa.Table | None:
        """Handle the source's bad rows of ``raw`` and the cell ``errors`` of its conversion;
        return ``result`` (the converted rows of ``raw``) without the rows that had errors."""
        first: dict[int, CellError] = {}
        for e in errors:
            first.setdefault(e.position, e)
        bad = list(raw.bad) + [
            BadRow(int(raw.ids[p]) - raw.offset, e.reason, column=e.column,
                   record=_jsonable(raw.table.slice(p, 1).to_pylist()[0]))
            for p, e in sorted(first.items())]
        bad.sort(key=lambda b: b.row)
        if not bad:
            return result
        if self.policy.action == "fail":
            raise bad[0].error(source)
        for b in bad[: max(0, self.EXAMPLES - len(self.examples))]:
            self.examples.append(str(b.error(source)))
        if self.policy.action == "skip":
            self.skipped += len(bad)
        else:
            self._write(bad, source, raw.offset)
            self.dead_lettered += len(bad)
        if result is None or not first:
            return result
        keep = np.ones(result.num_rows, dtype=bool)
        keep[list(first)] = False
        return result.filter(pa.array(keep))

    def close(self) -> None:
        """Close the dead-letter file."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def _open(self) -> IO[str]:
        if self._file is None:
            assert self.policy.path is not None
            try:
                self._file = open(self.policy.path, "w", encoding="utf-8")  # noqa: SIM115
            except OSError as e:
                raise InputError(f"cannot write the dead-letter file: {e.strerror}",
                                 path=self.policy.path) from None
        return self._file

    def _write(self, bad: list[BadRow], source: str, offset: int = 0) -> None:
        """One JSON line per bad row: ``row`` counts data rows from 1 in ``source`` (as error
        messages do), ``index`` from 0 across the whole input, like event ids (the id the row
        would have had without --id-col), ``line`` is the physical line where known."""
        out = self._open()
        for b in bad:
            rec: dict[str, Any] = {"source": source, "row": b.row + 1,
                                   "index": b.row + offset}
            if b.line is not None:
                rec["line"] = b.line
            if b.column is not None:
                rec["column"] = b.column
            rec["reason"] = b.reason
            if b.record is not None:
                rec["record"] = b.record
            if b.text is not None:
                rec["text"] = b.text
            out.write(json.dumps(rec, default=str) + "\n")


def _jsonable(record: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (v if isinstance(v, (str, int, float, bool)) or v is None else str(v))
            for k, v in record.items()}


__all__ = ["BadRow", "BadRowPolicy", "BadRows"]
