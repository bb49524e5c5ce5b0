"""Loader for the text fixtures in tests/fixtures/lang/.

A fixture file holds blocks. ``=== name`` starts a block; ``#`` lines right after it are
comments, or settings written ``# key: value`` (``udfs: f, g`` registers stub UDFs; ``auto: no``
skips the dialect auto-detection check). Then comes the input text, optionally followed by
``--- canonical`` and the expected canonical text (absent: the input is its own canonical
form) or ``--- error ClassName`` and the exact rendered message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "lang"


@dataclass(frozen=True)
class Fixture:
    """One block of a fixture file."""

    file: str
    name: str
    text: str
    expected: str | None = None
    error_class: str | None = None
    settings: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """pytest id."""
        return f"{self.file}:{self.name}"


def load(filename: str) -> list[Fixture]:
    """Parse one fixture file."""
    lines = (FIXTURES / filename).read_text(encoding="utf-8").split("\n")
    blocks: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.startswith("=== "):
            blocks.append((line[4:].strip(), []))
        elif blocks:
            blocks[-1][1].append(line)
    out = []
    for name, body in blocks:
        settings: dict[str, str] = {}
        while body and body[0].startswith("#"):
            text = body.pop(0)[1:].strip()
            key, sep, value = text.partition(":")
            if sep and key.strip().isidentifier():
                settings[key.strip()] = value.strip()
        sections: list[tuple[str, list[str]]] = [("input", [])]
        for line in body:
            if line.startswith("--- "):
                sections.append((line[4:].strip(), []))
            else:
                sections[-1][1].append(line)
        text = "\n".join(sections[0][1]).strip("\n")
        expected = None
        error_class = None
        for header, content in sections[1:]:
            value = "\n".join(content).rstrip("\n")
            if header == "canonical":
                expected = value.strip("\n")
            elif header.startswith("error"):
                error_class = header.split()[1]
                expected = value
        out.append(Fixture(filename, name, text, expected, error_class, settings))
    return out
