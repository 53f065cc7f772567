"""The disclosure study's tables and forest-plot rows: the presentation of
``tournaments.disclosure.DisclosureStudy`` (which computes; this renders)."""

from __future__ import annotations

import dataclasses
import math

from tournaments.disclosure import (
    OUTCOMES,
    STUDY_METRICS,
    TREATMENTS,
    DisclosureStudy,
    PolicyRow,
)
from tournaments.effects import EffectRow, informative_effects
from tournaments.formatting import Section, fmt, fmt_ci


def study_sections(study: DisclosureStudy) -> list[Section]:
    """The study's tables (``tournaments.formatting.Section``), for the terminal and the
    Markdown report. Keys: ``study:effect:RULE``, ``study:policy``, ``study:rates``,
    ``study:learned``."""
    out = []
    for rule in TREATMENTS:
        kept, omitted = informative_effects([r for r in study.effects if r.treatment == rule])
        if not kept and not omitted:
            continue
        cells = sorted(
            dict.fromkeys((r.config, r.seller, r.buyer) for r in kept),
            key=lambda k: (study.share(k[0]), k[0], k[1], k[2]),
        )
        by = {(r.config, r.seller, r.buyer, r.metric): r for r in kept}
        note = (
            f"{rule} - hidden per agent share, seller and buyer entry: mean paired difference "
            "per market with a 95% bootstrap interval over market instances."
        )
        if omitted:
            note += (
                f" Omitted: {len(omitted)} cells where the rule changed nothing on any market "
                "(sellers that ignore the flag, no agents, or agents that never disclose)."
            )
        out.append(
            Section(
                f"study:effect:{rule}",
                f"Disclosure study: {rule} - hidden by agent share",
                note,
                ["share", "seller", "buyer", "n"]
                + [
                    "profit",
                    "agents' surplus",
                    "humans' surplus",
                    "efficiency",
                    "deal rate",
                    "mean price",
                ],  # fmt: skip
                [
                    [f"{study.share(c):g}", s, b, str(by[(c, s, b, "profit")].n)]
                    + [
                        fmt_ci(x.diff, x.lower, x.upper)
                        if (x := by.get((c, s, b, m))) is not None
                        else "-"
                        for m in STUDY_METRICS
                    ]
                    for c, s, b in cells
                ],
            )
        )
    if study.policy:
        by = {(r.rule, r.seller, r.config, r.outcome): r for r in study.policy}
        keys = list(dict.fromkeys((r.rule, r.seller, r.config) for r in study.policy))

        def cell(r: PolicyRow) -> str:
            mark = {"gains": " +", "loses": " -"}.get(r.verdict, " =")
            return fmt_ci(r.diff, r.lower, r.upper) + mark

        out.append(
            Section(
                "study:policy",
                "Disclosure policy: who gains and who loses as the agent share grows",
                "Effect of each rule against hidden, averaged over the run's buyer entries "
                "(and sellers, for 'all sellers'), paired per market, 95% bootstrap interval; "
                "+ gains, - loses, = no significant change (paired t-test, Holm's correction "
                f"over all {len(study.policy)} cells).",
                ["rule", "seller", "share"] + [who for _, who in OUTCOMES],
                [
                    [rule, seller, f"{study.share(c):g}"]
                    + [cell(by[(rule, seller, c, m)]) for m, _ in OUTCOMES]
                    for rule, seller, c in keys
                ],
            )
        )
    if study.rates or study.notes:
        out.append(
            Section(
                "study:rates",
                "Voluntary disclosure: how often each agent entry discloses",
                "Share of the agent buyers of each entry that tell the seller they are agents "
                "under the voluntary rule, on the run's markets with the run's dice."
                + ("" if not study.notes else " " + " ".join(study.notes)),
                ["buyer", "agent entry", "share", "agents", "disclosed", "rate"],
                [
                    [r.buyer, r.agent, f"{r.share:g}", str(r.agents), str(r.disclosed), fmt(r.rate)]
                    for r in study.rates
                ],  # fmt: skip
            )
        )
    if study.learned:
        out.append(
            Section(
                "study:learned",
                "Learned disclosure against both forced choices (voluntary rule)",
                "learned - forced per market (X+learned against X, which never discloses, "
                "and X+disclosed, which always does), 95% bootstrap interval; * = significant "
                f"after Holm's correction over the {len(study.learned)} rows.",
                [
                    "entry",
                    "versus",
                    "share",
                    "seller",
                    "metric",
                    "n",
                    "learned",
                    "forced",
                    "learned - forced",
                    "p",
                    "Holm",
                ],  # fmt: skip
                [
                    [
                        r.family,
                        r.versus,
                        f"{r.share:g}",
                        r.seller,
                        r.metric,
                        str(r.n),
                        fmt(r.learned),
                        fmt(r.forced),
                        fmt_ci(r.diff, r.lower, r.upper),
                        "-" if not math.isfinite(r.p) else f"{r.p:.2g}",
                        "*" if r.significant else "",
                    ]
                    for r in study.learned
                ],  # fmt: skip
            )
        )
    return out


def study_forest_rows(study: DisclosureStudy, rule: str) -> list[EffectRow]:
    """The rows of the study's forest plot of ``rule``: informative cells, each config
    named by its agent share."""
    kept, _ = informative_effects([r for r in study.effects if r.treatment == rule])
    kept = sorted(kept, key=lambda r: (study.share(r.config), r.config))  # stable: rows keep order
    return [dataclasses.replace(r, config=f"share {study.share(r.config):g}") for r in kept]


__all__ = ["study_forest_rows", "study_sections"]
