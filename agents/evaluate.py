"""Play many markets between a seller and a buyer policy and summarize the metrics."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.special import stdtrit

from agents.base import BuyerPolicy, SellerPolicy
from agents.rollout import play_batch
from arena.config import MarketConfig
from arena.generator import MarketBatch, generate_batch
from arena.metrics import batch_metrics


def evaluate_batch(
    batch: MarketBatch, seller: SellerPolicy, buyer: BuyerPolicy, w_star: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Per-market metrics (METRICS and DERIVED) of one batch played to the end."""
    out = batch_metrics(play_batch(batch, seller, buyer), w_star)
    out["violation_rate"] = (out["seller_violations"] + out["buyer_violations"]) / np.maximum(
        out["turns_used"], 1.0
    )
    return out


def play_markets(
    config: MarketConfig,
    seed: int,
    indices: Sequence[int],
    seller: SellerPolicy,
    buyer: BuyerPolicy,
    chunk: int = 1024,
) -> dict[str, np.ndarray]:
    """Per-market metrics of markets ``indices`` (of ``config`` under ``seed``), played on the
    batched engine ``chunk`` markets at a time. Market ``k`` is the same instance whoever
    plays it (common random numbers)."""
    indices = np.asarray(indices, np.int64)
    parts = [
        evaluate_batch(generate_batch(config, seed, indices[start : start + chunk]), seller, buyer)
        for start in range(0, len(indices), chunk)
    ]
    return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}


def mean_ci(x: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, lower, upper): Student-t interval over the finite entries (nan bounds with fewer
    than two, nan everything with none)."""
    x = np.asarray(x, float).reshape(-1)
    m, lo, hi = mean_ci_by_group(x, np.zeros(len(x), np.int64), 1, level)
    return float(m[0]), float(lo[0]), float(hi[0])


def mean_ci_by_group(
    x: np.ndarray, group: np.ndarray, groups: int, level: float = 0.95
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`mean_ci` of every group at once: (mean, lower, upper), each (groups,), over the
    finite entries of ``x`` whose ``group`` (codes 0..groups-1) is that group."""
    x = np.asarray(x, float)
    ok = np.isfinite(x)
    n = np.bincount(group[ok], minlength=groups).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(group[ok], x[ok], groups) / n
        dev = x[ok] - mean[group[ok]]  # two passes: no cancellation in the spread
        sd = np.sqrt(np.bincount(group[ok], dev * dev, groups) / (n - 1))
        # One market says nothing about the spread: no interval below two.
        half = np.where(n >= 2, stdtrit(np.maximum(n - 1, 1), 0.5 + level / 2), np.nan)
        half = half * sd / np.sqrt(n)
    return mean, mean - half, mean + half


def summarize(metrics: dict[str, np.ndarray], names: Sequence[str] | None = None) -> dict:
    """{name: mean, name_ci: [lower, upper]} for a JSON line or a table."""
    out: dict = {}
    for name in names or metrics:
        m, lo, hi = mean_ci(metrics[name])
        out[name] = m
        out[name + "_ci"] = [lo, hi]
    return out
