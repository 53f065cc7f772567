"""Text and ticks drawn cheaply, for plots of hundreds of labelled rows.

A matplotlib Text artist costs a layout and a rasterisation glyph by glyph on every draw,
and a tick a handful of artists (two marks, two labels, a grid line). Here the labels of
a panel are one collection of glyph outlines (each glyph's outline extracted once per
size and cached), and an axis's tick marks one line, its labels one such collection and
its grid lines one collection, with the sizes and pads of the default style.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np


@functools.cache
def _font():
    """The font that text is drawn in by default (DejaVu Sans), as a FreeType face."""
    from matplotlib.font_manager import FontProperties, findfont, get_font

    return get_font(findfont(FontProperties()))


@functools.cache
def _glyph(char: str, size: float) -> tuple[int, np.ndarray, np.ndarray, float]:
    """(glyph index, outline vertices in points, path codes, advance in points)."""
    from matplotlib.ft2font import LoadFlags

    font = _font()
    font.set_size(size, 72)  # 72 dpi: one pixel is one point
    glyph = font.load_char(ord(char), flags=LoadFlags.NO_HINTING)
    verts, codes = font.get_path()
    return font.get_char_index(ord(char)), verts, codes, glyph.linearHoriAdvance / 65536


@functools.cache
def _kerning(left: int, right: int) -> float:
    """The kerning between two glyphs, in ems."""
    from matplotlib.ft2font import Kerning

    font = _font()
    return font.get_kerning(left, right, Kerning.UNSCALED) / font.units_per_EM


@functools.cache
def _line_box() -> tuple[float, float]:
    """The font's ascent and descent in ems: the least a line of text is high."""
    font = _font()
    os2 = font.get_sfnt_table("OS/2")
    return os2["sTypoAscender"] / font.units_per_EM, -os2["sTypoDescender"] / font.units_per_EM


@functools.lru_cache(maxsize=4096)
def _text_path(text: str, size: float, ha: str = "left", va: str = "center"):
    """One line of text as an outline Path in points, placed around its anchor (0, 0) as a
    Text with this ``ha`` and ``va`` is: glyph advances with kerning (no ligatures), and a
    line box at least as high as the font's ascent and descent. Labels repeat across
    panels: a cached Path is shared, never changed."""
    from matplotlib.path import Path

    glyphs = [_glyph(char, size) for char in text]
    if not glyphs:
        return Path(np.zeros((0, 2)), readonly=True)
    starts, x = [], 0.0
    for k, (index, _, _, advance) in enumerate(glyphs):
        if k:
            x += _kerning(glyphs[k - 1][0], index) * size
        starts.append(x)
        x += advance
    xy = np.concatenate([g[1] for g in glyphs])
    if not len(xy):  # blanks only
        return Path(xy, readonly=True)
    xy[:, 0] += np.repeat(starts, [len(g[1]) for g in glyphs])
    ascent, descent = (size * m for m in _line_box())
    ascent = max(float(xy[:, 1].max()), ascent)
    descent = max(-float(xy[:, 1].min()), descent)
    xy[:, 0] -= {"left": 0.0, "center": x / 2, "right": x}[ha]
    xy[:, 1] -= {
        "baseline": 0.0,
        "center": (ascent - descent) / 2,
        "center_baseline": ascent / 2,  # as a y tick label
        "top": ascent,  # as an x tick label
    }[va]
    return Path(xy, np.concatenate([g[2] for g in glyphs]), readonly=True)


def draw_labels(ax, texts, x, y, *, size: float, color="black", transform=None, **align) -> None:
    """One-line labels at (x, y), in data coordinates unless ``transform``, as one collection
    of glyph outlines, not clipped to the axes. ``align``: ``ha`` and ``va`` as for a Text
    (``va`` "center" unless given)."""
    from matplotlib.collections import PathCollection
    from matplotlib.transforms import Affine2D

    labels = PathCollection(
        [_text_path(t, size, **align) for t in texts],
        offsets=np.column_stack([x, y]),
        offset_transform=transform or ax.transData,
        transform=Affine2D().scale(ax.get_figure(root=True).dpi / 72),
        facecolors=color,
        edgecolors="none",
        linewidths=0.0,
        zorder=2.5,
    )
    ax.add_collection(labels, autolim=False)
    labels.set_clip_on(False)
    labels.set_snap(False)


# The default style's tick marks and pads.
TICK_SIZE, TICK_WIDTH, TICK_PAD = 3.5, 0.8, 3.5  # points


def yticks(ax, y: np.ndarray, labels: Sequence[str] | None, size: float = 10) -> None:
    """Tick marks left of the axes at data ``y``, labelled with ``labels`` unless None."""
    from matplotlib.markers import TICKLEFT
    from matplotlib.transforms import ScaledTranslation

    ax.set_yticks([])
    trans = ax.get_yaxis_transform()
    ax.plot(np.zeros(len(y)), y, transform=trans, ls="none", marker=TICKLEFT, ms=TICK_SIZE,
            mew=TICK_WIDTH, color="black", clip_on=False, zorder=1.5)  # fmt: skip
    if labels is not None:
        fig = ax.get_figure(root=True)
        shift = ScaledTranslation(-(TICK_SIZE + TICK_PAD) / 72, 0.0, fig.dpi_scale_trans)
        zeros = np.zeros(len(y))
        draw_labels(ax, labels, zeros, y, size=size, ha="right", va="center_baseline",
                    transform=trans + shift)  # fmt: skip


def xticks(ax, size: float, grid: bool = False) -> None:
    """The x axis's major ticks (and with ``grid`` its vertical grid lines, alpha 0.3) by hand,
    where its locator and formatter put them for the limits it has now; the limits are then
    fixed. An axis whose formatter wants an offset text or mathtext keeps its own ticks."""
    from matplotlib import rcParams
    from matplotlib.collections import LineCollection
    from matplotlib.markers import TICKDOWN
    from matplotlib.transforms import ScaledTranslation

    lo, hi = ax.get_xlim()
    ax.set_xlim(lo, hi)  # no autoscaling from here on
    formatter = ax.xaxis.get_major_formatter()
    locs = np.asarray(ax.xaxis.get_major_locator()(), dtype=float)
    labels = formatter.format_ticks(locs)
    if formatter.get_offset() or any("$" in t for t in labels):
        if grid:
            ax.grid(axis="x", alpha=0.3)
        return
    lo, hi = min(lo, hi), max(lo, hi)
    inside = (locs >= lo - 1e-10 * (hi - lo)) & (locs <= hi + 1e-10 * (hi - lo))
    locs, labels = locs[inside], [t for t, k in zip(labels, inside, strict=True) if k]
    ax.set_xticks([])
    trans = ax.get_xaxis_transform()
    ax.plot(locs, np.zeros(len(locs)), transform=trans, ls="none", marker=TICKDOWN,
            ms=TICK_SIZE, mew=TICK_WIDTH, color="black", clip_on=False, zorder=1.5)  # fmt: skip
    fig = ax.get_figure(root=True)
    shift = ScaledTranslation(0.0, -(TICK_SIZE + TICK_PAD) / 72, fig.dpi_scale_trans)
    zeros = np.zeros(len(locs))
    draw_labels(ax, labels, locs, zeros, size=size, ha="center", va="top", transform=trans + shift)
    # An axis label keeps its distance below the tick labels (one line of ``size`` high).
    ax.xaxis.labelpad += TICK_SIZE + TICK_PAD + size
    if grid:
        lines = LineCollection(
            [[(x, 0.0), (x, 1.0)] for x in locs],
            transform=trans,
            colors=rcParams["grid.color"],
            linewidths=rcParams["grid.linewidth"],
            linestyles=rcParams["grid.linestyle"],
            alpha=0.3,
            zorder=1.5,  # as an axis's grid: above bars, below lines and markers
        )
        ax.add_collection(lines, autolim=False)


__all__ = ["draw_labels", "xticks", "yticks"]
