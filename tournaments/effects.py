"""The disclosure effect: what a rule changes, paired per market instance, with intervals.

A row compares one pairing (seller, buyer entry, config) under a ``treatment`` rule
(mandatory or voluntary) with the same pairing under ``control`` (hidden), market by
market: the same instance under both rules, so the market's own luck cancels.

Bootstrap: resamples draw market instances with replacement, as many as the config has.
All rows of one config share the draws (one multiplicity matrix, rounds x instances), so a
row's resampled means are one matrix product over the sufficient statistics (each
instance's difference and whether it is defined); a row averages over the drawn instances
where its difference is finite. The draws depend on (seed, config) only: a row does not
change when other pairings are added.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from agents.stats import mean_ci_rows
from arena.seeding import keyed_sequence
from tournaments.ratings.bradley_terry import distinct_ints
from tournaments.ratings.scale import percentile_interval
from tournaments.records import Records

EFFECT_METRICS = (
    "profit",
    "buyer_surplus_agent",
    "buyer_surplus_human",
    "efficiency",
    "mean_price",
)
"""Default metrics of :func:`disclosure_effect`."""

_BOOT_CELLS = 1 << 22  # bootstrap blocks stay below ~32 MB


@dataclass(frozen=True)
class EffectRow:
    """The effect of one rule on one metric of one pairing."""

    seller: str
    buyer: str
    config: str
    metric: str
    n: int
    """Markets where both values are finite (``mean_price`` is NaN without trades)."""
    control: str
    treatment: str
    control_mean: float
    treatment_mean: float
    diff: float
    """Mean paired difference treatment - control."""
    lower: float
    """Percentile bootstrap interval of ``diff`` (NaN below two markets)."""
    upper: float
    t_lower: float
    """Paired Student-t interval of ``diff``, a cross-check."""
    t_upper: float

    @property
    def pairing(self) -> tuple[str, str, str, str]:
        """(treatment, config, seller, buyer): the rows of one pairing and rule."""
        return (self.treatment, self.config, self.seller, self.buyer)


def multiplicities(rng: np.random.Generator, units: int, rounds: int) -> np.ndarray:
    """(rounds, units): how often each unit is drawn in each resample of ``units`` draws."""
    out = np.empty((rounds, units))
    block = max(1, min(rounds, _BOOT_CELLS // max(units, 1)))
    for start in range(0, rounds, block):
        stop = min(rounds, start + block)
        draws = rng.integers(0, units, size=(stop - start, units))
        draws += (np.arange(stop - start) * units)[:, None]  # one bin range per round
        out[start:stop] = np.bincount(draws.reshape(-1), minlength=(stop - start) * units).reshape(
            stop - start, units
        )
    return out


def bootstrap_means(
    values: np.ndarray, mult: np.ndarray, confidence: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile intervals of the mean of each column of ``values`` (units x columns, NaN
    where a unit has no value) under the resamples ``mult`` (rounds x units). A column with
    fewer than two values gets no interval: one market says nothing about the spread."""
    ok = np.isfinite(values)
    # The drawn units with a value, per round: whole numbers, exact in any order of the sums,
    # so the columns with one pattern of values share one product.
    columns = ok if ok.ndim == 2 else ok[:, None]
    first_of: dict[bytes, int] = {}
    which = np.array(
        [first_of.setdefault(col.tobytes(), c) for c, col in enumerate(columns.T)], np.int64
    )
    first, which = np.unique(which, return_inverse=True)
    counts = (mult @ columns[:, first].astype(float))[:, which]
    with np.errstate(invalid="ignore", divide="ignore"):
        means = (mult @ np.where(ok, values, 0.0)) / counts.reshape(len(mult), *ok.shape[1:])
    lo, hi = percentile_interval(means, confidence)
    few = ok.sum(axis=0) < 2
    return np.where(few, np.nan, lo), np.where(few, np.nan, hi)


def bootstrap_mean_ci(
    x: np.ndarray, rng: np.random.Generator, rounds: int = 1000, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``x`` (resampled with replacement)."""
    x = np.asarray(x, dtype=float).reshape(-1)
    if len(x) < 2:  # one market says nothing about the spread: no interval rather than a point
        return math.nan, math.nan
    lo, hi = bootstrap_means(x[:, None], multiplicities(rng, len(x), rounds), level)
    return float(lo[0]), float(hi[0])


def stratified_multiplicities(
    rng: np.random.Generator, sizes: Sequence[int], rounds: int
) -> np.ndarray:
    """(rounds, units): units numbered stratum by stratum, ``sizes[k]`` of them in stratum
    k; each round draws every stratum's own number of units from that stratum alone (a
    design with a fixed number of markets per config keeps its mix in every round)."""
    return np.concatenate([multiplicities(rng, int(n), rounds) for n in sizes], axis=1)


def clustered_mean_ci(
    x: np.ndarray,
    strata: Sequence[Hashable],
    clusters: Sequence[Hashable],
    rng: np.random.Generator,
    rounds: int = 1000,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``x``, resampling whole clusters (e.g.
    one market instance met under several rules) with all their values, each stratum's
    clusters from its own (``strata[i]``, e.g. the config, is the same for every value of
    one cluster). With one cluster in every stratum there is nothing to resample: NaN.
    Singleton clusters in one stratum draw as :func:`bootstrap_mean_ci` does."""
    x = np.asarray(x, dtype=float).reshape(-1)
    keys = sorted({(st, c) for st, c in zip(strata, clusters, strict=True)})
    if len(keys) != len({c for _, c in keys}):
        raise ValueError("all values of one cluster must lie in one stratum")
    index = {k: u for u, k in enumerate(keys)}
    unit = np.array([index[k] for k in zip(strata, clusters, strict=True)], np.int64)
    sizes = list(Counter(st for st, _ in keys).values())  # keys sorted: strata contiguous
    if len(x) < 2 or max(sizes, default=0) < 2:
        return math.nan, math.nan
    mult = stratified_multiplicities(rng, sizes, rounds)
    sums = np.bincount(unit, x, len(keys))
    counts = np.bincount(unit, minlength=len(keys)).astype(float)
    means = (mult @ sums) / (mult @ counts)
    lo, hi = percentile_interval(means[:, None], level)
    return float(lo[0]), float(hi[0])


def _columns(
    rec: Records,
    matches: Sequence[int],
    starts: np.ndarray,
    idx: np.ndarray,
    metrics: Sequence[str],
) -> np.ndarray:
    """(instances x (matches * metrics)): column k * len(metrics) + j holds metric j of match
    ``matches[k]`` on each instance of ``idx`` (sorted market indices), NaN where it has none."""
    out = np.full((len(idx), len(matches) * len(metrics)), np.nan)
    span = [np.arange(starts[m], starts[m + 1]) for m in matches]
    row = np.concatenate([np.zeros(0, np.int64), *span])
    block = np.repeat(np.arange(len(matches)) * len(metrics), [len(x) for x in span])
    flat = out.reshape(-1)
    at = np.searchsorted(idx, rec.market[row]) * out.shape[1] + block
    for j, name in enumerate(metrics):
        flat[at + j] = rec.metrics[name][row]
    return out


def disclosure_effect(
    records: Records,
    metrics: Sequence[str] = EFFECT_METRICS,
    rounds: int = 1000,
    seed: int = 0,
    *,
    treatment: str = "mandatory",
    control: str = "hidden",
) -> list[EffectRow]:
    """The paired effect of the disclosure rule, ``treatment - control`` per market.

    For every (seller, buyer, config) played under both rules (others are skipped) and every
    metric, rows are paired on the market index (the same instance under both rules), and
    only markets where both values are finite count. Rows are sorted by (config, seller,
    buyer), metrics in the order given. ``records`` may be a ``Records`` or a mapping of
    columns.
    """
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    rec = Records.from_columns(records)
    table = rec.matches
    present = np.zeros(len(table), bool)
    present[rec.match] = True
    starts = np.searchsorted(rec.match, np.arange(len(table) + 1))
    same = (np.diff(rec.market) == 0) & (np.diff(rec.match) == 0)
    twice = set(rec.match[1:][same].tolist())
    by_rule: dict[tuple[str, str, str], dict[str, int]] = {}
    for m in np.flatnonzero(present):
        key = (table.config[m], table.seller[m], table.buyer[m])
        by_rule.setdefault(key, {})[table.disclosure[m]] = int(m)
    rows: list[EffectRow] = []
    pairings = sorted(k for k, v in by_rule.items() if treatment in v and control in v)
    for config in sorted({k[0] for k in pairings}):
        keys = [k for k in pairings if k[0] == config]
        for k in keys:
            for m in (by_rule[k][treatment], by_rule[k][control]):
                if m in twice:
                    raise ValueError(
                        f"{k[1]} vs {k[2]} on {config}: a market index appears twice under one rule"
                    )
        # The config's instances: every market index any of its pairings played.
        idx = distinct_ints(
            np.concatenate(
                [rec.market[starts[m] : starts[m + 1]] for k in keys for m in by_rule[k].values()]
            )
        )
        # Column k * len(metrics) + j of a rule's matrix: metric j of pairing k, per instance.
        t_vals, c_vals = (
            _columns(rec, [by_rule[k][rule] for k in keys], starts, idx, metrics)
            for rule in (treatment, control)
        )
        d = t_vals - c_vals  # NaN wherever either side is missing or undefined
        rng = np.random.default_rng(keyed_sequence(seed, f"disclosure effect\x1f{config}"))
        lo, hi = bootstrap_means(d, multiplicities(rng, len(idx), rounds))
        ok = np.isfinite(d)
        n = ok.sum(axis=0).tolist()
        diff, t_lo, t_hi = (v.tolist() for v in mean_ci_rows(d.T))
        # Each side's mean over the markets where the difference is defined.
        t_mean = mean_ci_rows(np.where(ok, t_vals, np.nan).T)[0].tolist()
        c_mean = mean_ci_rows(np.where(ok, c_vals, np.nan).T)[0].tolist()
        lo, hi = lo.tolist(), hi.tolist()
        c = 0
        for _, seller, buyer in keys:
            for name in metrics:
                rows.append(
                    EffectRow(
                        seller=seller,
                        buyer=buyer,
                        config=config,
                        metric=name,
                        n=n[c],
                        control=control,
                        treatment=treatment,
                        control_mean=c_mean[c],
                        treatment_mean=t_mean[c],
                        diff=diff[c],
                        lower=lo[c],
                        upper=hi[c],
                        t_lower=t_lo[c],
                        t_upper=t_hi[c],
                    )
                )
                c += 1
    return rows


def informative_effects(
    rows: Sequence[EffectRow],
) -> tuple[list[EffectRow], list[tuple[str, str, str, str]]]:
    """Split effect rows into those of pairings where the rule changed something and the
    (treatment, config, seller, buyer) keys of pairings where every metric differed by
    exactly 0 on every market (common random numbers make "nothing changed" exact)."""
    groups: dict[tuple[str, str, str, str], list[EffectRow]] = {}
    for r in rows:
        groups.setdefault(r.pairing, []).append(r)
    kept, omitted = [], []
    for key, group in groups.items():
        # A metric with no finite pair (mean price without trades) says nothing either way.
        if all(r.n == 0 or (r.diff == 0 and r.lower == 0 and r.upper == 0) for r in group):
            omitted.append(key)
        else:
            kept.extend(group)
    return kept, omitted
