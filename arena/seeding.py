"""Seeds derived from a root seed and a name: one recipe for every keyed seed.

Policies (by entry name), match sides (by side and config) and analysis rows (by the
names of the row) each draw from a seed that depends on the root seed and a text key
only, so a result never depends on which other entries, matches or rows exist, or on
the order in which they are built.
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["keyed_seed", "keyed_sequence"]


def keyed_sequence(root: int, key: str) -> np.random.SeedSequence:
    """A ``SeedSequence`` from (root, the first 8 bytes of sha256(key))."""
    digest = hashlib.sha256(key.encode()).digest()
    return np.random.SeedSequence([int(root), int.from_bytes(digest[:8], "little")])


def keyed_seed(root: int, key: str) -> int:
    """A non-negative 63-bit integer seed drawn from :func:`keyed_sequence`."""
    state = keyed_sequence(root, key).generate_state(1, np.uint64)[0]
    return int(state >> np.uint64(1))
