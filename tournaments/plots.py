"""Plots of an analysis: ratings with interval bars, the surplus split, a forest plot of
the disclosure effect. Each takes the rows of ``tournaments.analysis`` and a path.

Plots are drawn on the Agg canvas directly (no pyplot, no global backend switch), and
their PNGs carry no software or date stamp: the same results give the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tournaments.analysis import RatingRow, SplitRow
from tournaments.effects import EffectRow
from tournaments.tables import fmt

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

    # Constrained layout also makes room for suptitles and figure legends, at any height.
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path: Path) -> None:
    # No "Software" text chunk; Agg writes no date into a PNG.
    fig.savefig(path, dpi=DPI, format="png", metadata={"Software": None})


def _errors(point: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Non-negative (2, n) error-bar lengths; a percentile interval may miss its point."""
    return np.vstack([np.maximum(point - lower, 0.0), np.maximum(upper - point, 0.0)])


def plot_ratings(rows: Sequence[RatingRow], path: str | Path) -> Path:
    """Bradley-Terry ratings as points with horizontal 95% interval bars (best at the top),
    sellers and buyers in two colours, Elo as an open diamond, a line at the pinned 1000."""
    from matplotlib.lines import Line2D

    n = len(rows)
    fig = _figure(7.5, max(2.6, 0.42 * n + 1.4))
    ax = fig.add_subplot()
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
    ax.set_yticks(y, [f"{r.player} (#{r.rank})" for r in rows])
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel("rating (Elo scale: +400 = 10:1 odds)")
    ax.set_title("Ratings: Bradley-Terry with 95% bootstrap interval")
    ax.grid(axis="x", alpha=0.3)
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


def plot_surplus_split(rows: Sequence[SplitRow], path: str | Path) -> Path:
    """Stacked horizontal bars per pairing: seller profit, then buyer surplus of humans and of
    agents (means per market), labelled with the efficiency. A grid with one row of panels per
    config and one column per disclosure rule: the panels of a row share their pairings (the
    y axis) and their price scale (the x axis), so rules compare side by side."""
    from matplotlib.patches import Patch

    configs = list(dict.fromkeys(r.config for r in rows))
    rules = list(dict.fromkeys(r.disclosure for r in rows))
    panels: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        panels.setdefault((r.config, r.disclosure), []).append(r)
    pairings = {
        c: list(dict.fromkeys((r.seller, r.buyer) for r in rows if r.config == c)) for c in configs
    }
    heights = [0.3 * len(pairings[c]) + 0.9 for c in configs]
    fig = _figure(3.0 + 4.2 * len(rules), sum(heights) + 1.3)
    grid = fig.subplots(len(configs), len(rules), squeeze=False, height_ratios=heights)
    for i, config in enumerate(configs):
        where = {p: k for k, p in enumerate(reversed(pairings[config]))}
        right = 0.0
        for j, rule in enumerate(rules):
            ax = grid[i, j]
            if j:
                ax.sharex(grid[i, 0])
            prow = panels.get((config, rule), [])
            if not prow:
                ax.set_visible(False)
                continue
            y = np.array([where[(r.seller, r.buyer)] for r in prow])
            pos = np.zeros(len(prow))  # stacks grow right from 0; negatives are drawn left
            neg = np.zeros(len(prow))
            for key, _, color in SPLIT_PARTS:
                v = np.nan_to_num(np.array([r.mean(key) for r in prow], dtype=float))
                left = np.where(v >= 0, pos, neg)
                ax.barh(y, v, left=left, color=color, height=0.7, edgecolor="white", lw=0.5)
                pos += np.maximum(v, 0.0)
                neg += np.minimum(v, 0.0)
            right = max(right, float(pos.max()))
            for yk, x, r in zip(y, pos, prow, strict=True):
                ax.annotate(
                    f" {fmt(r.mean('efficiency'))}",
                    (x, yk),
                    va="center",
                    fontsize=6.5,
                    color="0.25",
                    annotation_clip=False,
                )
            labels = [f"{s} vs {b}" for s, b in reversed(pairings[config])]
            ax.set_yticks(np.arange(len(labels)), labels if j == 0 else [], fontsize=7.5)
            ax.set_ylim(-0.6, len(labels) - 0.4)
            ax.set_title(f"{config} / {rule}", fontsize=10, loc="left")
            ax.axvline(0.0, color="0.3", lw=0.8)
            ax.grid(axis="x", alpha=0.3)
            ax.tick_params(axis="x", labelsize=8)
        lo, hi = grid[i, 0].get_xlim()
        grid[i, 0].set_xlim(lo, max(hi, 1.18 * right))  # room for the efficiency labels
    for ax in grid[-1]:
        ax.set_xlabel("mean per market (price units)", fontsize=8)
    handles = [Patch(color=c, label=label) for _, label, c in SPLIT_PARTS]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle("Surplus split per pairing (mean per market; labels: efficiency)", fontsize=11)
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
    heights = [max(1.7, 0.32 * len(pairings[c]) + 0.9) for c in configs for _ in range(per_config)]
    fig = _figure(3.4 * ncols + 2.4, sum(heights) + 0.4)
    grid = fig.subplots(len(heights), ncols, squeeze=False, height_ratios=heights)
    for k, config in enumerate(configs):
        block = grid[k * per_config : (k + 1) * per_config].reshape(-1)
        n = len(pairings[config])
        y = np.arange(n)[::-1]
        where = {p: y[i] for i, p in enumerate(pairings[config])}
        for ax in block[len(metrics) :]:
            ax.set_visible(False)
        for j, (ax, metric) in enumerate(zip(block, metrics, strict=False)):
            for r in rows:
                if r.config != config or r.metric != metric or not math.isfinite(r.diff):
                    continue
                clear = r.lower > 0 or r.upper < 0  # False when there is no interval
                d = np.array([r.diff])
                ax.errorbar(
                    d,
                    [where[(r.seller, r.buyer)]],
                    xerr=_errors(d, np.array([r.lower]), np.array([r.upper])),
                    fmt="o",
                    color="black" if clear else "0.6",
                    capsize=3,
                    ms=4,
                    lw=1.3,
                )
            ax.axvline(0.0, color="tab:red", lw=1, ls="--")
            title = METRIC_LABELS.get(metric, metric.replace("_", " "))
            ax.set_title(f"{title} ({config})" if len(configs) > 1 else title, fontsize=10)
            ax.grid(axis="x", alpha=0.3)
            ax.tick_params(axis="x", labelsize=8)
            ax.xaxis.set_major_locator(MaxNLocator(nbins=5))  # narrow panels: few x ticks
            ax.set_ylim(-0.6, n - 0.4)
            if j % ncols == 0:
                ax.set_yticks(y, [f"{s} vs {b}" for s, b in pairings[config]])
            else:
                ax.set_yticks(y, [])
    treat, ctrl = rows[0].treatment, rows[0].control
    fig.suptitle(
        f"Disclosure effect: {treat} - {ctrl}, paired per market (95% bootstrap interval)",
        fontsize=11,
    )
    _save(fig, Path(path))
    return Path(path)


__all__ = ["plot_disclosure_forest", "plot_ratings", "plot_surplus_split"]
