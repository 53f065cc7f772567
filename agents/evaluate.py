"""Play many markets between a seller and a buyer policy and summarize the metrics."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from agents.base import BuyerPolicy, SellerPolicy
from agents.rollout import play_batch
from agents.stats import mean_ci
from arena.config import MarketConfig
from arena.generator import MarketBatch, generate_batch
from arena.metrics import batch_metrics

__all__ = ["evaluate_batch", "mean_ci", "play_markets", "summarize"]


def evaluate_batch(
    batch: MarketBatch, seller: SellerPolicy, buyer: BuyerPolicy, w_star: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Per-market metrics (METRICS and DERIVED) of one batch played to the end."""
    out = batch_metrics(play_batch(batch, seller, buyer), w_star)
    turns = np.maximum(out["turns_used"], 1.0)
    out["violation_rate"] = (out["seller_violations"] + out["buyer_violations"]) / turns
    out["seller_violation_rate"] = out["seller_violations"] / turns
    out["buyer_violation_rate"] = out["buyer_violations"] / turns
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


def summarize(metrics: dict[str, np.ndarray], names: Sequence[str] | None = None) -> dict:
    """{name: mean, name_ci: [lower, upper]} for a JSON line or a table."""
    out: dict = {}
    for name in names or metrics:
        m, lo, hi = mean_ci(metrics[name])
        out[name] = m
        out[name + "_ci"] = [lo, hi]
    return out
