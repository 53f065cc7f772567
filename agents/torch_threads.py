"""One torch thread while policies play in this process.

The torch policies are small networks (a few 48-wide layers over a batch of markets):
on an idle machine a second intra-op thread buys them a little (the shipped seller's
greedy play, ``benchmarks/training.py``: 45.6k seller-turns/s on one thread, 53-56k on
two), and on a machine whose other cores are busy its spin-waits cost a great deal (the
default tournament without Ray took 490 s of CPU with torch's default of one thread per
core beside one other busy process, 26 s for a tenth of it with one thread). Ray's
workers already run with one thread (Ray sets ``OMP_NUM_THREADS=1``);
``one_torch_thread`` does the same around play in this process, and puts the setting
back after. It touches torch only where torch is already imported:
playing scripted agents never imports it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


__all__ = ["one_torch_thread"]
