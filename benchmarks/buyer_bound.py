"""How much could buyers take from a seller? An exhaustive bound for buyers who only
accept or refuse, and a search with counters.

    python benchmarks/buyer_bound.py [--seller rl_seller] [--markets 100]
                                     [--configs retail,wholesale] [--bids 0.1,0.2,...,0.9]
                                     [--markdown] [--threads 1]

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
accept or a counter at 0.1, 0.2, ..., 0.9 of the way from the product's cost to the price
offered (``--bids``: other fractions), and keeps the best change, round after round until
none helps. What it finds is a play that coordinated buyers could make, a lower bound on
the best with counters.

Buyers who play alone, each from its own value, are scored too: every buyer counters the
first offer it gains from at one of the same fractions of the way from the product's cost
to the price offered, and then accepts a later offer of that product it gains from
(``CounterOnce``). The best fraction on the same markets is reported, so the figure is a
little optimistic; the play itself needs nothing but each buyer's own value, the offer
and its own bid, no coordination and no knowledge of the others.

Printed per config: the best scripted buyer against the seller at its registered
defaults (the reference of the issue's buyer target, picked as ``generalization.py``
picks it), ``rl_buyer``, the bound, the paired 95% CI of the bound minus 1.2 times the
reference, the search with counters, the counter-once rule, and the seller's profit in
each; then how the search's plays answer the seller's messages.

Why: ``rl_buyer`` is asked for 1.2x the best scripted buyer's surplus against
``rl_seller``. Where the accept/refuse bound is below 1.2x, buyers who accept or refuse
cannot meet that target however they learn or coordinate; the search shows how much
counters add.
"""

from __future__ import annotations

import argparse
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
    under_rule,
    use_threads,
)

MAX_TURNS = 12
"""The most turns a config may have here: 2^12 = 4,096 plays a market."""
ROWS = 16_384
"""Plays per batch (several markets' sequences side by side)."""
TARGET = 1.2


REFUSE, TAKE = 0, 1
BIDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
"""Answer ``2 + i`` counters on the offered product at ``cost + BIDS[i] * (price -
cost)``: a refusal with a bid (the engine trades at once when a later offer of that
product is at or below a standing bid)."""


def check_bids(bids) -> tuple[float, ...]:
    """Counter levels as a sorted tuple of distinct fractions, each strictly between 0 and
    1 (at 0 a bid is the cost, at 1 it is the offer itself)."""
    bids = tuple(sorted({float(x) for x in bids}))
    if not bids or not all(0 < x < 1 for x in bids):
        raise ValueError(f"fractions strictly between 0 and 1, got {bids}")
    return bids


def parse_fractions(flag: str, text: str) -> tuple[float, ...]:
    """A comma-separated flag value as ``check_bids`` fractions (a ValueError that names
    the flag and the value)."""
    try:
        return check_bids(float(x) for x in text.split(","))
    except ValueError as err:
        raise ValueError(f"{flag}: {text!r}: {err}") from None


class AnswerPlan(BuyerPolicy):
    """Row r answers the seller's k-th message (k = 1..T) by ``plan[r, k-1]``: REFUSE,
    TAKE (accept) or ``2 + i``, a counter at ``bids[i]`` of the way from the product's cost
    to the price offered. A message without an offer is refused."""

    kind = HUMAN

    def __init__(self, plan: np.ndarray, bids: tuple[float, ...] = BIDS) -> None:
        plan = np.asarray(plan)
        self.bids = check_bids(bids)
        if plan.ndim != 2 or not 1 <= plan.shape[1] <= MAX_TURNS:
            raise ValueError(f"plan: (rows, turns) with 1 to {MAX_TURNS} turns, got {plan.shape}")
        if plan.min() < 0 or plan.max() >= 2 + len(self.bids):
            raise ValueError(f"plan: answers 0 to {1 + len(self.bids)}")
        self.plan = plan

    def act(self, obs: BuyerObs) -> BuyerAction:
        b = obs.batch_size
        k = np.clip(obs.turn - 1, 0, self.plan.shape[1] - 1)
        answer = self.plan[np.arange(b), k]
        j = obs.offer_product
        offered = j >= 0
        cost = np.take_along_axis(obs.costs, np.maximum(j, 0)[:, None], axis=1)[:, 0]
        level = np.asarray((0.0, 0.0, *self.bids))[answer]
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


class CounterOnce(BuyerPolicy):
    """Each buyer alone: an offer it gains from (value above the price) of a product it
    has no standing bid on, it counters at ``share`` of the way from the product's cost to
    the price offered; an offer of the product it has bid on it accepts if it gains from
    it (its bid trades at once when an offer comes under it). Offers it does not gain
    from it refuses."""

    kind = HUMAN

    def __init__(self, share: float) -> None:
        (self.share,) = check_bids([share])

    def act(self, obs: BuyerObs) -> BuyerAction:
        ar = np.arange(obs.batch_size)
        j = obs.offer_product
        offered = j >= 0
        k = np.maximum(j, 0)
        value, cost, price = obs.values[ar, k], obs.costs[ar, k], obs.offer_price
        gains = offered & (value > price)
        first = gains & (obs.counter_product != j)
        bid = cents(
            np.where(first, cost + self.share * (price - cost), np.nan),
            *obs.price_range,
            down=True,
        )
        decision = np.where(first, COUNTER, np.where(gains, ACCEPT, REJECT))
        return BuyerAction(decision, np.where(first, j, -1), np.where(first, bid, np.nan))


def sequences(turns: int) -> np.ndarray:
    """(2^T, T) every sequence of accept/refuse answers: row r answers message k by bit
    k-1 of r."""
    if not 1 <= turns <= MAX_TURNS:
        raise ValueError(f"turns must be 1 to {MAX_TURNS}, got {turns}")
    return (np.arange(1 << turns)[:, None] >> np.arange(turns)) & 1


def _play(seller: str, config, indices, plans: np.ndarray, bids=BIDS) -> dict[str, np.ndarray]:
    """Market ``indices[i]`` played with the answers ``plans[i]`` (rows of one plan a
    row, counters at ``bids``), under the hidden rule."""
    return _play_with(seller, config, indices, AnswerPlan(plans, bids))


def _play_with(seller: str, config, indices, buyers: BuyerPolicy) -> dict[str, np.ndarray]:
    """Markets ``indices`` (repeats allowed) played by ``buyers``, under the hidden rule."""
    instances = {i: generate(config, SEED, i) for i in set(indices)}
    batch = under_rule(stack_instances([instances[i] for i in indices]), "hidden")
    return evaluate_batch(batch, _make_seller(seller), buyers)


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
    seller: str,
    config,
    indices: list[int],
    start: dict[str, np.ndarray],
    rounds: int = 20,
    bids: tuple[float, ...] = BIDS,
) -> dict[str, np.ndarray]:
    """A local search from ``start`` (``bound``'s plays) over answers with counters: each
    round tries, for every market, every single change of one answer (to refuse, accept
    or a counter at one of the ``bids``) and keeps the best if it leaves the buyers more,
    until no change does or ``rounds`` have run (against ``rl_seller`` in retail it stops
    after 8). What it finds is a play, so a lower bound on the best answers with
    counters, not an upper one."""
    plans = start["plan"].copy()
    surplus = start["buyer_surplus"].copy()
    profit = start["profit"].copy()
    turns, options = plans.shape[1], 2 + len(bids)
    # every (message, answer) change of a plan; the unchanged ones replay it
    k = np.repeat(np.arange(turns), options)
    a = np.tile(np.arange(options), turns)
    for _ in range(rounds):
        trial = np.repeat(plans, len(k), axis=0)
        trial[np.arange(len(trial)), np.tile(k, len(plans))] = np.tile(a, len(plans))
        where = np.repeat(indices, len(k))
        parts = [
            _play(seller, config, where[s : s + ROWS], trial[s : s + ROWS], bids)
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


def counter_once(seller: str, config, indices: list[int], bids=BIDS) -> dict:
    """``CounterOnce`` at each of ``bids``: the share whose play leaves the buyers the most
    surplus (mean over the markets), with its per-market surplus and the seller's profit."""
    plays = {f: _play_with(seller, config, indices, CounterOnce(f)) for f in bids}
    best = max(plays, key=lambda f: np.mean(plays[f]["buyer_surplus"]))
    return {"share": best, **{k: plays[best][k] for k in ("buyer_surplus", "profit")}}


def answers(plans: np.ndarray, bids=BIDS) -> str:
    """How a set of plays answers the seller's messages: the share of each answer."""
    names = ["refuse", "accept", *(f"counter {b:g}" for b in bids)]
    counts = np.bincount(plans.ravel(), minlength=len(names))
    return ", ".join(f"{n} {c / plans.size:.0%}" for n, c in zip(names, counts, strict=True) if c)


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
    "counter once (each alone)",
    "once / best",
    "seller's profit: vs best / at the bound / at the search / at counter once",
]


def rows(seller: str, configs: list[str], markets: int, bids=BIDS) -> list[list]:
    """The table's rows; each row's last entry (not a column) says how the search's
    plays answer."""
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
        found = with_counters(seller, config, indices, top, bids=bids)
        alone = counter_once(seller, config, indices, bids)
        m, lo, hi = mean_ci(top["buyer_surplus"] - TARGET * scripted[best]["buyer_surplus"])
        profits = (scripted[best]["profit"], top["profit"], found["profit"], alone["profit"])
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
                f"{np.mean(alone['buyer_surplus']):.1f} (at {alone['share']:g})",
                f"{np.mean(alone['buyer_surplus']) / ref:.2f}x",
                " / ".join(f"{np.mean(p):.1f}" for p in profits),
                answers(found["plan"], bids),
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
    ap.add_argument(
        "--bids",
        default=",".join(str(x) for x in BIDS),
        help="the search's counter levels: comma-separated fractions of the way from the "
        "product's cost to the price offered",
    )
    ap.add_argument("--markdown", action="store_true", help="a Markdown table")
    add_threads_flag(ap)
    args = ap.parse_args(argv)
    try:
        configs = chosen_configs(args.configs)
        bids = parse_fractions("--bids", args.bids)
        use_threads(args.threads)
        if args.markets < 1:
            raise ValueError("--markets: 1 at least")
        _make_seller(args.seller)
    except (ValueError, KeyError, OSError) as err:
        ap.error(str(err.args[0] if err.args else err))
    t0 = time.perf_counter()
    table = rows(args.seller, configs, args.markets, bids)
    fmt = "github" if args.markdown else "simple"
    print(f"## {args.seller}: what buyers could take ({args.markets} markets per config)\n")
    print(f"Counters at {', '.join(f'{x:g}' for x in bids)} of the way.\n")
    print(tabulate([r[:-1] for r in table], headers=HEADER, tablefmt=fmt))
    print("\nHow the search's plays answer the seller's messages:\n")
    for r in table:
        print(f"- {r[0]}: {r[-1]}")
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
