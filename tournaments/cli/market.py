"""Market commands: ``play`` one market, ``eval`` many, list the registered ``agents``.

Each takes ``--agents FILE.py`` (repeatable): a module of one's own whose entries it
registers first (``tournaments.cli.own_agents``), so that ``--seller`` and ``--buyers``
name them like any other entry.

Policies and the engine are imported by the commands that use them, so that other
commands (a report) start without them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json

from tabulate import tabulate

from arena import limits
from arena.config import DISCLOSURE_RULES, MarketConfig, load_market_file
from tournaments.cli import own_agents
from tournaments.cli.common import (
    CliError,
    at_most,
    json_safe,
    market_index,
    nonempty,
    nonneg_int,
    number,
    output_file,
    plural,
    print_transcript,
)

EVAL_METRICS = (
    "profit",
    "buyer_surplus",
    "buyer_surplus_human",
    "buyer_surplus_agent",
    "welfare",
    "efficiency",
    "capture",
    "match_quality",
    "deal_rate",
    "violation_rate",
    "seller_violation_rate",
    "buyer_violation_rate",
    "mean_price",
    "turns_used",
)


def _market_config(path: str | None, disclosure: str | None) -> MarketConfig:
    cfg = MarketConfig() if path is None else load_market_file(path)
    if disclosure is not None:
        cfg = dataclasses.replace(cfg, disclosure=disclosure)
    return cfg


def _label(path: str | None) -> str:
    return f"{path} [market]" if path else "the default market"


def _check_kinds(buyers: str, buyer, cfg: MarketConfig) -> None:
    """A population split by kind on a market where one kind has no buyer plays the other
    kind's entry only: say so rather than play it (``agents.env.check_kinds``)."""
    from agents.env import check_kinds

    check_kinds(buyer, cfg, f"--buyers {buyers!r}", "a --market FILE.toml")


def _matchup(args: argparse.Namespace):
    """The seller and the buyer side the flags name (after ``--agents`` registered its
    entries); an unknown name says where an entry of one's own comes from."""
    from agents import registry

    try:
        seller = registry.make(args.seller, "seller", seed=args.seed, sample=args.sample)
        buyer = registry.make_buyers(args.buyers, seed=args.seed, sample=args.sample)
    except registry.UnknownEntry as err:
        raise CliError(own_agents.hinted(err, args.agents)) from None
    _warn_unfinished([args.seller, *getattr(buyer, "names", [args.buyers])])
    return seller, buyer


def _warn_unfinished(names: list[str]) -> None:
    """A warning for each entry played from the folder of a training run that stopped
    early: its weights are an intermediate checkpoint, which is fine to look at but easy
    to mistake for the trained policy."""
    import sys

    from agents import registry
    from agents.rl.checkpoint import unfinished

    for name in dict.fromkeys(names):
        source = registry.get(name).source
        note = unfinished(source) if source else None
        if note:
            print(
                f"arena: warning: {source} is {note}: its training stopped early "
                "(arena train ... --resume on that folder goes on)",
                file=sys.stderr,
            )


def cmd_play(args: argparse.Namespace) -> int:
    from agents.rollout import play_reference
    from arena.generator import generate
    from arena.metrics import market_metrics, seller_benchmarks

    own_agents.load_all(args.agents)
    cfg = _market_config(args.market, args.disclosure)
    limits.unit_markets([(_label(args.market), cfg)], 1)  # one market and its transcript
    seller, buyer = _matchup(args)
    _check_kinds(args.buyers, buyer, cfg)
    instance = generate(cfg, args.seed, args.index)
    market = play_reference(instance, seller, buyer)
    lo, hi = cfg.price_range
    print(
        f"market {args.index} (seed {args.seed}): {plural(cfg.buyers, 'buyer')}, "
        f"{plural(cfg.products, 'product')},"
        f" T={cfg.turns}, prices [{lo:g}, {hi:g}], disclosure {cfg.disclosure}"
    )
    print(f"seller {args.seller} vs buyers {args.buyers}")
    kinds = [
        ("agent" if a else "human") + (" (disclosed)" if d else "")
        for a, d in zip(market.instance.is_agent, market.disclosed, strict=True)
    ]
    print("buyers: " + ", ".join(f"{i} {k}" for i, k in enumerate(kinds)) + "\n")
    print_transcript(r.to_dict() for r in market.transcript)
    met = market_metrics(market)
    bench = seller_benchmarks(instance)
    f = number
    print()
    rows = [
        ["seller profit", f(met["profit"]), "W*_T (full-information bound)",
         f(bench["w_star"]), ""],
        ["seller revenue", f(met["revenue"]), "highest Walrasian", f(bench["walrasian_high"]),
         f(bench["walrasian_high_revenue"])],
        ["buyer surplus", f(met["buyer_surplus"]), "lowest Walrasian", f(bench["walrasian_low"]),
         f(bench["walrasian_low_revenue"])],
        ["welfare", f(met["welfare"]), "VCG", f(bench["vcg"]), f(bench["vcg_revenue"])],
        ["efficiency", f(met["efficiency"], 3), "", "", ""],
        ["capture", f(met["capture"], 3), "", "", ""],
        ["trades / turns", f"{met['trades']:.0f} / {met['turns_used']:.0f}", "", "", ""],
        ["violations (seller, buyer)",
         f"{met['seller_violations']:.0f}, {met['buyer_violations']:.0f}", "", "", ""],
    ]  # fmt: skip
    print(
        tabulate(
            rows, headers=["outcome", "", "oracle", "profit", "revenue"], disable_numparse=True
        )
    )
    if args.html:
        from tournaments.html_report import write_play_html

        turns = [r.to_dict() for r in market.transcript]
        page = write_play_html(args.html, market.instance, turns, args.seller, args.buyers)
        print(f"\ntranscript viewer: {page}")
    return 0


def cmd_agents(args: argparse.Namespace) -> int:
    from agents import registry

    own_agents.load_all(args.agents)
    rows = [
        {
            "name": e.name,
            "side": e.side,
            "kind": e.kind,
            "disclosed": e.disclosed,
            "reference": e.reference,
            "params": e.all_params,
            "description": e.description,
        }
        for e in registry.entries(args.side)
    ]
    if args.json:
        print(json.dumps(json_safe(_plain(rows)), default=str))
        return 0
    table = [
        [
            r["name"],
            r["side"],
            r["kind"] + (" (reference)" if r["reference"] else ""),
            ", ".join(f"{k}={v}" for k, v in r["params"].items()),
            r["description"],
        ]
        for r in rows
    ]
    print(
        tabulate(
            table,
            headers=["name", "side", "kind", "params", "description"],
            maxcolwidths=[None, None, None, 30, 60],
        )
    )
    return 0


def _plain(x):
    """``x`` with NumPy scalars and arrays as Python numbers and lists: an entry's
    parameters may hold them (``np.int64(7)``), which ``json.dumps`` cannot write. Any
    other object a parameter holds is written as its text (``default=str``)."""
    import numpy as np  # here: the commands that need no policy start without it

    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if isinstance(x, np.generic | np.ndarray):
        return _plain(x.tolist())
    return x


def cmd_eval(args: argparse.Namespace) -> int:
    from agents.evaluate import play_markets, summarize
    from agents.torch_threads import one_torch_thread

    own_agents.load_all(args.agents)
    cfg = _market_config(args.market, args.disclosure)
    seller, buyer = _matchup(args)
    _check_kinds(args.buyers, buyer, cfg)
    # Played in batches that fit a unit's memory (arena.limits), whatever --markets is.
    chunk = min(1024, limits.unit_markets([(_label(args.market), cfg)], 0))
    with one_torch_thread():
        metrics = play_markets(cfg, args.seed, range(args.markets), seller, buyer, chunk=chunk)
    summary = summarize(metrics, EVAL_METRICS)
    rows = [
        [
            name,
            number(summary[name], 3),
            f"[{number(summary[name + '_ci'][0], 3)}, {number(summary[name + '_ci'][1], 3)}]",
        ]
        for name in EVAL_METRICS
    ]
    print(
        f"{args.seller} vs {args.buyers}: {plural(args.markets, 'market')}, seed {args.seed}, "
        f"disclosure {cfg.disclosure}" + (", sampled policies" if args.sample else "")
    )
    print(tabulate(rows, headers=["metric", "mean", "95% CI"], disable_numparse=True))
    if args.json:
        out = {
            "seller": args.seller,
            "buyers": args.buyers,
            "markets": args.markets,
            "seed": args.seed,
            "sample": args.sample,
            "market": cfg.to_dict(),
            **summary,
        }
        print(json.dumps(json_safe(out)))
    return 0


def _matchup_args(p: argparse.ArgumentParser) -> None:
    """The flags that name one seller, one buyer side and one market config."""
    p.add_argument(
        "--seller",
        default="posted_price",
        help="seller entry (see: arena agents; one of your own: --agents)",
    )
    p.add_argument("--buyers", default="truthful", help="buyer entry or population")
    p.add_argument(
        "--market",
        type=nonempty,
        metavar="FILE.toml",
        help="a TOML file with a [market] table, or SPEC.toml:NAME for a spec's [configs.NAME]",
    )
    p.add_argument("--disclosure", choices=DISCLOSURE_RULES, help="override the disclosure rule")
    p.add_argument(
        "--sample",
        action="store_true",
        help="RL entries play their sampled (training) policy, not the greedy one",
    )
    own_agents.add_flag(p)


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("play", help="play one market and print its transcript and outcome")
    _matchup_args(p)
    p.add_argument("--seed", type=nonneg_int, default=0, help="root seed")
    p.add_argument("--index", type=market_index, default=0, help="market index under the seed")
    p.add_argument(
        "--html",
        type=output_file(".html"),
        metavar="FILE.html",
        help="also write the transcript viewer to FILE.html",
    )
    p.set_defaults(func=cmd_play)

    p = sub.add_parser("agents", help="list the registered sellers and buyers")
    p.add_argument("--side", choices=("seller", "buyer"), help="only one side")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    own_agents.add_flag(p)
    p.set_defaults(func=cmd_agents)

    p = sub.add_parser("eval", help="mean metrics with 95%% CIs over many markets")
    _matchup_args(p)
    p.add_argument(
        "--markets",
        type=at_most(limits.MAX_MARKETS_PER_MATCH, "markets"),
        default=1000,
        help="number of markets",
    )
    p.add_argument("--seed", type=nonneg_int, default=0, help="root seed")
    p.add_argument("--json", action="store_true", help="last line: one JSON object")
    p.set_defaults(func=cmd_eval)
