"""The mean of a per-market metric with its Student-t interval.

Used by evaluation (``arena eval``) and by the tournament analyses; kept apart from the
rollout code so that an analysis imports no policy or engine.
"""

from __future__ import annotations

import numpy as np
from scipy.special import stdtrit


def mean_ci(x: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, lower, upper): Student-t interval over the finite entries (nan bounds with fewer
    than two, nan everything with none)."""
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return (float("nan"),) * 3
    m = float(x.mean())
    if x.size == 1:  # one market says nothing about the spread
        return m, float("nan"), float("nan")
    half = float(stdtrit(x.size - 1, 0.5 + level / 2) * x.std(ddof=1) / np.sqrt(x.size))
    return m, m - half, m + half
