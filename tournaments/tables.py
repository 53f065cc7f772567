"""The tables of an analysis, as text, every number formatted by ``tournaments.formatting``.

``sections(analysis)`` turns the results of ``tournaments.analysis`` into titled tables
(each with a ``key`` naming what it shows, so a report places its figures by key);
``format_tables`` lays them out for the terminal.
"""

from __future__ import annotations

from tournaments.analysis import SIDES, SPLIT_METRICS, Analysis
from tournaments.disclosure_tables import study_sections
from tournaments.effects import informative_effects
from tournaments.formatting import Section, fmt, fmt_ci, format_section

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


def _ratings(analysis: Analysis) -> Section:
    return Section(
        "ratings",
        "Ratings",
        "Sellers and buyers on one scale; a market is a game scored "
        "clip(0.5 + (profit - buyer surplus) / (2 W*_T), 0, 1) for the seller. "
        "Elo averaged over shuffled orders; Bradley-Terry with a 95% bootstrap interval "
        "over market instances; rank = 1 + players whose interval lies wholly above.",
        ["rank", "player", "side", "Bradley-Terry [95% CI]", "Elo", "games"],
        [
            [
                str(r.rank),
                r.player,
                r.side,
                f"{r.bt:.0f} [{r.lower:.0f}, {r.upper:.0f}]",
                f"{r.elo:.0f}",
                str(r.games),
            ]
            for r in analysis.ratings
        ],
    )


def _side(analysis: Analysis, side: str) -> list[Section]:
    board = analysis.sides.get(side)
    if board is None:
        return []
    return [
        Section(
            f"side:{side}",
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
            ],  # fmt: skip
        ),
        Section(
            f"pairs:{side}",
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
        ),
    ]


def _split(analysis: Analysis) -> list[Section]:
    keys = ["config", "disclosure", "seller", "buyer", "n"]
    out = []
    for key, title, note, names in (
        (
            "split",
            "Surplus split",
            "Mean per market with a 95% Student-t interval: seller profit and buyer surplus, "
            "the latter split by buyer kind.",
            SPLIT_METRICS[:4],
        ),
        (
            "conduct",
            "Efficiency and conduct",
            "Mean per market with a 95% Student-t interval: efficiency = welfare / W*_T, "
            "capture = profit / W*_T, deals per buyer, invalid messages per market.",
            SPLIT_METRICS[4:],
        ),
    ):
        out.append(
            Section(
                key,
                title,
                note,
                keys + [_SPLIT_HEADERS.get(m, m) for m in names],
                [
                    [r.config, r.disclosure, r.seller, r.buyer, str(r.n)]
                    + [fmt_ci(*r.metrics[m]) for m in names]
                    for r in analysis.split
                ],
            )
        )
    return out


def _effects(analysis: Analysis) -> list[Section]:
    treatments = list(dict.fromkeys(r.treatment for r in analysis.effect))
    if not treatments:
        return [
            Section(
                "effect",
                "Disclosure effect",
                "Not measured: it needs the hidden rule and mandatory or voluntary in one run.",
                ["config", "seller", "buyer", "metric"],
                [],
            )
        ]
    out = []
    for treat in treatments:
        kept, omitted = informative_effects([r for r in analysis.effect if r.treatment == treat])
        ctrl = kept[0].control if kept else "hidden"
        note = (
            "Paired difference per market (same instance under both rules; markets where both "
            "values are finite); 95% percentile bootstrap interval over market instances, "
            "Student-t as a cross-check."
        )
        if omitted:
            note += (
                f" Omitted: {len(omitted)} pairings where the rule changed nothing (a difference "
                "of exactly 0 on every market, e.g. a seller that ignores the flag)."
            )
        out.append(
            Section(
                f"effect:{treat}",
                f"Disclosure effect ({treat} - {ctrl})",
                note,
                ["config", "seller", "buyer", "metric", "n", ctrl, treat, "diff [bootstrap]"]
                + ["t interval"],
                [
                    [
                        r.config,
                        r.seller,
                        r.buyer,
                        r.metric,
                        str(r.n),
                        fmt(r.control_mean),
                        fmt(r.treatment_mean),
                        fmt_ci(r.diff, r.lower, r.upper),
                        fmt_ci(r.diff, r.t_lower, r.t_upper, point=False),
                    ]
                    for r in kept
                ],
            )
        )
    return out


def sections(analysis: Analysis) -> list[Section]:
    """The tables of an analysis, formatted (numbers as text, intervals as ``[lo, hi]``)."""
    out = [_ratings(analysis)]
    for side in SIDES:
        out += _side(analysis, side)
    return out + _split(analysis) + _effects(analysis) + _study(analysis)


def _study(analysis: Analysis) -> list[Section]:
    """The disclosure study's tables, for a run that is one."""
    if analysis.study is None:
        return []
    return study_sections(analysis.study)


def format_tables(analysis: Analysis, tablefmt: str = "simple") -> str:
    """Every table of ``analysis`` as text (``tabulate`` format ``tablefmt``)."""
    return "\n\n".join(format_section(s, tablefmt) for s in sections(analysis)) + "\n"


__all__ = ["format_tables", "sections"]
