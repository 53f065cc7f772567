"""Counter-based noise: uniforms that depend only on the integers they are keyed by.

A policy that draws ``uniform(seed, market_key, turn, buyer)`` gets the same
number whether it decides one market or 4,096 at once, and whatever order the
markets are played in. That is what makes stochastic policies batch-invariant
and reproducible without any global or per-market generator state.

The mixer is SplitMix64's finalizer applied to a running combination of the
keys; it is not cryptographic, and it need not be.
"""

from __future__ import annotations

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def hash64(*keys: np.ndarray | int) -> np.ndarray:
    """A 64-bit hash of the keys, elementwise with broadcasting."""
    with np.errstate(over="ignore"):
        h = np.uint64(0x243F6A8885A308D3)
        for k in keys:
            k = np.asarray(k)
            if k.dtype != np.uint64:
                k = k.astype(np.int64).astype(np.uint64)
            h = _mix(h + _GOLDEN + k)
        return np.asarray(h, dtype=np.uint64)


def uniform(*keys: np.ndarray | int) -> np.ndarray:
    """Uniforms in [0, 1) keyed by the integers given (53 bits of the hash)."""
    return (hash64(*keys) >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def normal(*keys: np.ndarray | int) -> np.ndarray:
    """Standard normals by Box-Muller on two keyed uniforms."""
    u1 = uniform(*keys, 1)
    u2 = uniform(*keys, 2)
    return np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2.0 * np.pi * u2)
