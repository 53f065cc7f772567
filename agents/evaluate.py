"""Play many markets between a seller and a buyer policy and summarize the metrics."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from agents.base import BuyerPolicy, SellerPolicy
from agents.rollout import play_batch
from agents.stats import mean_ci
from arena.config import MarketConfig
from arena.generator import MarketBatch, generate_batch
from arena.metrics import BOUNDS, batch_metrics

__all__ = ["evaluate_batch", "mean_ci", "play_markets", "summarize"]


def evaluate_batch(
    batch: MarketBatch, seller: SellerPolicy, buyer: BuyerPolicy, w_star: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Per-market metrics (METRICS and DERIVED) of one batch played to the end."""
    return _metrics(play_batch(batch, seller, buyer), w_star)


def _metrics(engine, w_star: np.ndarray | None) -> dict[str, np.ndarray]:
    out = batch_metrics(engine, w_star)
    turns = np.maximum(out["turns_used"], 1.0)
    out["violation_rate"] = (out["seller_violations"] + out["buyer_violations"]) / turns
    out["seller_violation_rate"] = out["seller_violations"] / turns
    out["buyer_violation_rate"] = out["buyer_violations"] / turns
    return out


def evaluate_with_transcripts(
    batch: MarketBatch,
    seller: SellerPolicy,
    buyer: BuyerPolicy,
    rows: Sequence[int],
    w_star: np.ndarray | None = None,
    prompts: bool = False,
) -> tuple[dict[str, np.ndarray], dict[int, list[dict]]]:
    """``evaluate_batch``, and the transcripts of the markets in batch ``rows`` kept during
    the same play: {market index: [turn dicts]} (``arena.transcript.TurnRecord.to_dict``; with
    ``prompts``, each turn also holds what each side was shown). No market is replayed."""
    keep = np.zeros(batch.size, bool)
    keep[np.asarray(rows, np.int64)] = True
    engine = play_batch(batch, seller, buyer, dialogue=keep, prompts=prompts and keep.any())
    out = _metrics(engine, w_star)
    transcripts = {int(batch.indices[b]): engine.dialogue.records(int(b)) for b in rows}
    return out, transcripts


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
    """{name: mean, name_ci: [lower, upper]} for a JSON line or a table; an interval is
    clipped to what its metric can be (``arena.metrics.BOUNDS``: no deal rate above 1)."""
    out: dict = {}
    for name in names or metrics:
        m, lo, hi = mean_ci(metrics[name])
        low, high = BOUNDS.get(name, (-math.inf, math.inf))
        out[name] = m
        out[name + "_ci"] = [float(np.clip(lo, low, high)), float(np.clip(hi, low, high))]
    return out
