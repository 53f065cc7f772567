"""Evaluate a language-model seller against its teacher and its warm start, paired by market.

Every seller meets the same markets (indices 0..K-1 of the config under the seed, the
markets a tournament with that seed plays), so differences are paired per market:

* the model's seller violation rate (violations / messages sent);
* its mean profit and the ratio to the teacher's on the same markets;
* the paired profit difference model - teacher, and, with ``--warm``, model - warm start,
  each with a 95% Student-t interval over markets.

    python -m agents.lm.evaluate --model RUN/final --warm RUN/sft \\
        --market tournaments/specs/default.toml:retail --buyers truthful --markets 1000
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from agents import registry
from agents.command import nonneg_int, nonneg_number, pos_int, run_guarded
from agents.evaluate import mean_ci, play_markets
from agents.lm.policy import POLICY_FILE, LMSeller, from_directory
from arena.config import MarketConfig, load_market_file


def evaluate(
    model: str,
    market: MarketConfig,
    *,
    buyers: str = "truthful",
    markets: int = 1000,
    seed: int = 0,
    teacher: str = "greedy_matcher",
    warm: str | None = None,
    temperature: float = 0.0,
    device: str = "cpu",
    chunk: int = 250,
) -> dict:
    """The figures of the module docstring, as a JSON-ready dict."""
    indices = np.arange(markets)

    def run(seller) -> tuple[dict, float]:
        t0 = time.perf_counter()
        buyer = registry.make_buyers(buyers, seed=seed)
        out = play_markets(market, seed, indices, seller, buyer, chunk=chunk)
        return out, time.perf_counter() - t0

    def lm(path: str) -> LMSeller:
        # A trained directory says how it plays (its policy.json: the analyst's short list,
        # the prompt budget); a bare model directory plays with LMSeller's defaults.
        if (Path(path) / POLICY_FILE).exists():
            return from_directory(path, seed=seed, temperature=temperature, device=device)
        return LMSeller(path=path, seed=seed, temperature=temperature, device=device)

    got, wall = run(lm(model))
    ref, _ = run(registry.make(teacher, "seller", seed=seed))
    result = {
        "markets": markets,
        "model": model,
        "teacher": teacher,
        "temperature": temperature,
        "wall_s": round(wall, 1),
        "seller_violation_rate": float(got["seller_violations"].sum() / got["turns_used"].sum()),
        "profit": mean_ci(got["profit"]),
        "teacher_profit": mean_ci(ref["profit"]),
        "profit_ratio": float(got["profit"].mean() / ref["profit"].mean()),
        "minus_teacher": mean_ci(got["profit"] - ref["profit"]),
        "capture": mean_ci(got["capture"]),
    }
    if warm:
        start, _ = run(lm(warm))
        result["warm_profit"] = mean_ci(start["profit"])
        result["warm_violation_rate"] = float(
            start["seller_violations"].sum() / start["turns_used"].sum()
        )
        result["minus_warm"] = mean_ci(got["profit"] - start["profit"])
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description="Evaluate a language-model seller against its teacher on the same "
        "markets (paired), greedily unless --temperature says otherwise."
    )
    p.add_argument("--model", required=True, help="the trained model's directory")
    p.add_argument("--warm", help="the warm-started model to compare with")
    p.add_argument(
        "--market",
        default="tournaments/specs/default.toml:retail",
        help="SPEC.toml:CONFIG, or a TOML file with a [market] table",
    )
    p.add_argument("--buyers", default="truthful", help="buyer entry or population")
    p.add_argument("--markets", type=pos_int, default=1000, help="number of markets")
    p.add_argument("--seed", type=nonneg_int, default=0, help="root seed of the markets")
    p.add_argument("--teacher", default="greedy_matcher", help="seller entry to compare with")
    p.add_argument("--temperature", type=nonneg_number, default=0.0, help="0: greedy decoding")
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:1, ...)")
    p.add_argument(
        "--threads", type=nonneg_int, default=1, help="torch threads (0: leave torch's own)"
    )
    args = p.parse_args(argv)
    if args.threads > 0:
        import torch

        torch.set_num_threads(args.threads)
    result = evaluate(
        args.model,
        load_market_file(args.market),
        buyers=args.buyers,
        markets=args.markets,
        seed=args.seed,
        teacher=args.teacher,
        warm=args.warm,
        temperature=args.temperature,
        device=args.device,
    )
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_guarded("agents.lm.evaluate", main))
