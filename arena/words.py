"""Counts and values in words, for every message a user reads."""

from __future__ import annotations

import math
from typing import Any


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 market``, ``2 markets``, ``1,000 markets``; ``many`` for irregular plurals."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def shown(value: Any, most: int = 100) -> str:
    """``repr(value)`` as an error message shows it, one readable line: a huge integer by
    its number of digits, a long text cut short with its length."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 96:
        try:
            return f"an integer of {len(str(abs(value)))} digits"
        except ValueError:  # past Python's limit on printing an integer
            return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    text = repr(value)
    return text if len(text) <= most else f"{text[: most - 40]}... ({len(text)} characters)"
