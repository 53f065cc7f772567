"""What a league folder says across its rounds: ``league.csv``, ``league.md``,
``league.png`` (surplus split, ratings by generation, exploitability) and ``payoff.png``
(the last round's payoff matrix). Everything is read from the rounds' ``round.json``.

Ratings by generation come from the last complete round's fit, which rates every
snapshot of every round on one scale (one pinned reference), so generations compare.
Trends are stated as last round minus first, with an approximate 95% interval that
combines the two rounds' intervals in quadrature (the rounds' estimates are
independent: different best responses, different snapshots).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

DPI = 110
SIDES = ("seller", "buyer")


def load_rounds(folder: str | Path) -> list[dict[str, Any]]:
    """The complete rounds' records, in order."""
    folder = Path(folder)
    out = []
    r = 0
    while (path := folder / f"round_{r:03d}" / "round.json").is_file():
        out.append(json.loads(path.read_text()))
        r += 1
    return out


def _nan(x: Any) -> float:
    return math.nan if x is None else float(x)


def _all_split(info: dict) -> dict | None:
    return next((s for s in info.get("split", []) if s["config"] == "all"), None)


def league_rows(rounds: list[dict]) -> list[dict[str, Any]]:
    """One summary row per round (what ``league.csv`` holds)."""
    if not rounds:
        return []
    final = {r["player"]: r for r in rounds[-1]["ratings"]}
    rows = []
    for info in rounds:
        row: dict[str, Any] = {"round": info["round"]}
        for side in SIDES:
            name = info["newest_names"][side]
            row[f"newest_{side}"] = name or ""
            rating = final.get(name or "", {})
            for k in ("bt", "lower", "upper"):
                row[f"{side}_rating{'' if k == 'bt' else '_' + k}"] = _nan(rating.get(k))
        split = _all_split(info)
        for k in ("capture", "buyer_share", "efficiency", "score"):
            m, lo, hi = split[k] if split else (None, None, None)
            row[k], row[k + "_lower"], row[k + "_upper"] = _nan(m), _nan(lo), _nan(hi)
        for side in SIDES:
            e = info.get("exploitability", {}).get(side, {})
            row[f"exploit_{side}"] = _nan(e.get("gain"))
            row[f"exploit_{side}_lower"] = _nan(e.get("lower"))
            row[f"exploit_{side}_upper"] = _nan(e.get("upper"))
            row[f"exploit_{side}_response"] = _nan(e.get("response_score"))
            row[f"exploit_{side}_best"] = e.get("best_member", "")
            row[f"exploit_{side}_best_score"] = _nan(e.get("best_score"))
        row["wall_s"] = round(sum(info.get("wall_s", {}).values()), 1)
        row["load_average"] = (info.get("load_average") or [math.nan])[0]
        rows.append(row)
    return rows


def trend(rows: list[dict], key: str) -> tuple[float, float, float] | None:
    """(last - first, lower, upper) of a per-round estimate with a 95% interval; the
    interval combines the two rounds' half-widths in quadrature. None without two
    finite rounds."""
    pts = [r for r in rows if math.isfinite(r[key])]
    if len(pts) < 2:
        return None
    a, b = pts[0], pts[-1]
    d = b[key] - a[key]
    half = [
        (r[key + "_upper"] - r[key + "_lower"]) / 2
        for r in (a, b)
        if math.isfinite(r[key + "_upper"] - r[key + "_lower"])
    ]
    h = math.sqrt(sum(x * x for x in half)) if len(half) == 2 else math.nan
    return d, d - h, d + h


def write_league_report(folder: str | Path) -> Path | None:
    """Write ``league.csv``, ``league.md``, ``league.png`` and ``payoff.png``; returns the
    Markdown's path (None before the first complete round)."""
    folder = Path(folder)
    rounds = load_rounds(folder)
    rows = league_rows(rounds)
    if not rows:
        return None
    with open(folder / "league.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    plot_league(rows, rounds, folder / "league.png")
    plot_payoff(rounds[-1], folder / "payoff.png")
    path = folder / "league.md"
    path.write_text(league_markdown(rows, rounds, folder))
    return path


def _ci(m: float, lo: float, hi: float, digits: int = 3) -> str:
    if not math.isfinite(m):
        return "-"
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def league_markdown(rows: list[dict], rounds: list[dict], folder: Path) -> str:
    cfg = {}
    if (folder / "league.json").is_file():
        cfg = json.loads((folder / "league.json").read_text())
    lines = [f"# League: {cfg.get('name', folder.name)}", ""]
    if cfg:
        lines += [
            f"Meta-strategy `{cfg['meta_strategy']}` (uniform mix {cfg['uniform_mix']}), "
            f"{cfg['learners']} learner(s) per side, seller learners "
            f"{cfg['seller']['iterations']} PPO iterations a round, buyer learners "
            f"{cfg['buyer']['iterations']}; best responses {cfg['buyer']['exploit_iterations']} "
            f"(buyer) and {cfg['seller']['exploit_iterations']} (seller) iterations. Rating "
            f"reference: {rounds[-1].get('reference') or '(mean at 1000)'}.",
            "",
        ]
    lines += [
        "Per round: the newest seller against the newest buyer (capture = profit / W*_T, "
        "buyer share = buyer surplus / W*_T, the seller's market score), their ratings "
        "(the last round's fit: every generation on one scale), and the exploitability "
        "of each newest snapshot (a fresh best response's mean market score against it "
        "minus the best pool member's, paired per market; 95% bootstrap interval).",
        "",
        "| round | seller | buyer | capture | buyer share | seller score | seller rating "
        "| buyer rating | exploitability of seller | exploitability of buyer | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['round']} | {r['newest_seller'] or '-'} | {r['newest_buyer'] or '-'} | "
            f"{_ci(r['capture'], r['capture_lower'], r['capture_upper'])} | "
            f"{_ci(r['buyer_share'], r['buyer_share_lower'], r['buyer_share_upper'])} | "
            f"{_ci(r['score'], r['score_lower'], r['score_upper'])} | "
            f"{_ci(r['seller_rating'], r['seller_rating_lower'], r['seller_rating_upper'], 0)} | "
            f"{_ci(r['buyer_rating'], r['buyer_rating_lower'], r['buyer_rating_upper'], 0)} | "
            f"{_ci(r['exploit_seller'], r['exploit_seller_lower'], r['exploit_seller_upper'])} | "
            f"{_ci(r['exploit_buyer'], r['exploit_buyer_lower'], r['exploit_buyer_upper'])} | "
            f"{r['wall_s']:.0f} |"
        )
    lines += ["", "![League across rounds](league.png)", ""]
    notes = []
    for key, what in (
        ("exploit_seller", "exploitability of the newest seller"),
        ("exploit_buyer", "exploitability of the newest buyer"),
        ("capture", "capture of the newest seller against the newest buyer"),
        ("buyer_share", "buyer share of the newest pair"),
    ):
        t = trend(rows, key)
        if t is None:
            continue
        d, lo, hi = t
        verdict = "falls" if hi < 0 else "rises" if lo > 0 else "does not change significantly"
        notes.append(f"- {what}: last round minus first {_ci(d, lo, hi)}: {verdict}.")
    if notes:
        lines += ["Trends (approximate 95% intervals):", "", *notes, ""]
    lines += [
        "Payoff matrix of the last round (the seller's mean market score per pairing):",
        "",
        "![Payoff matrix](payoff.png)",
        "",
    ]
    return "\n".join(lines)


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path: Path) -> None:
    fig.savefig(path, dpi=DPI, format="png", metadata={"Software": None})


def _band(ax, x, rows, key, label, color) -> None:
    m = np.array([r[key] for r in rows])
    lo = np.array([r[key + "_lower"] for r in rows])
    hi = np.array([r[key + "_upper"] for r in rows])
    ok = np.isfinite(m)
    if not ok.any():
        return
    err = np.vstack([np.maximum(m - lo, 0), np.maximum(hi - m, 0)])
    err = np.nan_to_num(err)
    ax.errorbar(x[ok], m[ok], yerr=err[:, ok], marker="o", capsize=3, label=label, color=color)


def plot_league(rows: list[dict], rounds: list[dict], path: Path) -> Path:
    """Three panels across rounds: the newest pair's surplus split, the ratings of each
    generation's newest snapshots, the exploitability of the newest snapshots."""
    fig = _figure(15, 4.2)
    axes = fig.subplots(1, 3)
    x = np.array([r["round"] for r in rows], float)
    ax = axes[0]
    _band(ax, x, rows, "capture", "seller capture", "tab:blue")
    _band(ax, x, rows, "buyer_share", "buyer share", "tab:orange")
    _band(ax, x, rows, "efficiency", "efficiency", "tab:gray")
    ax.set_title("newest seller vs newest buyer (share of W*_T)")
    ax.set_xlabel("round")
    ax.legend(fontsize=8)
    ax = axes[1]
    _band(ax, x, rows, "seller_rating", "newest seller", "tab:blue")
    _band(ax, x, rows, "buyer_rating", "newest buyer", "tab:orange")
    ref = rounds[-1].get("reference")
    ax.axhline(1000, color="k", lw=0.6, ls=":")
    ax.set_title(f"Bradley-Terry rating (last fit; {ref or 'mean'} = 1000)")
    ax.set_xlabel("round")
    ax.legend(fontsize=8)
    ax = axes[2]
    _band(ax, x, rows, "exploit_seller", "of the newest seller", "tab:blue")
    _band(ax, x, rows, "exploit_buyer", "of the newest buyer", "tab:orange")
    ax.axhline(0, color="k", lw=0.6, ls=":")
    ax.set_title("exploitability (best response - best pool member)")
    ax.set_xlabel("round")
    ax.legend(fontsize=8)
    for ax in axes:
        ax.set_xticks(x)
    fig.tight_layout()
    _save(fig, path)
    return path


def plot_payoff(info: dict, path: Path) -> Path:
    """The payoff matrix of one round as a heat map (seller's mean market score)."""
    p = info["payoff"]
    a = np.array([[math.nan if v is None else v for v in row] for row in p["score"]], float)
    fig = _figure(1.6 + 0.55 * a.shape[1], 1.2 + 0.35 * a.shape[0])
    ax = fig.add_axes((0.28, 0.28, 0.62, 0.62))
    im = ax.imshow(a, cmap="RdBu_r", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(a.shape[1]), p["buyers"], rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(a.shape[0]), p["sellers"], fontsize=7)
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            if math.isfinite(a[i, j]):
                ax.text(j, i, f"{a[i, j]:.2f}", ha="center", va="center", fontsize=6)
    ax.set_title(f"seller's mean market score, round {info['round']}", fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.04)
    _save(fig, path)
    return path


__all__ = ["league_rows", "load_rounds", "plot_league", "plot_payoff", "trend",
           "write_league_report"]  # fmt: skip
