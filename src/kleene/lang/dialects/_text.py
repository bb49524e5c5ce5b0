"""Text-level helpers shared by dialects that accept the papers' typography."""

from __future__ import annotations


def mask_currency(text: str) -> str:
    """Replace a ``$`` that precedes a number (outside quotes and comments) by a space.

    Offsets are unchanged, so spans and carets still point into the original text.

    Example:
        >>> mask_currency("a.p < $50 AND a.s = '$5'")
        "a.p <  50 AND a.s = '$5'"
    """
    out = list(text)
    quote = ""
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c == "-" and text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        elif c == "$":
            j = i + 1
            while j < n and text[j] in " \t":
                j += 1
            if j < n and (text[j].isdigit() or text[j] == "."):
                out[i] = " "
        i += 1
    return "".join(out)


__all__ = ["mask_currency"]
