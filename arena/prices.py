"""Prices in whole cents: the one place that rounds a price for a message.

Scripted policies quote whole cents wherever the price range holds one, so that
transcripts read like prices; the market itself accepts any price in the range.
"""

from __future__ import annotations

import numpy as np

__all__ = ["cents"]


def cents(price: np.ndarray, lo: float, hi: float, *, down: bool = False) -> np.ndarray:
    """Prices in whole cents inside [lo, hi], finite on every row.

    Rounded to the nearest cent, or with ``down`` to the cent at or below (a bid must not
    go above what its buyer meant to pay). Non-finite prices become ``lo`` (``down``: before
    rounding; otherwise a NaN becomes ``lo`` and an infinity the nearest end of the range).
    A range narrower than a cent holds no whole-cent price; the last clip keeps it valid.
    """
    if down:
        price = np.where(np.isfinite(price), price, lo)
        # The small nudge keeps a price already in whole cents (x.29 stored as x.28999...)
        # from dropping a cent.
        c = np.floor(price * 100.0 + 1e-6) / 100.0
    else:
        c = np.round(price, 2)
    c = np.clip(c, np.ceil(lo * 100.0) / 100.0, np.floor(hi * 100.0) / 100.0)
    c = np.clip(c, lo, hi)
    return np.where(np.isfinite(c), c, lo)
