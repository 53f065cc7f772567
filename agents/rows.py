"""A batch's markets shared among threads.

numpy lets go of the interpreter inside its loops, so work on disjoint rows of a batch
runs side by side on as many cores. Policies use it where their per-market numpy work is
large (the RL seller's features, its expert's price table), with as many threads as torch
is given (``torch.get_num_threads()``: one in Ray workers and in-process tournament play,
so nothing here competes with other processes for cores). A market's numbers come from
its own rows alone, so they are the same however the batch is split.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np

T = TypeVar("T")

_POOLS: dict[tuple[int, int], ThreadPoolExecutor] = {}


def split(rows: int, threads: int, min_rows: int) -> list[slice]:
    """``rows`` cut into at most ``threads`` near-equal slices of at least ``min_rows``
    each (one slice when there is not enough for two)."""
    parts = max(1, min(threads, rows // max(min_rows, 1)))
    edges = np.linspace(0, rows, parts + 1).astype(int)
    return [slice(int(a), int(z)) for a, z in zip(edges[:-1], edges[1:], strict=True)]


def map_rows(fn: Callable[[slice], T], rows: int, threads: int, min_rows: int) -> list[T]:
    """``fn`` on each slice of ``split(rows, threads, min_rows)``, side by side, results
    in order (an exception in a thread is raised here)."""
    slices = split(rows, threads, min_rows)
    if len(slices) == 1:
        return [fn(slices[0])]
    key = (os.getpid(), len(slices))  # a forked process has none of its parent's threads
    if key not in _POOLS:
        _POOLS[key] = ThreadPoolExecutor(len(slices), thread_name_prefix="rows")
    return [job.result() for job in [_POOLS[key].submit(fn, s) for s in slices]]


__all__ = ["map_rows", "split"]
