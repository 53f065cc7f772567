"""The disclosure study: what revealing "the payer is an agent" does as agents spread.

A run is a disclosure study when it has configs that differ only in ``agent_share``
(``tournaments/specs/disclosure.toml``: 0, 0.25, 0.5, 0.75 and 1), the ``hidden`` rule
and ``mandatory`` or ``voluntary`` beside it. Buyer entries are populations split by
kind (``human=H,agent=A``): each market's agent share decides who is an agent, and the
agent entry decides, under ``voluntary``, who discloses. Because market instances depend
only on (config, seed, index) and configs that differ in the agent share share their
draws, every share, rule, seller and buyer entry meets the same markets, and every
comparison below is paired per market.

What it measures (``disclosure_study``):

* ``effects``: per agent share (config), seller and buyer entry, the paired effect of
  each rule against hidden on seller profit, agent buyers' surplus, human buyers'
  surplus, efficiency, deal rate and mean price paid (``tournaments.effects``, 95%
  percentile bootstrap over market instances).
* ``policy``: who gains and who loses. Per rule, agent share and seller (and over all
  sellers), the effect on the seller's profit, agent buyers' surplus, human buyers'
  surplus and total welfare (profit + buyer surplus), averaged over the run's buyer
  entries (the lineup is the population of markets: each instance's difference is the
  mean over its pairings), with a 95% bootstrap interval over instances and a verdict:
  gains / loses where the paired t-test is significant after Holm's correction over
  every cell of the table, "no significant change" elsewhere.
* ``rates``: under ``voluntary``, the share of each agent entry's agents that disclose
  (on the run's markets, with the run's dice), found by setting the markets up as the
  tournament did; no market is played.
* ``learned``: for an agent entry ``X+learned`` (it chooses whether to disclose) beside
  ``X`` (never discloses) and ``X+disclosed`` (always), with the same human entry: what
  the learned choice earns against each forced choice under ``voluntary``, paired per
  market (``tournaments.compare``; Holm over the table's rows).

Its tables are ``tournaments.disclosure_tables``. This module runs to about 450 lines: the
four measures above, their row types and the spec checks that say what a study is, each
short, read together.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.special import stdtr

from agents.stats import mean_ci
from arena.seeding import keyed_sequence
from tournaments.effects import (
    EffectRow,
    bootstrap_means,
    disclosure_effect,
    multiplicities,
)
from tournaments.records import Records
from tournaments.spec import TournamentSpec

STUDY_METRICS = (
    "profit",
    "buyer_surplus_agent",
    "buyer_surplus_human",
    "efficiency",
    "deal_rate",
    "mean_price",
)
"""The effects of each rule, per share, seller and buyer entry."""
OUTCOMES = (
    ("profit", "seller"),
    ("buyer_surplus_agent", "agent buyers"),
    ("buyer_surplus_human", "human buyers"),
    ("welfare", "total welfare"),
)
"""The policy table's outcomes: (metric, who)."""
LEARNED_METRICS = ("buyer_surplus_agent", "profit", "buyer_surplus_human")
LEARNED_SUFFIX = "+learned"
DISCLOSED_SUFFIX = "+disclosed"
TREATMENTS = ("mandatory", "voluntary")
ALL_SELLERS = "all sellers"


@dataclass(frozen=True)
class StudyConfig:
    name: str
    share: float


@dataclass(frozen=True)
class PolicyRow:
    """The effect of one rule (against hidden) on one outcome."""

    rule: str
    seller: str
    """A seller, or ``ALL_SELLERS``."""
    config: str
    share: float
    outcome: str
    """profit, buyer_surplus_agent, buyer_surplus_human or welfare."""
    n: int
    """Market instances."""
    hidden: float
    """Mean under hidden (the same averaging)."""
    diff: float
    lower: float
    upper: float
    p: float
    verdict: str
    """gains | loses | no significant change (Holm over the table)."""


@dataclass(frozen=True)
class RateRow:
    """How often an agent entry's agents disclose under the voluntary rule."""

    buyer: str
    agent: str
    config: str
    share: float
    agents: int
    """Agent buyers over the run's markets of the config."""
    disclosed: int

    @property
    def rate(self) -> float:
        return self.disclosed / self.agents if self.agents else math.nan


@dataclass(frozen=True)
class LearnedRow:
    """The learned choice against a forced one, under the voluntary rule."""

    family: str
    """The agent entry X of X+learned."""
    versus: str
    """never (X) | always (X+disclosed)."""
    seller: str
    config: str
    share: float
    metric: str
    n: int
    learned: float
    forced: float
    diff: float
    """learned - forced, mean per market."""
    lower: float
    upper: float
    p: float
    significant: bool


@dataclass(frozen=True)
class DisclosureStudy:
    configs: tuple[StudyConfig, ...]
    effects: tuple[EffectRow, ...]
    policy: tuple[PolicyRow, ...]
    rates: tuple[RateRow, ...]
    learned: tuple[LearnedRow, ...]
    notes: tuple[str, ...] = field(default=())

    def share(self, config: str) -> float:
        return next(c.share for c in self.configs if c.name == config)


# ---------------------------------------------------------------------- what is a study
def study_configs(spec: TournamentSpec) -> list[StudyConfig]:
    """Configs of ``spec`` that form agent-share series: groups of configs equal in every
    field but ``agent_share``, with at least two shares; sorted by share."""
    groups: dict[str, list[StudyConfig]] = {}
    for name, cfg in spec.configs:
        rest = {k: v for k, v in cfg.to_dict().items() if k not in ("agent_share", "disclosure")}
        groups.setdefault(repr(sorted(rest.items())), []).append(
            StudyConfig(name, float(cfg.agent_share))
        )
    out = []
    for members in groups.values():
        if len({c.share for c in members}) >= 2:
            out += members
    return sorted(out, key=lambda c: (c.share, c.name))


def is_study(spec: TournamentSpec | None) -> bool:
    return (
        spec is not None
        and "hidden" in spec.disclosure
        and any(t in spec.disclosure for t in TREATMENTS)
        and bool(study_configs(spec))
    )


def kind_entries(spec: TournamentSpec, buyer: str) -> tuple[str | None, str] | None:
    """(human entry, agent entry) of a buyer entry split by kind (``human=H,agent=A``),
    (None, the entry) for a plain entry, None for a mix by shares."""
    mix = spec.buyer_spec(buyer)
    parts = [p.strip() for p in mix.split(",") if p.strip()]
    if len(parts) == 2 and all("=" in p for p in parts):
        roles = dict(p.split("=", 1) for p in parts)
        roles = {k.strip(): v.strip() for k, v in roles.items()}
        if set(roles) == {"human", "agent"}:
            return roles["human"], roles["agent"]
    if "," in mix or ":" in mix or "=" in mix:
        return None
    return None, mix


# ---------------------------------------------------------------------- the analysis
def disclosure_study(
    records: Records,
    spec: TournamentSpec,
    *,
    rounds: int = 1000,
    seed: int = 0,
    rates: bool = True,
) -> DisclosureStudy:
    """Every table of the study (see the module docstring). ``rates``: compute the
    disclosure rates (this builds the agent entries' policies)."""
    configs = study_configs(spec)
    names = {c.name for c in configs}
    rec = Records.from_columns(records)
    rec = rec.take(np.isin(rec["config"].astype(str), sorted(names)))
    rules = {rec.matches.disclosure[m] for m in set(rec.match.tolist())}
    treatments = [t for t in TREATMENTS if t in rules and "hidden" in rules]
    effects = tuple(
        row
        for t in treatments
        for row in disclosure_effect(rec, STUDY_METRICS, rounds=rounds, seed=seed, treatment=t)
    )
    policy = tuple(_policy(rec, configs, treatments, rounds, seed))
    notes: list[str] = []
    rate_rows = tuple(_rates(spec, configs, notes)) if rates and "voluntary" in rules else ()
    learned = tuple(_learned(rec, spec, configs, rounds, seed)) if "voluntary" in rules else ()
    return DisclosureStudy(tuple(configs), effects, policy, rate_rows, learned, tuple(notes))


def _slices(rec: Records) -> dict[tuple[str, str, str, str], tuple[int, int]]:
    """(seller, buyer, rule, config) -> the rows [start, stop) of that match."""
    t = rec.matches
    starts = np.searchsorted(rec.match, np.arange(len(t) + 1))
    return {
        (t.seller[m], t.buyer[m], t.disclosure[m], t.config[m]): (
            int(starts[m]),
            int(starts[m + 1]),
        )
        for m in range(len(t))
        if starts[m + 1] > starts[m]
    }


def _column(rec: Records, metric: str) -> np.ndarray:
    if metric == "welfare":
        return rec["profit"] + rec["buyer_surplus"]
    return rec[metric]


def _policy(rec, configs, treatments, rounds, seed) -> list[PolicyRow]:
    cells = _slices(rec)
    sellers = sorted({k[0] for k in cells})
    buyers = sorted({k[1] for k in cells})
    cols = {m: _column(rec, m) for m, _ in OUTCOMES}
    rows: list[PolicyRow] = []
    for rule in treatments:
        for sc in configs:
            for seller in [*sellers, ALL_SELLERS]:
                mine = sellers if seller == ALL_SELLERS else [seller]
                pairs = [
                    (cells[(s, b, "hidden", sc.name)], cells[(s, b, rule, sc.name)])
                    for s in mine
                    for b in buyers
                    if (s, b, "hidden", sc.name) in cells and (s, b, rule, sc.name) in cells
                ]
                if not pairs:
                    continue
                markets = np.unique(np.concatenate([rec.market[a:b] for (a, b), _ in pairs]))
                stats = []
                for metric, _ in OUTCOMES:
                    total = np.zeros(len(markets))
                    base = np.zeros(len(markets))
                    count = np.zeros(len(markets))
                    for (h0, h1), (t0, t1) in pairs:
                        idx, ih, it = np.intersect1d(
                            rec.market[h0:h1], rec.market[t0:t1], return_indices=True
                        )
                        d = cols[metric][t0:t1][it] - cols[metric][h0:h1][ih]
                        ok = np.isfinite(d)
                        u = np.searchsorted(markets, idx[ok])
                        np.add.at(total, u, d[ok])
                        np.add.at(base, u, cols[metric][h0:h1][ih][ok])
                        np.add.at(count, u, 1.0)
                    with np.errstate(invalid="ignore", divide="ignore"):
                        per = np.where(count > 0, total / np.maximum(count, 1), np.nan)
                        hid = np.where(count > 0, base / np.maximum(count, 1), np.nan)
                    stats.append((metric, per, hid))
                values = np.stack([per for _, per, _ in stats], axis=1)
                key = f"disclosure policy\x1f{rule}\x1f{sc.name}\x1f{seller}"
                rng = np.random.default_rng(keyed_sequence(seed, key))
                lo, hi = bootstrap_means(values, multiplicities(rng, len(markets), rounds))
                for k, (metric, per, hid) in enumerate(stats):
                    ok = np.isfinite(per)
                    diff, _, _ = mean_ci(per[ok])
                    rows.append(
                        PolicyRow(
                            rule=rule,
                            seller=seller,
                            config=sc.name,
                            share=sc.share,
                            outcome=metric,
                            n=int(ok.sum()),
                            hidden=float(np.nanmean(hid)) if ok.any() else math.nan,
                            diff=diff,
                            lower=float(lo[k]),
                            upper=float(hi[k]),
                            p=_p_value(per[ok]),
                            verdict="",
                        )
                    )
    return _verdicts(rows)


def _p_value(d: np.ndarray) -> float:
    n = d.size
    if n < 2:
        return math.nan
    sd, mean = float(d.std(ddof=1)), float(d.mean())
    if sd == 0:
        return 1.0 if mean == 0 else 0.0
    return float(2 * stdtr(n - 1, -abs(mean / (sd / math.sqrt(n)))))


def holm(p: Sequence[float], alpha: float = 0.05) -> list[bool]:
    """Which p-values are significant under Holm's step-down correction (NaN never)."""
    order = sorted((x, k) for k, x in enumerate(p) if math.isfinite(x))
    m = len(order)
    out = [False] * len(p)
    for rank, (x, k) in enumerate(order):
        if x > alpha / (m - rank):
            break
        out[k] = True
    return out


def _verdicts(rows: list[PolicyRow]) -> list[PolicyRow]:
    import dataclasses

    sig = holm([r.p for r in rows])
    return [
        dataclasses.replace(
            r,
            verdict=("gains" if r.diff > 0 else "loses") if s else "no significant change",
        )
        for r, s in zip(rows, sig, strict=True)
    ]


def _rates(spec: TournamentSpec, configs, notes: list[str]) -> list[RateRow]:
    """Under voluntary: each agent entry's disclosures on the run's markets, set up as the
    tournament set them up (the same markets and dice); no market is played."""
    from agents import registry
    from agents.env import SellerEnv
    from arena.generator import generate_batch

    spec.register_checkpoints()
    matches = {(m.buyer, m.config, m.disclosure): m for m in spec.matches()}
    out = []
    for buyer in spec.buyers:
        roles = kind_entries(spec, buyer)
        if roles is None:
            continue
        for sc in configs:
            match = matches.get((buyer, sc.name, "voluntary"))
            if match is None:
                continue
            try:
                policy = registry.make_buyers(
                    spec.buyer_spec(buyer), seed=spec.policy_seed(match, "buyer")
                )
            except (registry.UnknownEntry, ValueError) as err:
                notes.append(f"disclosure rate of {buyer}: cannot build it here ({err})")
                break
            if policy.kind != "agent" and roles[0] is None:
                break  # a plain human entry: nobody to disclose
            batch = generate_batch(match.market_config, spec.seed, range(spec.markets))
            env = SellerEnv.from_batch(batch, policy, rewards=False)
            env.reset()
            agents = env.engine.batch.is_agent
            disclosed = env.engine.disclosed & agents
            out.append(
                RateRow(buyer, roles[1], sc.name, sc.share, int(agents.sum()), int(disclosed.sum()))
            )
    return out


def _learned(rec, spec, configs, rounds, seed) -> list[LearnedRow]:
    """X+learned against X and X+disclosed (same human entry), under voluntary."""
    import dataclasses

    from tournaments.compare import compare_runs

    roles = {b: kind_entries(spec, b) for b in spec.buyers}
    by_roles = {v: b for b, v in roles.items() if v is not None}
    rows: list[LearnedRow] = []
    vol = rec.take(np.asarray(rec["disclosure"] == "voluntary"))
    for buyer, r in roles.items():
        if r is None or not r[1].endswith(LEARNED_SUFFIX):
            continue
        base = r[1].removesuffix(LEARNED_SUFFIX)
        for versus, agent in (("never", base), ("always", base + DISCLOSED_SUFFIX)):
            other = by_roles.get((r[0], agent))
            if other is None:
                continue
            a = vol.take(np.asarray(vol["buyer"] == other))
            b = vol.take(np.asarray(vol["buyer"] == buyer))
            if a.rows == 0 or b.rows == 0:
                continue
            pairs = compare_runs(
                a, b, by=("seller", "config"), metrics=LEARNED_METRICS, rounds=rounds, seed=seed
            )
            share = {c.name: c.share for c in configs}
            for p in pairs:
                if p.group == ("all",) or p.group[1] not in share:
                    continue
                rows.append(
                    LearnedRow(
                        family=base,
                        versus=versus,
                        seller=p.group[0],
                        config=p.group[1],
                        share=share[p.group[1]],
                        metric=p.metric,
                        n=p.n,
                        learned=p.mean_b,
                        forced=p.mean_a,
                        diff=p.diff,
                        lower=p.lower,
                        upper=p.upper,
                        p=p.p,
                        significant=False,
                    )
                )
    sig = holm([r.p for r in rows])
    rows = [dataclasses.replace(r, significant=s) for r, s in zip(rows, sig, strict=True)]
    return sorted(rows, key=lambda r: (r.family, r.versus, r.share, r.seller, r.metric))


__all__ = [
    "ALL_SELLERS",
    "OUTCOMES",
    "STUDY_METRICS",
    "DisclosureStudy",
    "LearnedRow",
    "PolicyRow",
    "RateRow",
    "StudyConfig",
    "disclosure_study",
    "holm",
    "is_study",
    "kind_entries",
    "study_configs",
]
