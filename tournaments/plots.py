"""Plots of an analysis: ratings with interval bars, the surplus split, a forest plot of
the disclosure effect. Each takes the rows of ``tournaments.analysis`` and a path.

Plots are drawn on the Agg canvas directly (no pyplot, no global backend switch), and
their PNGs carry no software or date stamp: the same results give the same bytes.

Speed: a report draws these for hundreds of pairings, so the layout is computed here in
inches (no layout engine measuring every label), bars of one colour are one collection,
and interval bars of one colour are one ``errorbar`` call. Text was most of the rest: a
Text artist costs a layout and a rasterisation glyph by glyph on every draw, and a tick a
handful of artists. So the labels of a panel (pairing names, efficiencies, tick labels)
are one collection of glyph outlines, each glyph's outline extracted once per size and
cached (matplotlib's ``TextPath`` extracts them again for every label: three times slower
here); tick marks are one line and grid lines one collection per axis; only titles, axis
labels and legends are Text. The PNG is written here (filter "Up", zlib level 1, a block
of rows at a time), not by Pillow, which tries every filter on every row: 0.3 s less per
report, files some 15% larger. Measured on the default run, each plot the first drawn in
its process (2 cores): the surplus split (480 rows), the two disclosure forests (240 and
120 rows) and the ratings took 1.8, 0.9, 0.8 and 0.2 s drawn with Text and ticks, 0.68,
0.28, 0.24 and 0.07 s drawn so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tournaments.analysis import RatingRow, SplitRow
from tournaments.effects import EffectRow
from tournaments.formatting import fmt
from tournaments.plot_text import draw_labels, xticks, yticks

DPI = 110
SIDE_COLORS = {"seller": "tab:blue", "buyer": "tab:orange"}
METRIC_LABELS = {
    "profit": "seller profit",
    "buyer_surplus": "buyer surplus",
    "buyer_surplus_agent": "buyer surplus: agents",
    "buyer_surplus_human": "buyer surplus: humans",
    "efficiency": "efficiency",
    "mean_price": "mean price",
}
SPLIT_PARTS = (
    ("profit", "seller profit", "tab:blue"),
    ("buyer_surplus_human", "buyer surplus: humans", "tab:orange"),
    ("buyer_surplus_agent", "buyer surplus: agents", "tab:green"),
)


def _figure(width: float, height: float):
    """A Figure on an Agg canvas: no pyplot state, no display needed."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _axes(fig, left: float, bottom: float, width: float, height: float):
    """Axes placed in inches from the figure's lower left corner."""
    w, h = fig.get_size_inches()
    return fig.add_axes((left / w, bottom / h, width / w, height / h))


def _text_width(labels: Sequence[str], size: float) -> float:
    """About how wide (inches) the longest label is at ``size`` points."""
    return 0.56 * size / 72 * max((len(s) for s in labels), default=0)


def _save(fig, path: Path) -> None:
    """Draw ``fig`` and write it as an 8-bit RGBA PNG: each row stored as its difference from
    the row above (PNG filter "Up": long runs of zeros on a plot) and zlib level 1, the
    resolution in a pHYs chunk, no text chunks, so no software or date stamp: the same
    figure gives the same bytes. Several times faster than Pillow's writer, which tries
    every filter on every row; the alpha channel stays, as dropping it costs more time
    (a strided copy) than compressing it."""
    import struct
    import zlib

    fig.canvas.draw()
    rgba = np.asarray(fig.canvas.buffer_rgba())
    h, w = rgba.shape[:2]
    flat = rgba.reshape(h, 4 * w)
    # Filtered and compressed a block of rows at a time: a small buffer, reused, instead
    # of a fresh copy of the whole image (tens of MB, each page a fault on first touch).
    step = 128
    block = np.empty((min(step, h), 1 + 4 * w), dtype=np.uint8)
    block[:, 0] = 2  # each row's filter type: Up
    z = zlib.compressobj(1)
    idat = []
    for start in range(0, h, step):
        stop = min(start + step, h)
        rows = block[: stop - start]
        if start == 0:
            rows[0, 1:] = flat[0]
            np.subtract(flat[1:stop], flat[: stop - 1], out=rows[1:, 1:])
        else:  # modulo 256, as PNG wants
            np.subtract(flat[start:stop], flat[start - 1 : stop - 1], out=rows[:, 1:])
        idat.append(z.compress(rows))
    idat.append(z.flush())

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(data, zlib.crc32(kind))
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    per_metre = round(fig.dpi / 0.0254)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 6, 0, 0, 0)))
        f.write(chunk(b"pHYs", struct.pack(">IIB", per_metre, per_metre, 1)))
        f.write(chunk(b"IDAT", b"".join(idat)))
        f.write(chunk(b"IEND", b""))


def _errors(point: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Non-negative (2, n) error-bar lengths; a percentile interval may miss its point."""
    return np.vstack([np.maximum(point - lower, 0.0), np.maximum(upper - point, 0.0)])


def plot_ratings(rows: Sequence[RatingRow], path: str | Path) -> Path:
    """Bradley-Terry ratings as points with horizontal 95% interval bars (best at the top),
    sellers and buyers in two colours, Elo as an open diamond, a line at the pinned 1000."""
    from matplotlib.lines import Line2D

    n = len(rows)
    labels = [f"{r.player} (#{r.rank})" for r in rows]
    left = _text_width(labels, 10) + 0.3
    height = max(2.6, 0.42 * n + 1.4)
    fig = _figure(left + 6.0, height)
    ax = _axes(fig, left, 0.6, 5.8, height - 1.0)
    y = np.arange(n)[::-1]
    for side, color in SIDE_COLORS.items():
        k = np.array([r.side == side for r in rows])
        if not k.any():
            continue
        bt = np.array([r.bt for r in rows])[k]
        lo = np.array([r.lower for r in rows])[k]
        hi = np.array([r.upper for r in rows])[k]
        ax.errorbar(
            bt, y[k], xerr=_errors(bt, lo, hi), fmt="o", color=color, capsize=4, lw=1.6, ms=6
        )
        elo = np.array([r.elo for r in rows])[k]
        # Elo just above its Bradley-Terry point, so neither hides the other.
        ax.scatter(
            elo, y[k] + 0.22, marker="D", facecolors="none", edgecolors=color, s=22, zorder=3
        )
    ax.axvline(1000.0, color="0.5", ls="--", lw=1)
    ax.set_ylim(-0.7, n - 0.3)
    yticks(ax, y, labels)
    xticks(ax, 10, grid=True)  # after the data: the limits are autoscaled
    ax.set_xlabel("rating (Elo scale: +400 = 10:1 odds)")
    ax.set_title("Ratings: Bradley-Terry with 95% bootstrap interval")
    handles = [
        Line2D([], [], color=c, marker="o", lw=1.6, label=f"{s} (Bradley-Terry)")
        for s, c in SIDE_COLORS.items()
    ] + [
        Line2D([], [], color="0.3", marker="D", mfc="none", ls="none", label="Elo"),
        Line2D([], [], color="0.5", ls="--", lw=1, label="1000 (reference or mean)"),
    ]
    ax.legend(handles=handles, loc="best", fontsize=8, framealpha=0.9)
    _save(fig, Path(path))
    return Path(path)


def _bars(ax, y: np.ndarray, left: np.ndarray, width: np.ndarray, color: str) -> None:
    """Horizontal bars (height 0.7) as one collection."""
    from matplotlib.collections import PolyCollection

    x0, x1 = left, left + width
    verts = np.stack(
        [
            np.stack([x0, y - 0.35], axis=1),
            np.stack([x1, y - 0.35], axis=1),
            np.stack([x1, y + 0.35], axis=1),
            np.stack([x0, y + 0.35], axis=1),
        ],
        axis=1,
    )
    ax.add_collection(PolyCollection(verts, facecolors=color, edgecolors="white", linewidths=0.5))


def plot_surplus_split(rows: Sequence[SplitRow], path: str | Path) -> Path:
    """Stacked horizontal bars per pairing: seller profit, then buyer surplus of humans and of
    agents (means per market), labelled with the efficiency. A grid with one row of panels per
    config and one column per disclosure rule: the panels of a row share their pairings (the
    y axis) and their price scale (the x axis), so rules compare side by side."""
    from matplotlib.patches import Patch

    configs = list(dict.fromkeys(r.config for r in rows))
    rules = list(dict.fromkeys(r.disclosure for r in rows))
    panels: dict[tuple[str, str], list[SplitRow]] = {}
    for r in rows:
        panels.setdefault((r.config, r.disclosure), []).append(r)
    pairings = {
        c: list(dict.fromkeys((r.seller, r.buyer) for r in rows if r.config == c)) for c in configs
    }
    names = {c: [f"{s} vs {b}" for s, b in reversed(pairings[c])] for c in configs}
    left = _text_width([x for c in configs for x in names[c]], 7.5) + 0.25
    panel_w, gap_w = 3.8, 0.4
    heights = [0.3 * len(pairings[c]) + 0.2 for c in configs]
    top, row_gap, bottom = 0.55, 0.75, 0.95  # suptitle; a panel's title and ticks; legend
    fig_h = top + sum(heights) + row_gap * (len(configs) - 1) + bottom
    fig = _figure(left + len(rules) * (panel_w + gap_w), fig_h)
    y_top = fig_h - top
    for i, config in enumerate(configs):
        y_top -= heights[i] + (row_gap if i else 0.0)
        where = {p: k for k, p in enumerate(reversed(pairings[config]))}
        axes, lo, hi = [], 0.0, 0.0
        for j, rule in enumerate(rules):
            prow = panels.get((config, rule), [])
            if not prow:
                continue
            ax = _axes(fig, left + j * (panel_w + gap_w), y_top, panel_w, heights[i])
            y = np.array([where[(r.seller, r.buyer)] for r in prow], dtype=float)
            pos = np.zeros(len(prow))  # stacks grow right from 0; negatives are drawn left
            neg = np.zeros(len(prow))
            for key, _, color in SPLIT_PARTS:
                v = np.nan_to_num(np.array([r.mean(key) for r in prow], dtype=float))
                _bars(ax, y, np.where(v >= 0, pos, neg), v, color)
                pos += np.maximum(v, 0.0)
                neg += np.minimum(v, 0.0)
            lo, hi = min(lo, float(neg.min())), max(hi, float(pos.max()))
            effs = [f" {fmt(r.mean('efficiency'))}" for r in prow]
            draw_labels(ax, effs, pos, y, size=6.5, color="0.25")
            # Pairing names as labels left of the first panel, not as ticks: a tick costs a
            # handful of artists, and there are hundreds of pairings.
            ax.set_yticks([])
            if j == 0:
                k = np.arange(len(names[config]))
                draw_labels(ax, names[config], np.full(len(k), -0.01), k, size=7.5,
                            ha="right", transform=ax.get_yaxis_transform())  # fmt: skip
            ax.set_ylim(-0.6, len(names[config]) - 0.4)
            ax.set_title(f"{config} / {rule}", fontsize=10, loc="left")
            ax.axvline(0.0, color="0.3", lw=0.8)
            axes.append(ax)
        # One price scale per config, with room on the right for the efficiency labels.
        span = max(hi - lo, 1e-9)
        for ax in axes:
            ax.set_xlim(lo - 0.03 * span, hi + 0.18 * span)
            xticks(ax, 8, grid=True)
        if i == len(configs) - 1:
            for ax in axes:
                ax.set_xlabel("mean per market (price units)", fontsize=8)
    handles = [Patch(color=c, label=label) for _, label, c in SPLIT_PARTS]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(
        "Surplus split per pairing (mean per market; labels: efficiency)",
        fontsize=11,
        y=1 - 0.2 / fig_h,
        va="top",
    )
    _save(fig, Path(path))
    return Path(path)


def plot_disclosure_forest(rows: Sequence[EffectRow], path: str | Path) -> Path:
    """Forest plot of the disclosure effect: one panel per (config, metric), one line per
    pairing, the mean paired difference with its 95% bootstrap interval and a vertical line at
    0. Intervals that exclude 0 are drawn dark, the others grey. Each config has its own
    panels, since price scales differ between configs."""
    from matplotlib.ticker import MaxNLocator

    metrics = list(dict.fromkeys(r.metric for r in rows))
    configs = list(dict.fromkeys(r.config for r in rows))
    pairings = {
        c: list(dict.fromkeys((r.seller, r.buyer) for r in rows if r.config == c)) for c in configs
    }
    # Few pairings: wrap a config's panels into rows of three; many: one row per config.
    ncols = len(metrics) if max(map(len, pairings.values())) > 10 else min(len(metrics), 3)
    per_config = math.ceil(len(metrics) / ncols)
    left = _text_width([f"{s} vs {b}" for c in configs for s, b in pairings[c]], 10) + 0.3
    panel_w, gap_w, top, row_gap, bottom = 3.0, 0.4, 0.6, 0.7, 0.45
    heights = [max(1.0, 0.32 * len(pairings[c]) + 0.2) for c in configs for _ in range(per_config)]
    fig_h = top + sum(heights) + row_gap * (len(heights) - 1) + bottom
    fig = _figure(left + ncols * (panel_w + gap_w), fig_h)
    y_top = fig_h - top
    for k, config in enumerate(configs):
        n = len(pairings[config])
        y = np.arange(n)[::-1]
        where = {p: y[i] for i, p in enumerate(pairings[config])}
        for j, metric in enumerate(metrics):
            row = k * per_config + j // ncols
            if j % ncols == 0:
                y_top -= heights[row] + (row_gap if row else 0.0)
            ax = _axes(fig, left + (j % ncols) * (panel_w + gap_w), y_top, panel_w, heights[row])
            mine = [
                r
                for r in rows
                if r.config == config and r.metric == metric and math.isfinite(r.diff)
            ]
            # False when there is no interval: drawn grey.
            clear = np.array([r.lower > 0 or r.upper < 0 for r in mine], dtype=bool)
            for dark, color in ((True, "black"), (False, "0.6")):
                part = [r for r, c in zip(mine, clear, strict=True) if c == dark]
                if not part:
                    continue
                d = np.array([r.diff for r in part])
                lo = np.array([r.lower for r in part])
                hi = np.array([r.upper for r in part])
                ax.errorbar(
                    d,
                    [where[(r.seller, r.buyer)] for r in part],
                    xerr=_errors(d, lo, hi),
                    fmt="o",
                    color=color,
                    capsize=3,
                    ms=4,
                    lw=1.3,
                )
            ax.axvline(0.0, color="tab:red", lw=1, ls="--")
            title = METRIC_LABELS.get(metric, metric.replace("_", " "))
            ax.set_title(f"{title} ({config})" if len(configs) > 1 else title, fontsize=10)
            ax.set_ylim(-0.6, n - 0.4)
            names = [f"{s} vs {b}" for s, b in pairings[config]] if j % ncols == 0 else None
            yticks(ax, y, names)
            ax.xaxis.set_major_locator(MaxNLocator(nbins=5))  # narrow panels: few x ticks
            xticks(ax, 8, grid=True)  # after the data: the limits are autoscaled
    treat, ctrl = rows[0].treatment, rows[0].control
    fig.suptitle(
        f"Disclosure effect: {treat} - {ctrl}, paired per market (95% bootstrap interval)",
        fontsize=11,
        y=1 - 0.15 / fig_h,
        va="top",
    )
    _save(fig, Path(path))
    return Path(path)


__all__ = ["plot_disclosure_forest", "plot_ratings", "plot_surplus_split"]
