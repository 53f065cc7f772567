"""How every number and table of a report is written: three significant figures, ``-``
for a missing value, confidence intervals as ``mean [lower, upper]``, and ``Section``, one
titled table, laid out by ``tabulate``."""

from __future__ import annotations

import math
from dataclasses import dataclass

from tabulate import tabulate


def _decimals(magnitude: float) -> int:
    """About three significant figures: 1 decimal from 100 up, 2 from 1, else 3."""
    return 1 if magnitude >= 100 else 2 if magnitude >= 1 else 3


def _fixed(x: float, decimals: int) -> str:
    """``x`` with ``decimals`` decimals; a value that rounds to zero loses its minus sign."""
    if not math.isfinite(x):
        return "-"
    text = f"{x:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0.0 else text


def fmt(x: float | None) -> str:
    """A number for a table, ``-`` for a missing one."""
    if x is None or not math.isfinite(x):
        return "-"
    return _fixed(x, _decimals(abs(x)))


def fmt_ci(mean: float, lower: float, upper: float, *, point: bool = True) -> str:
    """``mean [lower, upper]`` (only ``[lower, upper]`` when ``point`` is False), all three
    with the decimals of the largest."""
    if not math.isfinite(mean):
        return "-"
    finite = [abs(v) for v in (mean, lower, upper) if math.isfinite(v)]
    d = _decimals(max(finite))
    lo, hi = _fixed(lower, d), _fixed(upper, d)
    return f"{_fixed(mean, d)} [{lo}, {hi}]" if point else f"[{lo}, {hi}]"


@dataclass(frozen=True)
class Section:
    """One table: what it shows, a title, a one-line explanation, headers and text rows."""

    key: str
    """``ratings``, ``side:seller``, ``pairs:seller``, ``split``, ``conduct``,
    ``effect:mandatory``, ...: stable names for a report to hang figures on."""
    title: str
    note: str
    headers: list[str]
    rows: list[list[str]]


def render(section: Section, tablefmt: str = "simple") -> str:
    """One table's body in a ``tabulate`` format (``(no rows)`` when empty)."""
    if not section.rows:
        return "(no rows)"
    return tabulate(section.rows, headers=section.headers, tablefmt=tablefmt,
                    disable_numparse=True)  # fmt: skip


def format_section(section: Section, tablefmt: str = "simple") -> str:
    """Title, underline, note and table, as text."""
    note = f"{section.note}\n" if section.note else ""
    title = section.title
    return f"{title}\n{'=' * len(title)}\n{note}{render(section, tablefmt)}"


__all__ = ["Section", "fmt", "fmt_ci", "format_section", "render"]
