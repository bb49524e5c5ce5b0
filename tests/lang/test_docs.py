"""Every ```query block of docs/language.md parses (in the dialect after the fence), validates
and round-trips; a block introduced by "prints as" is the canonical text of the one before."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kleene.lang import parse, to_text
from kleene.semantic import analyze

DOC = Path(__file__).resolve().parents[2] / "docs" / "language.md"
BLOCK = re.compile(r"```query(?: (\w+))?\n(.*?)```", re.S)


def blocks() -> list[tuple[str | None, str, bool, str | None]]:
    text = DOC.read_text(encoding="utf-8")
    out: list[tuple[str | None, str, bool, str | None]] = []
    last_end = 0
    prev: str | None = None
    for m in BLOCK.finditer(text):
        prints_as = text[last_end:m.start()].rstrip().endswith("prints as")
        body = m.group(2).strip("\n")
        out.append((m.group(1), body, prints_as, prev))
        prev = to_text(parse(body, dialect=m.group(1)))
        last_end = m.end()
    return out


CASES = blocks()


def test_the_page_has_examples_for_every_dialect() -> None:
    dialects = {d for d, *_ in CASES}
    assert dialects == {None, "sase", "faem", "logpp", "cem", "snoop", "match_recognize"}
    assert len(CASES) >= 25


@pytest.mark.parametrize(("dialect", "text", "prints_as", "previous"), CASES,
                         ids=[f"block{i}" for i in range(len(CASES))])
def test_doc_example(dialect: str | None, text: str, prints_as: bool,
                     previous: str | None) -> None:
    q = parse(text, dialect=dialect)
    analyze(q, udfs={"matches": lambda *a: None})
    assert parse(to_text(q)) == q
    if prints_as:
        assert previous == text
