"""What the transcript viewer shows about one kept market: its turns, the state after each
turn, and the oracle beside what happened.

A kept transcript holds every message as written (``TurnRecord.to_dict()``); the state
after each turn (standing bids, stock, trades, profit so far) is recomputed here by
replaying those very messages through the scalar reference market (``arena.market``, the
executable spec), on the instance regenerated from (config, seed, market index). The
oracle (``arena.oracle``): W*_T, one optimal assignment within T trades, and the seller's
profit at the Walrasian prices and under VCG, computed at report time. Everything is
plain JSON-ready data; ``tournaments.html_report`` renders it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence

from arena.generator import MarketInstance, generate
from arena.market import Market
from arena.metrics import seller_benchmarks
from arena.oracle import optimal_assignment
from arena.transcript import TurnRecord
from tournaments.store import transcript_problem


def _num(x: float, digits: int = 4) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), digits)


def oracle(instance: MarketInstance) -> dict:
    """The instance's private values and its full-information benchmarks."""
    v, c, inv = instance.values, instance.costs, instance.inventory
    turns = instance.config.turns
    pairs = optimal_assignment(v, c, inv, max_trades=turns)
    bench = seller_benchmarks(instance)
    lo, hi = instance.config.price_range
    return {
        "buyers": instance.num_buyers,
        "products": instance.num_products,
        "turns": turns,
        "price_range": [lo, hi],
        "values": [[_num(x, 2) for x in row] for row in v],
        "signals": [[_num(x, 2) for x in row] for row in instance.signals],
        "costs": [_num(x, 2) for x in c],
        "inventory": [int(k) for k in inv],
        "w_star": _num(bench["w_star"]),
        "walrasian_high": _num(bench["walrasian_high"]),
        "walrasian_low": _num(bench["walrasian_low"]),
        "vcg": _num(bench["vcg"]),
        "assignment": [
            {
                "buyer": i,
                "product": j,
                "value": _num(v[i, j], 2),
                "cost": _num(c[j], 2),
                "surplus": _num(v[i, j] - c[j]),
            }
            for i, j in pairs
        ],
    }


def _state(market: Market) -> dict:
    n = len(market.bought)
    return {
        "bids": [
            None if market.counter[i] is None else [market.counter[i][0], market.counter[i][1]]
            for i in range(n)
        ],
        "stock": list(market.stock),
        "bought": list(market.bought),
        "left": list(market.left),
        "profit": _num(market.profit),
        "buyer_surplus": _num(sum(market.buyer_surplus())),
        "trades": [[t.buyer, t.product, t.price, t.turn] for t in market.trades],
    }


def replay(instance: MarketInstance, turns: Sequence[dict]) -> tuple[list[dict], bool]:
    """The state after each turn, from the turns' own messages replayed on ``instance``;
    and whether the replay reproduced every recorded violation and trade (it does for a
    transcript of this instance: the market is a function of the messages). Turns that
    are no transcript are a ValueError."""
    problem = transcript_problem(list(turns))
    if problem is not None:
        raise ValueError(f"not a transcript: {problem}")
    market = Market(instance)
    states, same = [], True
    for rec in turns:
        if market.done:
            same = False
            break
        who = market.offer(rec["seller_text"])
        if who is not None:
            market.answer(rec["buyer_text"])
        same &= _agrees(market.transcript[-1], rec)
        states.append(_state(market))
    return states, same


def _agrees(got: TurnRecord, rec: dict) -> bool:
    """Whether a replayed turn has the recorded turn's violations, answer and trade."""
    trade = None if got.trade is None else dataclasses.asdict(got.trade)
    return (
        got.seller_violation.name.lower() == rec["seller_violation"]
        and got.buyer == rec["buyer"]
        and got.buyer_violation.name.lower() == rec["buyer_violation"]
        and trade == rec["trade"]
        and got.buyer_left == rec["buyer_left"]
    )


def _turn(rec: dict) -> dict:
    """A stored turn record without the prompts (the viewer shows messages, not what each
    side was shown)."""
    return {k: v for k, v in rec.items() if k not in ("seller_prompt", "buyer_prompt")}


def market_view(instance: MarketInstance, turns: Sequence[dict]) -> dict:
    """Everything the viewer shows about one kept market, oracle excluded (shared by every
    match that met the same instance: ``oracle``)."""
    states, same = replay(instance, turns)
    return {"turns": [_turn(r) for r in turns], "states": states, "replayed": same}


def viewer_data(kept: Iterable[tuple[str, int, list[dict]]], matches: dict, seed: int) -> dict:
    """The viewer's data for kept transcripts ``(match id, market index, turns)`` of a run
    of root seed ``seed``; ``matches``: match id -> ``tournaments.types.Match``. Returns
    ``matches`` (id, entries, rule, config, kept markets), ``markets`` keyed ``"MATCH#K"``
    and ``oracle`` keyed ``"CONFIG#K"`` (one per instance, shared by every match that met
    it). Transcripts of matches the spec does not name are left out."""
    out_matches: dict[str, dict] = {}
    markets: dict[str, dict] = {}
    oracles: dict[str, dict] = {}
    for match_id, k, turns in kept:
        match = matches.get(match_id)
        if match is None:
            continue
        # The instance the worker played: (the match's config, the run's seed, k).
        instance = generate(match.market_config, seed, k)
        key = f"{match.config}#{k}"
        if key not in oracles:
            oracles[key] = oracle(instance)
        markets[f"{match_id}#{k}"] = {**market_view(instance, turns), "oracle": key}
        entry = out_matches.setdefault(
            match_id,
            {
                "id": match_id,
                "seller": match.seller,
                "buyer": match.buyer,
                "rule": match.disclosure,
                "config": match.config,
                "markets": [],
            },
        )
        entry["markets"].append(k)
    for entry in out_matches.values():
        entry["markets"].sort()
    return {
        "matches": sorted(out_matches.values(), key=lambda m: m["id"]),
        "markets": markets,
        "oracle": oracles,
    }


def play_data(instance: MarketInstance, turns: Sequence[dict], seller: str, buyers: str) -> dict:
    """The viewer's data for one market played by ``arena play``."""
    match_id = f"{seller} vs {buyers}"
    key = f"market#{instance.index}"
    return {
        "matches": [
            {
                "id": match_id,
                "seller": seller,
                "buyer": buyers,
                "rule": instance.config.disclosure,
                "config": "market",
                "markets": [instance.index],
            }
        ],
        "markets": {
            f"{match_id}#{instance.index}": {**market_view(instance, turns), "oracle": key}
        },
        "oracle": {key: oracle(instance)},
    }


__all__ = ["market_view", "oracle", "play_data", "replay", "viewer_data"]
