"""How much could buyers take from a seller? An exhaustive bound for buyers who only
accept or refuse, and a search with counters.

    python benchmarks/buyer_bound.py [--seller rl_seller] [--markets 100]
                                     [--configs retail,wholesale] [--markdown] [--threads 1]

On the markets of ``benchmarks/generalization.py`` (same configs, same seed, hidden
rule), every sequence of answers to the seller's T messages, one bit a message (accept
or refuse; a message without an offer is refused), is played on its own copy of each
market: 2^T plays a market. A seller whose play is a function of the market and the
answers so far (every policy here: ``rl_seller`` in its greedy mode, and the noise of
every policy is keyed by market and turn) answers each sequence one way, so the sequence
that leaves the buyers the most surplus, summed over them, bounds what any buyers who
only accept or refuse can earn against that seller on that market: coordinated or not,
knowing every value and the seller's policy. Configs with more than ``MAX_TURNS`` turns
(``large``: 20) are skipped: 2^T plays are too many.

Counters are outside that bound: a counter is a refusal with a standing bid, which the
seller reads and at or below which a later offer trades at once. From the bound's best
sequence, a local search (``with_counters``) changes one answer at a time, to refuse,
accept or a counter at a quarter, half or three quarters of the way from the product's
cost to the price offered, and keeps the best change, round after round until none
helps. What it finds is a play that coordinated buyers could make, a lower bound on the
best with counters.

Printed per config: the best scripted buyer against the seller at its registered
defaults (the reference of the issue's buyer target, picked as ``generalization.py``
picks it), ``rl_buyer``, the bound, the paired 95% CI of the bound minus 1.2 times the
reference, the search with counters, and the seller's profit in each.

Why: ``rl_buyer`` is asked for 1.2x the best scripted buyer's surplus against
``rl_seller``. Where the accept/refuse bound is below 1.2x, buyers who accept or refuse
cannot meet that target however they learn or coordinate; the search shows how much
counters add.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np
from tabulate import tabulate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.base import HUMAN, BuyerAction, BuyerPolicy  # noqa: E402
from agents.evaluate import evaluate_batch, mean_ci  # noqa: E402
from arena.generator import generate, stack_instances  # noqa: E402
from arena.observation import ACCEPT, COUNTER, REJECT, BuyerObs  # noqa: E402
from arena.prices import cents  # noqa: E402
from benchmarks.generalization import (  # noqa: E402
    CONFIGS,
    SCRIPTED_BUYERS,
    SEED,
    Cells,
    _make_seller,
    add_threads_flag,
    chosen_configs,
    use_threads,
)

MAX_TURNS = 12
"""The most turns a config may have here: 2^12 = 4,096 plays a market."""
ROWS = 16_384
"""Plays per batch (several markets' sequences side by side)."""
TARGET = 1.2


REFUSE, TAKE = 0, 1
BIDS = (0.25, 0.5, 0.75)
"""Answer ``2 + i`` counters on the offered product at ``cost + BIDS[i] * (price -
cost)``: a refusal with a bid (the engine trades at once when a later offer of that
product is at or below a standing bid)."""


class AnswerPlan(BuyerPolicy):
    """Row r answers the seller's k-th message (k = 1..T) by ``plan[r, k-1]``: REFUSE,
    TAKE (accept) or ``2 + i``, a counter at ``BIDS[i]`` of the way from the product's cost
    to the price offered. A message without an offer is refused."""

    kind = HUMAN

    def __init__(self, plan: np.ndarray) -> None:
        plan = np.asarray(plan)
        if plan.ndim != 2 or not 1 <= plan.shape[1] <= MAX_TURNS:
            raise ValueError(f"plan: (rows, turns) with 1 to {MAX_TURNS} turns, got {plan.shape}")
        if plan.min() < 0 or plan.max() >= 2 + len(BIDS):
            raise ValueError(f"plan: answers 0 to {1 + len(BIDS)}")
        self.plan = plan

    def act(self, obs: BuyerObs) -> BuyerAction:
        b = obs.batch_size
        k = np.clip(obs.turn - 1, 0, self.plan.shape[1] - 1)
        answer = self.plan[np.arange(b), k]
        j = obs.offer_product
        offered = j >= 0
        cost = np.take_along_axis(obs.costs, np.maximum(j, 0)[:, None], axis=1)[:, 0]
        level = np.asarray((0.0, 0.0, *BIDS))[answer]
        bid = cents(
            np.where(offered, cost + level * (obs.offer_price - cost), np.nan),
            *obs.price_range,
            down=True,
        )
        decision = np.where(answer == TAKE, ACCEPT, np.where(answer >= 2, COUNTER, REJECT))
        decision = np.where(offered, decision, REJECT)
        return BuyerAction(
            decision,
            np.where(decision == COUNTER, j, -1),
            np.where(decision == COUNTER, bid, np.nan),
        )


def sequences(turns: int) -> np.ndarray:
    """(2^T, T) every sequence of accept/refuse answers: row r answers message k by bit
    k-1 of r."""
    if not 1 <= turns <= MAX_TURNS:
        raise ValueError(f"turns must be 1 to {MAX_TURNS}, got {turns}")
    return (np.arange(1 << turns)[:, None] >> np.arange(turns)) & 1


def _play(seller: str, config, indices, plans: np.ndarray) -> dict[str, np.ndarray]:
    """Market ``indices[i]`` played with the answers ``plans[i]`` (rows of one plan a
    row), under the hidden rule."""
    instances = {i: generate(config, SEED, i) for i in set(indices)}
    batch = stack_instances([instances[i] for i in indices])
    batch = dataclasses.replace(
        batch, config=dataclasses.replace(batch.config, disclosure="hidden")
    )
    return evaluate_batch(batch, _make_seller(seller), AnswerPlan(plans))


def bound(seller: str, config, indices: list[int]) -> dict[str, np.ndarray]:
    """Per market of ``indices``: the most buyer surplus (summed over buyers) any
    sequence of accept/refuse answers gets from ``seller``, the seller's profit in that
    play, and the answers (``plan``, (markets, T))."""
    every = sequences(config.turns)
    copies = len(every)
    per_batch = max(1, ROWS // copies)
    out = {"buyer_surplus": [], "profit": [], "plan": []}
    for s in range(0, len(indices), per_batch):
        chunk = indices[s : s + per_batch]
        got = _play(seller, config, np.repeat(chunk, copies), np.tile(every, (len(chunk), 1)))
        surplus = got["buyer_surplus"].reshape(len(chunk), copies)
        best = surplus.argmax(axis=1)
        rows = np.arange(len(chunk))
        out["buyer_surplus"].append(surplus[rows, best])
        out["profit"].append(got["profit"].reshape(len(chunk), copies)[rows, best])
        out["plan"].append(every[best])
    return {k: np.concatenate(v) for k, v in out.items()}


def with_counters(
    seller: str, config, indices: list[int], start: dict[str, np.ndarray], rounds: int = 20
) -> dict[str, np.ndarray]:
    """A local search from ``start`` (``bound``'s plays) over answers with counters: each
    round tries, for every market, every single change of one answer (to refuse, accept
    or one of the ``BIDS`` counters) and keeps the best if it leaves the buyers more,
    until no change does or ``rounds`` have run (against ``rl_seller`` in retail it stops
    after 8). What it finds is a play, so a lower bound on the best answers with
    counters, not an upper one."""
    plans = start["plan"].copy()
    surplus = start["buyer_surplus"].copy()
    profit = start["profit"].copy()
    turns, options = plans.shape[1], 2 + len(BIDS)
    # every (message, answer) change of a plan; the unchanged ones replay it
    k = np.repeat(np.arange(turns), options)
    a = np.tile(np.arange(options), turns)
    for _ in range(rounds):
        trial = np.repeat(plans, len(k), axis=0)
        trial[np.arange(len(trial)), np.tile(k, len(plans))] = np.tile(a, len(plans))
        where = np.repeat(indices, len(k))
        parts = [
            _play(seller, config, where[s : s + ROWS], trial[s : s + ROWS])
            for s in range(0, len(trial), ROWS)
        ]
        got = {m: np.concatenate([p[m] for p in parts]) for m in ("buyer_surplus", "profit")}
        gain = got["buyer_surplus"].reshape(len(plans), len(k))
        best = gain.argmax(axis=1)
        rows = np.arange(len(plans))
        better = gain[rows, best] > surplus + 1e-9
        if not better.any():
            break
        plans[better] = trial.reshape(len(plans), len(k), turns)[rows, best][better]
        surplus[better] = gain[rows, best][better]
        profit[better] = got["profit"].reshape(len(plans), len(k))[rows, best][better]
    return {"buyer_surplus": surplus, "profit": profit, "plan": plans}


HEADER = [
    "config",
    "T",
    "best scripted buyer",
    "its surplus",
    "rl_buyer",
    "accept/refuse bound",
    "bound / best",
    f"bound - {TARGET}x best",
    "with counters (search)",
    "search / best",
    "seller's profit: vs best / at the bound / at the search",
]


def rows(seller: str, configs: list[str], markets: int) -> list[list]:
    out = []
    indices = list(range(markets))
    cells = Cells(markets)  # the generalization benchmark's cells: the same markets
    for name in configs:
        config = CONFIGS[name]
        if config.turns > MAX_TURNS:
            continue
        scripted = {b: cells.get(seller, b, "hidden", name) for b in SCRIPTED_BUYERS}
        best = max(scripted, key=lambda b: np.mean(scripted[b]["buyer_surplus"]))
        ref = np.mean(scripted[best]["buyer_surplus"])
        rl = cells.get(seller, "rl_buyer", "hidden", name)
        top = bound(seller, config, indices)
        found = with_counters(seller, config, indices, top)
        m, lo, hi = mean_ci(top["buyer_surplus"] - TARGET * scripted[best]["buyer_surplus"])
        profits = (scripted[best]["profit"], top["profit"], found["profit"])
        out.append(
            [
                name,
                config.turns,
                best,
                f"{ref:.1f}",
                f"{np.mean(rl['buyer_surplus']):.1f}",
                f"{np.mean(top['buyer_surplus']):.1f}",
                f"{np.mean(top['buyer_surplus']) / ref:.2f}x",
                f"{m:+.1f} [{lo:+.1f}, {hi:+.1f}]",
                f"{np.mean(found['buyer_surplus']):.1f}",
                f"{np.mean(found['buyer_surplus']) / ref:.2f}x",
                " / ".join(f"{np.mean(p):.1f}" for p in profits),
            ]
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="benchmarks/buyer_bound.py",
        description="The most surplus buyers who only accept or refuse can take from a seller.",
    )
    ap.add_argument("--seller", default="rl_seller", help="registry name or checkpoint")
    ap.add_argument("--markets", type=int, default=100, help="markets per config")
    ap.add_argument(
        "--configs",
        default=",".join(n for n, c in CONFIGS.items() if c.turns <= MAX_TURNS),
        help=f"comma-separated (configs with more than {MAX_TURNS} turns are skipped)",
    )
    ap.add_argument("--markdown", action="store_true", help="a Markdown table")
    add_threads_flag(ap)
    args = ap.parse_args(argv)
    try:
        configs = chosen_configs(args.configs)
        use_threads(args.threads)
        if args.markets < 1:
            raise ValueError("--markets: 1 at least")
        _make_seller(args.seller)
    except (ValueError, KeyError, OSError) as err:
        ap.error(str(err.args[0] if err.args else err))
    t0 = time.perf_counter()
    table = rows(args.seller, configs, args.markets)
    fmt = "github" if args.markdown else "simple"
    print(f"## {args.seller}: what buyers could take ({args.markets} markets per config)\n")
    print(tabulate(table, headers=HEADER, tablefmt=fmt))
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
