"""Counts in words, for every message a user reads."""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 market``, ``2 markets``, ``1,000 markets``; ``many`` for irregular plurals."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"
