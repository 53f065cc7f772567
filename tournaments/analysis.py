"""Analyses of a tournament's market records: surplus split, disclosure effect, ratings.

Every function here is a pure function of the records dict that
``ResultStore.records()`` returns (one entry per market row, columns as arrays)::

    match_id, seller, buyer, disclosure, config   object arrays of str
    market                                        int64, the market index in its config
    profit, buyer_surplus, w_star, ...            float, the metrics of arena.metrics

Rows may come in any order: each function first sorts them by (match id, market),
so the same records and seed give the same tables, bit for bit.

Market instances depend only on (config, tournament seed, index), so the key
(config, market) names one instance, met by every pairing under every rule.
The disclosure effect pairs rows on that key; the ratings resample whole
instances in their bootstrap.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tabulate import tabulate

from agents.evaluate import mean_ci
from tournaments import ratings as rt

Records = Mapping[str, np.ndarray]

SPLIT_METRICS = (
    "profit",
    "buyer_surplus",
    "buyer_surplus_human",
    "buyer_surplus_agent",
    "efficiency",
    "capture",
    "deal_rate",
    "seller_violations",
    "buyer_violations",
)
"""Columns of :func:`surplus_split`, each as mean and 95% Student-t interval per market."""

EFFECT_METRICS = (
    "profit",
    "buyer_surplus_agent",
    "buyer_surplus_human",
    "efficiency",
    "mean_price",
)
"""Default metrics of :func:`disclosure_effect`."""

SIDES = ("seller", "buyer")

_KEYS = ("seller", "buyer", "disclosure", "config")
_BOOT_CELLS = 1 << 22  # bootstrap index blocks stay below ~32 MB


# ---------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------


def _n_rows(records: Records) -> int:
    return len(records["market"])


def _canonical(records: Records) -> dict[str, np.ndarray]:
    """The records sorted by (match id, market), keys as str, market as int."""
    n = _n_rows(records)
    match = np.asarray([str(x) for x in records["match_id"]], dtype=object)
    market = np.asarray(records["market"], dtype=np.int64).reshape(-1)
    order = rt.canonical_order(match.astype(str), market) if n else np.zeros(0, np.int64)
    out: dict[str, np.ndarray] = {"match_id": match[order], "market": market[order]}
    for name in _KEYS:
        out[name] = np.asarray([str(x) for x in records[name]], dtype=object)[order]
    for name, col in records.items():
        if name not in out:
            out[name] = np.asarray(col, dtype=float)[order]
    return out


def _groups(rec: dict[str, np.ndarray], keys: Sequence[str]) -> list[tuple[tuple, np.ndarray]]:
    """(key values, row indices) for each distinct combination of ``keys``, sorted by key."""
    found: dict[tuple, list[int]] = {}
    for i, key in enumerate(zip(*(rec[k] for k in keys), strict=True)):
        found.setdefault(key, []).append(i)
    return [(key, np.asarray(found[key], dtype=np.int64)) for key in sorted(found)]


def _stable_seed(seed: int, *parts: str) -> np.random.SeedSequence:
    """A seed sequence from (seed, names): a row's bootstrap does not depend on which other
    rows exist or on the order they are computed in."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return np.random.SeedSequence([seed, int.from_bytes(digest[:8], "little")])


# ---------------------------------------------------------------------------
# Surplus split
# ---------------------------------------------------------------------------


def surplus_split(records: Records, metrics: Sequence[str] = SPLIT_METRICS) -> list[dict]:
    """One row per pairing (seller, buyer, disclosure, config), sorted by (config, disclosure,
    seller, buyer): ``n`` markets, and for each metric its mean per market with a 95% Student-t
    interval (``agents.evaluate.mean_ci``, over the finite values) as ``METRIC``,
    ``METRIC_lower`` and ``METRIC_upper``."""
    rec = _canonical(records)
    rows = []
    for (config, disclosure, seller, buyer), idx in _groups(
        rec, ("config", "disclosure", "seller", "buyer")
    ):
        row: dict[str, Any] = {
            "seller": seller,
            "buyer": buyer,
            "disclosure": disclosure,
            "config": config,
            "n": len(idx),
        }
        for name in metrics:
            m, lo, hi = mean_ci(rec[name][idx])
            row[name], row[f"{name}_lower"], row[f"{name}_upper"] = m, lo, hi
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------
# Disclosure effect
# ---------------------------------------------------------------------------


def bootstrap_mean_ci(
    x: np.ndarray, rng: np.random.Generator, rounds: int = 1000, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``x`` (resampled with replacement).

    The resamples are index matrices drawn from ``rng`` in blocks of at most ~4M cells, so
    the cost is a few vectorised passes whatever ``rounds`` is."""
    x = np.asarray(x, dtype=float)
    n = len(x)
    if n < 2:  # one market says nothing about the spread: no interval rather than a point
        return math.nan, math.nan
    block = max(1, min(rounds, _BOOT_CELLS // n))
    means = np.empty(rounds)
    for start in range(0, rounds, block):
        stop = min(rounds, start + block)
        means[start:stop] = x[rng.integers(0, n, size=(stop - start, n))].mean(axis=1)
    tail = 50.0 * (1.0 - level)
    lo, hi = np.percentile(means, [tail, 100.0 - tail])
    return float(lo), float(hi)


def disclosure_effect(
    records: Records,
    metrics: Sequence[str] = EFFECT_METRICS,
    rounds: int = 1000,
    seed: int = 0,
    *,
    treatment: str = "mandatory",
    control: str = "hidden",
) -> list[dict]:
    """The paired effect of the disclosure rule, ``treatment - control`` per market.

    For every (seller, buyer, config) played under both rules (others are skipped) and every
    metric, rows are paired on the market index (the same instance under both rules), and only
    markets where both values are finite count (``n``; ``mean_price`` is NaN without trades).
    A row holds the rule names (``treatment``, ``control``), their means over those markets
    (``treatment_mean``, ``control_mean``), the mean paired difference ``diff``,
    its percentile bootstrap 95% interval ``lower``/``upper`` (``rounds`` resamples of the
    markets) and, as a cross-check, the paired Student-t interval ``t_lower``/``t_upper``.

    Each (pairing, metric) draws from its own generator, seeded from ``seed`` and the row's
    names, so a row does not change when other pairings are added. Rows are sorted by
    (config, seller, buyer), metrics in the order given.
    """
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    rec = _canonical(records)
    rows = []
    for (config, seller, buyer), idx in _groups(rec, ("config", "seller", "buyer")):
        rule = rec["disclosure"][idx]
        t_idx, c_idx = idx[rule == treatment], idx[rule == control]
        if len(t_idx) == 0 or len(c_idx) == 0:
            continue
        for part in (t_idx, c_idx):
            if len(np.unique(rec["market"][part])) != len(part):
                raise ValueError(
                    f"{seller} vs {buyer} on {config}: a market index appears twice under one rule"
                )
        _, ti, ci = np.intersect1d(
            rec["market"][t_idx], rec["market"][c_idx], assume_unique=True, return_indices=True
        )
        t_idx, c_idx = t_idx[ti], c_idx[ci]  # aligned, by increasing market index
        for name in metrics:
            tv, cv = rec[name][t_idx], rec[name][c_idx]
            ok = np.isfinite(tv) & np.isfinite(cv)
            d = tv[ok] - cv[ok]
            rng = np.random.default_rng(_stable_seed(seed, config, seller, buyer, name))
            lo, hi = bootstrap_mean_ci(d, rng, rounds)
            _, t_lo, t_hi = mean_ci(d)
            rows.append(
                {
                    "seller": seller,
                    "buyer": buyer,
                    "config": config,
                    "metric": name,
                    "n": int(ok.sum()),
                    "control": control,
                    "treatment": treatment,
                    "control_mean": float(cv[ok].mean()) if ok.any() else math.nan,
                    "treatment_mean": float(tv[ok].mean()) if ok.any() else math.nan,
                    "diff": float(d.mean()) if ok.any() else math.nan,
                    "lower": lo,
                    "upper": hi,
                    "t_lower": t_lo,
                    "t_upper": t_hi,
                }
            )
    return rows


# ---------------------------------------------------------------------------
# Ratings
# ---------------------------------------------------------------------------


def _scored(rec: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Records with a finite per-market seller score, and those scores."""
    s = np.asarray(rt.score(rec["profit"], rec["buyer_surplus"], rec["w_star"]), dtype=float)
    ok = np.isfinite(s)
    return {k: v[ok] for k, v in rec.items()}, s[ok]


def _player_names(rec: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Seller and buyer names on one scale; prefixed by side only if a name is on both."""
    sellers, buyers = rec["seller"].astype(str), rec["buyer"].astype(str)
    if set(sellers.tolist()) & set(buyers.tolist()):
        sellers = np.char.add("seller:", sellers)
        buyers = np.char.add("buyer:", buyers)
    return sellers, buyers


def ratings_table(
    records: Records,
    reference: str | None = None,
    rounds: int = 200,
    seed: int = 0,
    *,
    shuffles: int = 100,
) -> list[dict]:
    """Sellers and buyers on one rating scale, best first.

    Each market is a game between its seller and buyer entries, worth
    ``ratings.score(profit, buyer_surplus, w_star)`` to the seller and one minus that to the
    buyer (markets with a NaN score are left out). Columns:

    - ``elo``: online Elo averaged over ``shuffles`` orders (``ratings.elo_shuffled``);
    - ``bt``, ``lower``, ``upper``: Bradley-Terry maximum likelihood with a 95% bootstrap
      interval over ``rounds`` resamples of market instances (config, index), so every game
      played on one instance stays together (``ratings.bootstrap_bt``);
    - ``rank``: 1 + the number of players whose lower bound is above this one's upper bound;
    - ``games``: markets played; ``side``: seller or buyer.

    ``reference`` (an entry name) is pinned at 1000 on both scales; without it the mean is.
    """
    rec, s = _scored(_canonical(records))
    if len(s) == 0:
        return []
    sellers, buyers = _player_names(rec)
    side = {**{p: "seller" for p in sellers.tolist()}, **{p: "buyer" for p in buyers.tolist()}}
    if reference is not None and reference not in side:
        prefixed = [p for p in side if p.split(":", 1)[-1] == reference]
        if len(prefixed) != 1:
            raise ValueError(f"reference {reference!r} is not an entry of these records")
        reference = prefixed[0]
    group = list(zip(rec["config"].tolist(), rec["market"].tolist(), strict=True))
    bt = rt.bootstrap_bt(
        sellers, buyers, s, rounds=rounds, seed=seed, reference=reference, group=group
    )
    elo = rt.elo_shuffled(sellers, buyers, s, shuffles=shuffles, seed=seed, reference=reference)
    return [
        {
            "player": r.player,
            "side": side[r.player],
            "elo": elo[r.player],
            "bt": r.rating,
            "lower": r.lower,
            "upper": r.upper,
            "rank": r.rank,
            "games": r.games,
        }
        for r in bt
    ]


def side_leaderboards(
    records: Records,
    reference: str | None = None,
    rounds: int = 200,
    seed: int = 0,
) -> dict[str, rt.PairedLeaderboard]:
    """Within-side leaderboards from paired comparisons on identical markets.

    ``"seller"``: each seller's market score compared with the other sellers' on the same
    (buyer, disclosure, config, market) coordinates; ``"buyer"``: each buyer entry's score
    (one minus the seller's) on the same (seller, disclosure, config, market). See
    ``ratings.paired_leaderboard``. A side with fewer than two entries has no leaderboard.
    ``reference`` is pinned on the side it belongs to.
    """
    rec, s = _scored(_canonical(records))
    out: dict[str, rt.PairedLeaderboard] = {}
    for side, other, values in (("seller", "buyer", s), ("buyer", "seller", 1.0 - s)):
        names = rec[side].astype(str)
        if len(set(names.tolist())) < 2:
            continue
        coords = list(
            zip(
                rec[other].tolist(),
                rec["disclosure"].tolist(),
                rec["config"].tolist(),
                rec["market"].tolist(),
                strict=True,
            )
        )
        # One instance meets every opponent under every rule: those comparisons are
        # correlated, so the bootstrap resamples instances (config, index), not coordinates.
        instance = list(zip(rec["config"].tolist(), rec["market"].tolist(), strict=True))
        out[side] = rt.paired_leaderboard(
            names,
            coords,
            values,
            rounds=rounds,
            seed=seed,
            reference=reference if reference in set(names.tolist()) else None,
            clusters=instance,
        )
    return out


# ---------------------------------------------------------------------------
# All of it, and its text
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Analysis:
    """Every table of a run, as computed by :func:`analyze`."""

    ratings: list[dict]
    """:func:`ratings_table`."""
    sides: dict[str, rt.PairedLeaderboard]
    """:func:`side_leaderboards`, keyed by side."""
    split: list[dict]
    """:func:`surplus_split`."""
    effect: list[dict]
    """:func:`disclosure_effect`."""
    markets: int
    """Market rows analysed."""


def analyze(
    records: Records,
    reference: str | None = None,
    seed: int = 0,
    rating_rounds: int = 200,
    effect_rounds: int = 1000,
) -> Analysis:
    """Every analysis of the records with one seed. The disclosure effect is measured for each
    rule played beside ``hidden`` (mandatory, voluntary), each against hidden."""
    rules = set(np.asarray(records["disclosure"]).tolist()) if _n_rows(records) else set()
    treatments = [t for t in ("mandatory", "voluntary") if t in rules and "hidden" in rules]
    return Analysis(
        # 32 seeded orders: Elo is the secondary column; Bradley-Terry carries the CIs.
        ratings=ratings_table(
            records, reference=reference, rounds=rating_rounds, seed=seed, shuffles=32
        ),
        sides=side_leaderboards(records, reference=reference, rounds=rating_rounds, seed=seed),
        split=surplus_split(records),
        effect=[
            row
            for t in treatments
            for row in disclosure_effect(records, rounds=effect_rounds, seed=seed, treatment=t)
        ],
        markets=_n_rows(records),
    )


def _decimals(magnitude: float) -> int:
    """About three significant figures: 1 decimal from 100 up, 2 from 1, else 3."""
    return 1 if magnitude >= 100 else 2 if magnitude >= 1 else 3


def _fixed(x: float, decimals: int) -> str:
    """``x`` with ``decimals`` decimals; a value that rounds to zero loses its minus sign."""
    if not math.isfinite(x):
        return "-"
    text = f"{x:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0.0 else text


def fmt(x: float | None) -> str:
    """A number for a table, ``-`` for a missing one."""
    if x is None or not math.isfinite(x):
        return "-"
    return _fixed(x, _decimals(abs(x)))


def fmt_ci(mean: float, lower: float, upper: float, *, point: bool = True) -> str:
    """``mean [lower, upper]`` (only ``[lower, upper]`` when ``point`` is False), all three
    with the decimals of the largest."""
    if not math.isfinite(mean):
        return "-"
    finite = [abs(v) for v in (mean, lower, upper) if math.isfinite(v)]
    d = _decimals(max(finite))
    lo, hi = _fixed(lower, d), _fixed(upper, d)
    return f"{_fixed(mean, d)} [{lo}, {hi}]" if point else f"[{lo}, {hi}]"


@dataclass(frozen=True)
class Section:
    """One table: a title, a one-line explanation, headers and formatted rows."""

    title: str
    note: str
    headers: list[str]
    rows: list[list[str]]


_SPLIT_HEADERS = {
    "profit": "profit",
    "buyer_surplus": "buyer surplus",
    "buyer_surplus_human": "of humans",
    "buyer_surplus_agent": "of agents",
    "efficiency": "efficiency",
    "capture": "capture",
    "deal_rate": "deal rate",
    "seller_violations": "seller viol.",
    "buyer_violations": "buyer viol.",
}


def sections(analysis: Analysis) -> list[Section]:
    """The tables of an analysis, formatted (numbers as text, intervals as ``[lo, hi]``)."""
    out = []
    out.append(
        Section(
            "Ratings",
            "Sellers and buyers on one scale; a market is a game scored "
            "clip(0.5 + (profit - buyer surplus) / (2 W*), 0, 1) for the seller. "
            "Elo averaged over shuffled orders; Bradley-Terry with a 95% bootstrap interval "
            "over market instances; rank = 1 + players whose interval lies wholly above.",
            ["rank", "player", "side", "Bradley-Terry [95% CI]", "Elo", "games"],
            [
                [
                    str(r["rank"]),
                    r["player"],
                    r["side"],
                    f"{r['bt']:.0f} [{r['lower']:.0f}, {r['upper']:.0f}]",
                    f"{r['elo']:.0f}",
                    str(r["games"]),
                ]
                for r in analysis.ratings
            ],
        )
    )
    for side in SIDES:
        board = analysis.sides.get(side)
        if board is None:
            continue
        out.append(
            Section(
                f"Within-side leaderboard: {side}s",
                f"Each {side} entry against the others on identical markets (same opponent, "
                "rule, config and instance), scored by the market score; Bradley-Terry with "
                "a 95% bootstrap interval that resamples market instances (each with all its "
                "opponents and rules).",
                ["rank", "player", "rating [95% CI]", "markets"],
                [
                    [
                        str(r.rank),
                        r.player,
                        f"{r.rating:.0f} [{r.lower:.0f}, {r.upper:.0f}]",
                        str(r.games),
                    ]
                    for r in board.ratings
                ],
            )
        )
        out.append(
            Section(
                f"Paired comparisons: {side}s",
                "a vs b on the markets both played: wins/ties/losses by market score, and the "
                "mean score difference a - b with a 95% bootstrap interval.",
                ["a", "b", "markets", "W/T/L", "win rate", "score diff [95% CI]"],
                [
                    [
                        p.a,
                        p.b,
                        str(p.markets),
                        f"{p.wins}/{p.ties}/{p.losses}",
                        f"{p.win_rate:.3f}",
                        fmt_ci(p.mean_diff, p.diff_lower, p.diff_upper),
                    ]
                    for p in board.pairs
                ],
            )
        )
    keys = ["config", "disclosure", "seller", "buyer", "n"]
    for title, note, names in (
        (
            "Surplus split",
            "Mean per market with a 95% Student-t interval: seller profit and buyer surplus, "
            "the latter split by buyer kind.",
            SPLIT_METRICS[:4],
        ),
        (
            "Efficiency and conduct",
            "Mean per market with a 95% Student-t interval: efficiency = welfare / W*_T, "
            "capture = profit / W*_T, deals per buyer, invalid messages per market.",
            SPLIT_METRICS[4:],
        ),
    ):
        out.append(
            Section(
                title,
                note,
                keys + [_SPLIT_HEADERS.get(m, m) for m in names],
                [
                    [str(r[k]) for k in keys]
                    + [fmt_ci(r[m], r[f"{m}_lower"], r[f"{m}_upper"]) for m in names]
                    for r in analysis.split
                ],
            )
        )
    treatments = list(dict.fromkeys(r["treatment"] for r in analysis.effect))
    if not treatments:
        out.append(
            Section(
                "Disclosure effect",
                "Not measured: it needs the hidden rule and mandatory or voluntary in one run.",
                ["config", "seller", "buyer", "metric"],
                [],
            )
        )
    for treat in treatments:
        kept, omitted = informative_effects([r for r in analysis.effect if r["treatment"] == treat])
        ctrl = kept[0]["control"] if kept else "hidden"
        note = (
            "Paired difference per market (same instance under both rules; markets where both "
            "values are finite); 95% percentile bootstrap interval, Student-t as a cross-check."
        )
        if omitted:
            note += (
                f" Omitted: {len(omitted)} pairings where the rule changed nothing (a difference "
                "of exactly 0 on every market, e.g. a seller that ignores the flag)."
            )
        out.append(
            Section(
                f"Disclosure effect ({treat} - {ctrl})",
                note,
                ["config", "seller", "buyer", "metric", "n", ctrl, treat, "diff [bootstrap]"]
                + ["t interval"],
                [
                    [
                        r["config"],
                        r["seller"],
                        r["buyer"],
                        r["metric"],
                        str(r["n"]),
                        fmt(r["control_mean"]),
                        fmt(r["treatment_mean"]),
                        fmt_ci(r["diff"], r["lower"], r["upper"]),
                        fmt_ci(r["diff"], r["t_lower"], r["t_upper"], point=False),
                    ]
                    for r in kept
                ],
            )
        )
    return out


def informative_effects(rows: list[dict]) -> tuple[list[dict], list[tuple]]:
    """Split effect rows into those of pairings where the rule changed something and the
    (treatment, config, seller, buyer) keys of pairings where every metric differed by
    exactly 0 on every market (common random numbers make "nothing changed" exact)."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["treatment"], r["config"], r["seller"], r["buyer"]), []).append(r)
    kept, omitted = [], []
    for key, group in groups.items():
        # A metric with no finite pair (mean price without trades) says nothing either way.
        if all(
            r["n"] == 0 or (r["diff"] == 0 and r["lower"] == 0 and r["upper"] == 0) for r in group
        ):
            omitted.append(key)
        else:
            kept.extend(group)
    return kept, omitted


def format_tables(analysis: Analysis, tablefmt: str = "simple") -> str:
    """Every table of ``analysis`` as text (``tabulate`` format ``tablefmt``)."""
    parts = []
    for sec in sections(analysis):
        body = (
            tabulate(sec.rows, headers=sec.headers, tablefmt=tablefmt, disable_numparse=True)
            if sec.rows
            else "(no rows)"
        )
        note = f"{sec.note}\n" if sec.note else ""
        parts.append(f"{sec.title}\n{'=' * len(sec.title)}\n{note}{body}")
    return "\n\n".join(parts) + "\n"


__all__ = [
    "informative_effects",
    "EFFECT_METRICS",
    "SPLIT_METRICS",
    "Analysis",
    "Section",
    "analyze",
    "bootstrap_mean_ci",
    "disclosure_effect",
    "fmt",
    "fmt_ci",
    "format_tables",
    "ratings_table",
    "sections",
    "side_leaderboards",
    "surplus_split",
]
