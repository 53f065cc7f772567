"""agents.rows: a batch's markets shared among threads."""

from __future__ import annotations

import threading

import pytest

from agents.rows import map_rows, split


@pytest.mark.parametrize(
    ("rows", "threads", "min_rows", "parts"),
    [(10, 2, 1, 2), (10, 3, 4, 2), (10, 4, 11, 1), (7, 8, 1, 7), (0, 2, 1, 1), (5, 1, 1, 1)],
)
def test_split_covers_every_row_once_in_near_equal_slices(rows, threads, min_rows, parts):
    slices = split(rows, threads, min_rows)
    assert len(slices) == parts
    assert [r for s in slices for r in range(s.start, s.stop)] == list(range(rows))
    sizes = [s.stop - s.start for s in slices]
    assert max(sizes) - min(sizes) <= 1
    assert parts == 1 or min(sizes) >= min_rows


def test_map_rows_runs_the_slices_side_by_side_and_keeps_their_order():
    seen = set()

    def fn(s: slice) -> tuple[int, int]:
        seen.add(threading.get_ident())
        return s.start, s.stop

    assert map_rows(fn, 9, 3, 1) == [(0, 3), (3, 6), (6, 9)]
    assert threading.get_ident() not in seen and len(seen) >= 1  # on the pool's threads
    assert map_rows(fn, 9, 1, 1) == [(0, 9)]


def test_an_error_in_a_thread_is_raised_to_the_caller():
    def fn(s: slice) -> None:
        if s.start:
            raise ValueError(f"row {s.start}")

    with pytest.raises(ValueError, match="row 5"):
        map_rows(fn, 10, 2, 1)
