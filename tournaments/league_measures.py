"""What a league round measures beyond ratings: the exploitability of a frozen snapshot
(a best response against it, beside the best pool member, paired per market) and the
surplus split of a seller-buyer pairing."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.stats import mean_ci
from arena.rewards import rating_score
from arena.seeding import keyed_sequence
from tournaments.effects import clustered_mean_ci
from tournaments.league_config import LeagueError
from tournaments.records import Records

_OTHER = {"seller": "buyer", "buyer": "seller"}


@dataclass(frozen=True)
class Exploitability:
    """A best response against one frozen snapshot, beside the best pool member."""

    side: str
    """The side of the snapshot exploited."""
    target: str
    response: str
    """The best response's entry name."""
    response_score: float
    """Its mean market score against the target (from its side, 0..1)."""
    best_member: str
    """The pool member of the other side that scores best against the target."""
    best_score: float
    gain: float
    """response_score - best_score: the exploitability."""
    lower: float
    """95% percentile bootstrap interval of ``gain`` (market instances resampled)."""
    upper: float
    t_lower: float
    t_upper: float
    markets: int


def exploitability(
    side: str,
    target: str,
    response: str,
    response_rows: Records,
    pool_rows: Records,
    seed: int = 0,
) -> Exploitability:
    """Exploitability of ``target`` (a ``side`` entry): the best response's market score
    against it minus the best pool member's, paired on (config, rule, market index); the
    bootstrap interval resamples market instances, each config's from its own."""
    other = _OTHER[side]

    def scores(rec: Records) -> np.ndarray:
        s = np.asarray(rating_score(rec["profit"], rec["buyer_surplus"], rec["w_star"]), float)
        return s if other == "seller" else 1.0 - s

    def keyed(rec: Records) -> dict[tuple, float]:
        keys = zip(rec["config"], rec["disclosure"], rec.market.tolist(), strict=True)
        return dict(zip(keys, scores(rec).tolist(), strict=True))

    mine = response_rows.take(np.asarray(response_rows[side] == target))
    resp = keyed(mine)
    rows = pool_rows.take(np.asarray(pool_rows[side] == target))
    members = sorted(set(rows[other].tolist()))
    if not resp or not members:
        raise LeagueError(f"no markets of {target} to measure its exploitability on")
    best, best_mean = "", -math.inf
    for m in members:
        sel = rows.take(np.asarray(rows[other] == m))
        mean = float(np.nanmean(scores(sel)))
        if mean > best_mean:
            best, best_mean = m, mean
    base = keyed(rows.take(np.asarray(rows[other] == best)))
    common = sorted(set(resp) & set(base))
    d = np.array([resp[k] - base[k] for k in common])
    finite = np.isfinite(d)
    kept = [k for k, ok in zip(common, finite, strict=True) if ok]
    d = d[finite]
    gain, t_lo, t_hi = mean_ci(d)
    rng = np.random.default_rng(keyed_sequence(seed, f"exploitability\x1f{target}"))
    # One market instance (config, index) met under several rules is one draw, and each
    # config's instances are drawn from its own: the round robin fixes markets per config.
    configs = [k[0] for k in kept]
    lo, hi = clustered_mean_ci(d, configs, [(k[0], k[2]) for k in kept], rng)
    r = np.array([resp[k] for k in common])
    return Exploitability(
        side=side,
        target=target,
        response=response,
        response_score=float(np.nanmean(r)),
        best_member=best,
        best_score=best_mean,
        gain=gain,
        lower=lo,
        upper=hi,
        t_lower=t_lo,
        t_upper=t_hi,
        markets=int(d.size),
    )


SPLIT_FIELDS = ("capture", "buyer_share", "efficiency", "score", "profit", "buyer_surplus")


def surplus_split(rec: Records, seller: str, buyer: str) -> list[dict[str, Any]]:
    """The split of ``seller`` vs ``buyer`` per (config, rule) and over all: mean with a 95%
    Student-t interval of capture (profit / W*_T), buyer share (buyer surplus / W*_T),
    efficiency, the seller's market score, profit and buyer surplus."""
    sel = rec.take(np.asarray((rec["seller"] == seller) & (rec["buyer"] == buyer)))
    with np.errstate(invalid="ignore", divide="ignore"):
        w = sel["w_star"]
        cols = {
            "capture": sel["capture"],
            "buyer_share": np.where(w > 0, sel["buyer_surplus"] / np.where(w > 0, w, 1), np.nan),
            "efficiency": sel["efficiency"],
            "score": np.asarray(rating_score(sel["profit"], sel["buyer_surplus"], w), float),
            "profit": sel["profit"],
            "buyer_surplus": sel["buyer_surplus"],
        }
    groups = [("all", "all", np.ones(sel.rows, bool))]
    cells = sorted(set(zip(sel["config"].tolist(), sel["disclosure"].tolist(), strict=True)))
    if len(cells) > 1:
        for config, rule in cells:
            groups.append(
                (config, rule, np.asarray((sel["config"] == config) & (sel["disclosure"] == rule)))
            )
    out = []
    for config, rule, mask in groups:
        row: dict[str, Any] = {"config": config, "disclosure": rule, "n": int(mask.sum())}
        for k in SPLIT_FIELDS:
            row[k] = list(mean_ci(cols[k][mask]))
        out.append(row)
    return out


__all__ = ["SPLIT_FIELDS", "Exploitability", "exploitability", "surplus_split"]
