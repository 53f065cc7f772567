"""Labels and ticks drawn as outlines (tournaments/plot_text.py) land where matplotlib's own
Text and ticks would."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.textpath import TextPath

from tournaments.plot_text import _text_path, xticks, yticks
from tournaments.plots import _axes, _figure

WORDS = ["greedy_matcher vs rl_buyer+disclosed", "0.694", "Tg AV fi", "1,000", "x"]


def _rendered(fig) -> None:
    fig.canvas.draw()


@pytest.mark.parametrize("text", WORDS)
@pytest.mark.parametrize("size", [6.5, 10.0])
def test_a_label_is_as_wide_and_placed_as_a_text(text, size):
    fig = _figure(4.0, 2.0)
    ax = _axes(fig, 0.5, 0.5, 3.0, 1.0)
    for ha in ("left", "center", "right"):
        t = ax.text(0.5, 0.5, text, fontsize=size, ha=ha, va="center", transform=ax.transAxes)
        _rendered(fig)
        box = t.get_window_extent()  # pixels, at the figure's dpi
        anchor = ax.transAxes.transform((0.5, 0.5))
        path = _text_path(text, size, ha, "center")
        ext = path.get_extents()
        scale = fig.dpi / 72.0
        # The ink lies inside the box the Text takes, placed the same way around the anchor,
        # and is as wide as matplotlib's own outline of the text (same glyphs, kerning).
        assert ext.x0 * scale + anchor[0] >= box.x0 - 1.5
        assert ext.x1 * scale + anchor[0] <= box.x1 + 1.5
        reference = TextPath((0.0, 0.0), text, size=size).get_extents()
        assert ext.width == pytest.approx(reference.width, abs=0.05 * size)
        assert ext.height == pytest.approx(reference.height, abs=0.05 * size)
        assert ext.y0 * scale + anchor[1] >= box.y0 - 1.5
        assert ext.y1 * scale + anchor[1] <= box.y1 + 1.5
        t.remove()


def test_hand_drawn_x_ticks_are_the_locator_s_and_the_formatter_s():
    fig = _figure(4.0, 2.0)
    ax = _axes(fig, 0.5, 0.5, 3.0, 1.0)
    ax.plot([3.0, 1234.0], [0.0, 1.0])
    lim = ax.get_xlim()
    expected_locs = [x for x in ax.get_xticks() if lim[0] <= x <= lim[1]]
    labels = ax.xaxis.get_major_formatter().format_ticks(expected_locs)
    xticks(ax, 8, grid=True)
    assert ax.get_xlim() == lim  # fixed where they were
    assert list(ax.get_xticks()) == []  # matplotlib's own ticks are gone
    marks = [ln for ln in ax.lines if ln.get_marker() not in (None, "None", "")]
    np.testing.assert_allclose(marks[0].get_xdata(), expected_locs)
    drawn = [c for c in ax.collections if hasattr(c, "get_paths") and c.get_offsets().size]
    texts = [p for c in drawn for p in c.get_paths()]
    assert len(texts) >= len(labels)
    assert [round(float(p.get_extents().width), 3) for p in texts[: len(labels)]] == [
        round(float(_text_path(t, 8, "center", "top").get_extents().width), 3) for t in labels
    ]
    _rendered(fig)


def test_an_axis_that_needs_an_offset_keeps_matplotlib_s_ticks():
    fig = _figure(4.0, 2.0)
    ax = _axes(fig, 0.5, 0.5, 3.0, 1.0)
    ax.plot([1e6 + 1.0, 1e6 + 2.0], [0.0, 1.0])
    before = list(ax.get_xticks())
    xticks(ax, 8, grid=True)
    assert list(ax.get_xticks()) == before and len(before) > 1
    _rendered(fig)


def test_y_ticks_mark_every_row_and_label_it():
    fig = _figure(4.0, 3.0)
    ax = _axes(fig, 1.5, 0.5, 2.0, 2.0)
    y = np.arange(5.0)
    yticks(ax, y, [f"row {k}" for k in range(5)])
    assert list(ax.get_yticks()) == []
    np.testing.assert_allclose(ax.lines[0].get_ydata(), y)
    offsets = ax.collections[-1].get_offsets()
    np.testing.assert_allclose(offsets[:, 1], y)
    _rendered(fig)


@pytest.mark.parametrize("height", [1.0, 2.9])  # a single block of rows, and several
def test_the_png_holds_exactly_the_pixels_drawn(tmp_path, height):
    from PIL import Image

    from tournaments.plots import _save

    fig = _figure(3.0, height)
    ax = _axes(fig, 0.5, 0.3, 2.0, height - 0.5)
    ax.plot([0.0, 1.0, 2.0], [1.0, 0.0, 2.0], color="tab:orange")
    ax.fill_between([0.0, 2.0], [0.0, 0.0], [1.0, 2.0], alpha=0.3)
    _save(fig, tmp_path / "a.png")
    drawn = np.asarray(fig.canvas.buffer_rgba())
    with Image.open(tmp_path / "a.png") as im:
        assert im.mode == "RGBA" and im.info.get("dpi", (0, 0))[0] == pytest.approx(fig.dpi, 0.01)
        np.testing.assert_array_equal(np.asarray(im), drawn)
    _save(fig, tmp_path / "b.png")
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()
