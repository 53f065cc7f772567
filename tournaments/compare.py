"""Paired differences between two runs that share seeds and markets (``arena compare``).

Market instances depend only on (config, tournament seed, index), so two runs with the
same seed and the same config tables met the same markets: a row of run A and a row of
run B with the same match coordinates and market index are one market played twice
(before and after training, by two leagues, under two rules). Pairing them cancels the
market's own luck, as the disclosure effect does within one run.

Pairing: rows are paired on the coordinates named in ``by`` (any of seller, buyer,
disclosure, config; all four by default) and the market index. Coordinates left out are
ignored, so each run may have only one match per remaining key (a pairing that would be
ambiguous is an error). Two configs a pairing makes meet must be one market structure,
whatever their names: with ``config`` left out, matches of differently built configs would
otherwise be paired market by market (``paired_configs``, ``check_shared_markets``).
``rename`` maps coordinate values of run A to run B's names
(``rl_seller=league_s3``, ``hidden=mandatory``), for what changed name between the runs;
a name that is no coordinate value of run A is refused rather than ignored, since a typo
there would quietly leave the match it meant unpaired.

Matches of one run with no counterpart in the other (a seller that only run A has) cannot
be paired and take no part in any row, the ``all`` rows included; the result names them
(``Comparison.only_a``, ``only_b``) so that a comparison never reads as covering matches
it left out.

Intervals: per row (a pairing and a metric), a 95% percentile bootstrap over the paired
markets (every row of a config resampled with the same draws, keyed by the seed and the
config) beside the paired Student-t interval and its two-sided p-value; rows are flagged
significant after Holm's correction over every row of the comparison. An ``all`` row per
metric pools every pair, resampling market instances (config, index) with all their
pairs.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import stdtr

from agents.stats import mean_ci
from arena.rewards import rating_score
from arena.seeding import keyed_sequence
from tournaments.effects import bootstrap_means, multiplicities, stratified_multiplicities
from tournaments.ratings.scale import percentile_interval
from tournaments.records import MATCH_KEYS, Records

COMPARE_METRICS = (
    "profit",
    "buyer_surplus",
    "buyer_surplus_agent",
    "buyer_surplus_human",
    "efficiency",
    "deal_rate",
    "mean_price",
    "score",
)
"""Default metrics; ``score`` is the seller's market score (the rating score)."""
_SCORE_INPUTS = ("profit", "buyer_surplus", "w_star")


class CompareError(ValueError):
    """Two runs that cannot be paired; one line for the command line."""


@dataclass(frozen=True)
class CompareRow:
    """The paired difference B - A of one metric on one pairing (or on all pairs)."""

    group: tuple[str, ...]
    """The values of the ``by`` coordinates (run B's names), or ("all",)."""
    metric: str
    n: int
    """Paired markets where both values are finite."""
    mean_a: float
    mean_b: float
    diff: float
    lower: float
    """95% percentile bootstrap interval of ``diff``."""
    upper: float
    t_lower: float
    t_upper: float
    p: float
    """Two-sided paired t-test p-value (NaN for the ``all`` rows)."""
    significant: bool
    """p below 0.05 after Holm's correction over every pairing row."""


@dataclass(frozen=True)
class Comparison(Sequence[CompareRow]):
    """The rows of a comparison (it is the sequence of them) and the matches it left out.

    A match of one run whose pairing key the other run lacks has no counterpart: it is in
    no row, and a reader of the rows alone would not know it was played. ``only_a`` and
    ``only_b`` name those matches by their match ids in their own run (before
    ``rename``), sorted."""

    rows: tuple[CompareRow, ...]
    only_a: tuple[str, ...]
    """Played matches of run A with no counterpart in run B."""
    only_b: tuple[str, ...]
    """Played matches of run B with no counterpart in run A."""

    def __getitem__(self, k):
        return self.rows[k]

    def __len__(self) -> int:
        return len(self.rows)


def stored_columns(metrics: Sequence[str]) -> tuple[str, ...]:
    """The stored metrics needed for ``metrics`` (``score`` is derived)."""
    out = [m for m in metrics if m != "score"]
    if "score" in metrics:
        out += list(_SCORE_INPUTS)
    return tuple(dict.fromkeys(out))


def paired_configs(
    a: Records,
    b: Records,
    *,
    by: Sequence[str] = MATCH_KEYS,
    rename: Mapping[str, str] | None = None,
) -> list[tuple[str, str]]:
    """The configs ``compare_runs`` makes meet, as (name in A, name in B): a config and its
    own name (after ``rename``) when ``by`` holds ``config``; without it, whatever configs
    the matches it pairs were played on."""
    by = _checked_by(by)
    ga, gb = _groups(a, by, dict(rename or {}), "RUN_A"), _groups(b, by, {}, "RUN_B")
    return sorted({(a.matches.config[ga[g]], b.matches.config[gb[g]]) for g in ga.keys() & gb})


def check_shared_markets(
    meta_a: Mapping[str, str],
    meta_b: Mapping[str, str],
    rename: Mapping[str, str] | None = None,
    *,
    labels: Sequence[str] = ("RUN_A", "RUN_B"),
    pairs: Sequence[tuple[str, str]] = (),
) -> None:
    """Refuse two runs that did not meet the same markets: another tournament seed, a
    config of the same name (after ``rename``) with another table, or two configs that
    ``pairs`` makes meet (``paired_configs``) with different tables. A stored spec that is
    no tournament spec is refused as a corrupt store, named by its run's ``labels`` entry
    (the store's path, where the caller has it)."""
    rename = rename or {}
    spec_a, spec_b = _stored_spec(meta_a, labels[0]), _stored_spec(meta_b, labels[1])
    seed_a, seed_b = spec_a["tournament"].get("seed"), spec_b["tournament"].get("seed")
    if seed_a != seed_b:
        raise CompareError(f"the runs do not share markets: tournament seeds {seed_a} and {seed_b}")

    def tables(spec: dict) -> dict:
        t = spec.get("configs", spec.get("markets", {}))
        return {k: {f: v for f, v in c.items() if f != "disclosure"} for k, c in t.items()}

    # Runs of different lengths pair on the market indices both played.
    a, b = tables(spec_a), tables(spec_b)
    meet = [(name, rename.get(name, name)) for name in a] + list(pairs)
    for name, other in dict.fromkeys(meet):
        if name in a and other in b and b[other] != a[name]:
            table = a[name]
            diff = sorted(k for k in set(table) | set(b[other]) if table.get(k) != b[other].get(k))
            what = (
                f"config {name!r} is not the same market structure in both runs"
                if other == rename.get(name, name)
                else f"configs {name!r} of RUN_A and {other!r} of RUN_B, paired (--by leaves "
                "out config), are not the same market structure"
            )
            raise CompareError(f"{what} (differs in {', '.join(diff)}): its markets differ")


def _stored_spec(meta: Mapping[str, str], label: str) -> dict:
    """A run's stored spec as JSON tables: its ``tournament`` table and config tables
    (``configs``, or ``markets`` in older runs) as objects, each config an object."""
    try:
        spec = json.loads(meta["spec"])
    except (KeyError, TypeError, ValueError):
        spec = None
    ok = isinstance(spec, dict) and isinstance(spec.get("tournament"), dict)
    configs = spec.get("configs", spec.get("markets", {})) if ok else None
    if not (isinstance(configs, dict) and all(isinstance(c, dict) for c in configs.values())):
        raise CompareError(
            f"{label}: corrupt results store (the stored spec is not a tournament spec)"
        )
    return spec


def _values(rec: Records, metric: str) -> np.ndarray:
    if metric == "score":
        return np.asarray(rating_score(rec["profit"], rec["buyer_surplus"], rec["w_star"]), float)
    return rec.metrics[metric]


def compare_runs(
    a: Records,
    b: Records,
    *,
    by: Sequence[str] = MATCH_KEYS,
    rename: Mapping[str, str] | None = None,
    metrics: Sequence[str] = COMPARE_METRICS,
    rounds: int = 1000,
    seed: int = 0,
) -> Comparison:
    """Paired differences B - A (see the module docstring); rows sorted by group, then
    metrics in the order given, then one ``all`` row per metric, with the matches of
    either run that had no counterpart."""
    by = _checked_by(by)
    rename = dict(rename or {})
    _check_rename(a, rename)
    groups_a = _groups(a, by, rename, "RUN_A")
    groups_b = _groups(b, by, {}, "RUN_B")
    common = sorted(set(groups_a) & set(groups_b))
    if not common:
        raise CompareError(
            "the runs have no pairing in common (match coordinates "
            + ", ".join(by)
            + "); use --by to ignore a coordinate or --rename A=B for a changed name"
        )
    cfg_col = by.index("config") if "config" in by else None
    sa = np.searchsorted(a.match, np.arange(len(a.matches) + 1))
    sb = np.searchsorted(b.match, np.arange(len(b.matches) + 1))
    vals_a = {m: _values(a, m) for m in metrics}
    vals_b = {m: _values(b, m) for m in metrics}
    # Per group: the paired market indices and each metric's values in A and in B.
    paired = []
    for g in common:
        ma, mb = groups_a[g], groups_b[g]
        ka, kb = a.market[sa[ma] : sa[ma + 1]], b.market[sb[mb] : sb[mb + 1]]
        idx, ia, ib = np.intersect1d(ka, kb, assume_unique=True, return_indices=True)
        config = g[cfg_col] if cfg_col is not None else b.matches.config[mb]
        va = {m: vals_a[m][sa[ma] + ia] for m in metrics}
        vb = {m: vals_b[m][sb[mb] + ib] for m in metrics}
        paired.append((g, config, idx, va, vb))

    rows: list[CompareRow] = []
    by_config: dict[str, list[int]] = {}
    for k, p in enumerate(paired):
        by_config.setdefault(p[1], []).append(k)
    boot: dict[tuple[int, str], tuple[float, float]] = {}
    for config, members in sorted(by_config.items()):
        units = np.unique(np.concatenate([paired[k][2] for k in members]))
        cols = []
        for k in members:
            where = np.searchsorted(units, paired[k][2])
            for m in metrics:
                col = np.full(len(units), np.nan)
                col[where] = paired[k][4][m] - paired[k][3][m]
                cols.append(col)
        rng = np.random.default_rng(keyed_sequence(seed, f"compare\x1f{config}"))
        lo, hi = bootstrap_means(np.stack(cols, 1), multiplicities(rng, len(units), rounds))
        c = 0
        for k in members:
            for m in metrics:
                boot[(k, m)] = (float(lo[c]), float(hi[c]))
                c += 1
    for k, (g, _, _, va, vb) in enumerate(paired):
        for m in metrics:
            d = vb[m] - va[m]
            ok = np.isfinite(d)
            diff, t_lo, t_hi = mean_ci(d[ok])
            rows.append(
                CompareRow(
                    group=g,
                    metric=m,
                    n=int(ok.sum()),
                    mean_a=float(va[m][ok].mean()) if ok.any() else math.nan,
                    mean_b=float(vb[m][ok].mean()) if ok.any() else math.nan,
                    diff=diff,
                    lower=boot[(k, m)][0],
                    upper=boot[(k, m)][1],
                    t_lower=t_lo,
                    t_upper=t_hi,
                    p=_p_value(d[ok]),
                    significant=False,
                )
            )
    rows = _holm(rows)
    rows += _pooled(paired, metrics, rounds, seed)

    def unpaired(rec: Records, mine: dict, theirs: dict) -> tuple[str, ...]:
        return tuple(sorted(rec.matches.match_id[m] for g, m in mine.items() if g not in theirs))

    return Comparison(tuple(rows), unpaired(a, groups_a, groups_b), unpaired(b, groups_b, groups_a))


def _checked_by(by: Sequence[str]) -> tuple[str, ...]:
    by = tuple(by)
    bad = [k for k in by if k not in MATCH_KEYS]
    if bad or not by:
        raise CompareError(f"pair on some of {', '.join(MATCH_KEYS)}, got {', '.join(bad)}")
    return by


def _played(rec: Records) -> list[int]:
    """The matches of ``rec`` with rows (a subset of records keeps every match's entry)."""
    return sorted(set(rec.match.tolist()))


def _check_rename(a: Records, rename: Mapping[str, str]) -> None:
    """Refuse a ``rename`` name that is no coordinate value of run A: ignored, it would
    leave the match it meant unpaired (or paired with the wrong one) without a word."""
    t = a.matches
    played = _played(a)
    values = {k: sorted({getattr(t, k)[m] for m in played}) for k in MATCH_KEYS}
    unknown = [old for old in rename if not any(old in v for v in values.values())]
    if unknown:
        raise CompareError(
            f"--rename: RUN_A has no player, rule or config named {', '.join(map(repr, unknown))}; "
            f"its sellers: {', '.join(values['seller'])}; buyers: {', '.join(values['buyer'])} "
            f"(disclosure: {', '.join(values['disclosure'])}; "
            f"configs: {', '.join(values['config'])})"
        )


def _groups(rec: Records, by: tuple[str, ...], rename: dict, label: str) -> dict[tuple, int]:
    """Group key -> the one match of ``rec`` with those coordinates."""
    t = rec.matches
    out: dict[tuple, int] = {}
    for m in _played(rec):
        key = tuple(rename.get(getattr(t, k)[m], getattr(t, k)[m]) for k in by)
        if key in out:
            ignored = [k for k in MATCH_KEYS if k not in by]
            why = (
                f"once {', '.join(ignored)} is ignored; pair on more coordinates (--by)"
                if ignored
                else "after --rename; rename onto a name that run does not use"
            )
            raise CompareError(f"{label} has several matches for {'|'.join(key)} {why}")
        out[key] = m
    return out


def _p_value(d: np.ndarray) -> float:
    """Two-sided p-value of a paired t-test of mean 0 (1 when every difference is 0)."""
    n = d.size
    if n < 2:
        return math.nan
    sd = float(d.std(ddof=1))
    mean = float(d.mean())
    if sd == 0:
        return 1.0 if mean == 0 else 0.0
    t = mean / (sd / math.sqrt(n))
    return float(2 * stdtr(n - 1, -abs(t)))


def _holm(rows: list[CompareRow], alpha: float = 0.05) -> list[CompareRow]:
    """Flag rows significant under Holm's step-down correction (NaN p never is)."""
    import dataclasses

    order = sorted((r.p, k) for k, r in enumerate(rows) if math.isfinite(r.p))
    m = len(order)
    flags = [False] * len(rows)
    for rank, (p, k) in enumerate(order):
        if p > alpha / (m - rank):
            break
        flags[k] = True
    return [dataclasses.replace(r, significant=f) for r, f in zip(rows, flags, strict=True)]


def _pooled(paired: list, metrics: Sequence[str], rounds: int, seed: int) -> list[CompareRow]:
    """One row per metric over every pair; the bootstrap resamples instances (config,
    market) with all their pairs, each config's instances from its own (a round keeps the
    runs' number of markets per config). With one instance in every config no round can
    differ from the data, and the row has no interval."""
    if not paired:
        return []
    inst = sorted({(p[1], int(i)) for p in paired for i in p[2]})
    index = {x: k for k, x in enumerate(inst)}
    rng = np.random.default_rng(keyed_sequence(seed, "compare\x1fall"))
    per_config = Counter(config for config, _ in inst)  # inst is sorted by config
    mult = stratified_multiplicities(rng, [per_config[c] for c in sorted(per_config)], rounds)
    can_vary = max(per_config.values()) > 1
    out = []
    for m in metrics:
        sums = np.zeros(len(inst))
        counts = np.zeros(len(inst))
        da, db = [], []
        for _, config, idx, va, vb in paired:
            d = vb[m] - va[m]
            ok = np.isfinite(d)
            u = np.array([index[(config, int(i))] for i in idx[ok]], np.int64)
            np.add.at(sums, u, d[ok])
            np.add.at(counts, u, 1.0)
            da.append(va[m][ok])
            db.append(vb[m][ok])
        n = int(counts.sum())
        with np.errstate(invalid="ignore", divide="ignore"):
            means = (mult @ sums) / (mult @ counts)
        ok = n > 1 and can_vary
        lo, hi = percentile_interval(means[:, None], 0.95) if ok else ([math.nan], [math.nan])
        a_all, b_all = np.concatenate(da), np.concatenate(db)
        diff = float(sums.sum() / n) if n else math.nan
        out.append(
            CompareRow(
                group=("all",),
                metric=m,
                n=n,
                mean_a=float(a_all.mean()) if n else math.nan,
                mean_b=float(b_all.mean()) if n else math.nan,
                diff=diff,
                lower=float(np.asarray(lo).reshape(-1)[0]),
                upper=float(np.asarray(hi).reshape(-1)[0]),
                t_lower=math.nan,  # pairs of one instance are not independent: bootstrap only
                t_upper=math.nan,
                p=math.nan,
                significant=False,
            )
        )
    return out


__all__ = [
    "COMPARE_METRICS",
    "CompareError",
    "Comparison",
    "CompareRow",
    "check_shared_markets",
    "compare_runs",
    "paired_configs",
    "stored_columns",
]
