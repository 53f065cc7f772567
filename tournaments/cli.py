"""The ``arena`` command line.

Every command turns bad input (unknown names, malformed files, impossible
parameters) into one ``arena: error: ...`` line and exit code 2; nothing here
prints a traceback for a user's mistake.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sqlite3
import sys

from tabulate import tabulate

from agents import registry
from agents.evaluate import play_markets, summarize
from agents.rollout import play_reference
from arena.config import DISCLOSURE_RULES, MarketConfig, load_market_file
from arena.generator import generate
from arena.metrics import market_metrics, seller_benchmarks


class CliError(Exception):
    """A user error: printed as one line, exit code 2."""


def _market_config(path: str | None, disclosure: str | None) -> MarketConfig:
    cfg = MarketConfig() if path is None else load_market_file(path)
    if disclosure is not None:
        cfg = dataclasses.replace(cfg, disclosure=disclosure)
    return cfg


def cmd_play(args: argparse.Namespace) -> int:
    cfg = _market_config(args.market, args.disclosure)
    seller = registry.make(args.seller, "seller", seed=args.seed)
    buyer = registry.make_buyers(args.buyers, seed=args.seed)
    instance = generate(cfg, args.seed, args.index)
    market = play_reference(instance, seller, buyer)
    lo, hi = cfg.price_range
    print(
        f"market {args.index} (seed {args.seed}): {cfg.buyers} buyers, {cfg.products} products,"
        f" T={cfg.turns}, prices [{lo:g}, {hi:g}], disclosure {cfg.disclosure}"
    )
    print(f"seller {args.seller} vs buyers {args.buyers}")
    kinds = [
        ("agent" if a else "human") + (" (disclosed)" if d else "")
        for a, d in zip(market.instance.is_agent, market.disclosed, strict=True)
    ]
    print("buyers: " + ", ".join(f"{i} {k}" for i, k in enumerate(kinds)) + "\n")
    for rec in market.transcript:
        print(f"--- turn {rec.turn} " + "-" * 50)
        print(_indent("seller", rec.seller_text))
        if rec.seller_violation:
            print(f"  ! seller violation: {rec.seller_error}")
        if rec.buyer >= 0:
            print(_indent(f"buyer {rec.buyer}", rec.buyer_text))
            if rec.buyer_violation:
                print(f"  ! buyer violation: {rec.buyer_error}")
        if rec.trade is not None:
            t = rec.trade
            print(f"  => trade: buyer {t.buyer} buys product {t.product} at {t.price:.2f}")
        if rec.buyer_left:
            print(f"  => buyer {rec.buyer} leaves")
    met = market_metrics(market)
    bench = seller_benchmarks(instance)
    print()
    rows = [
        ["seller profit", _f(met["profit"]), "W*_T (full-information bound)",
         _f(bench["w_star_T"]), ""],
        ["seller revenue", _f(met["revenue"]), "highest Walrasian", _f(bench["walrasian_high"]),
         _f(bench["walrasian_high_revenue"])],
        ["buyer surplus", _f(met["buyer_surplus"]), "lowest Walrasian", _f(bench["walrasian_low"]),
         _f(bench["walrasian_low_revenue"])],
        ["welfare", _f(met["welfare"]), "VCG", _f(bench["vcg"]), _f(bench["vcg_revenue"])],
        ["efficiency", _f(met["efficiency"], 3), "", "", ""],
        ["capture", _f(met["capture"], 3), "", "", ""],
        ["trades / turns", f"{met['trades']:.0f} / {met['turns_used']:.0f}", "", "", ""],
        ["violations (seller, buyer)",
         f"{met['seller_violations']:.0f}, {met['buyer_violations']:.0f}", "", "", ""],
    ]  # fmt: skip
    print(
        tabulate(
            rows, headers=["outcome", "", "oracle", "profit", "revenue"], disable_numparse=True
        )
    )
    return 0


def cmd_agents(args: argparse.Namespace) -> int:
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
        print(json.dumps(rows))
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
    "mean_price",
    "turns_used",
)


def cmd_eval(args: argparse.Namespace) -> int:
    cfg = _market_config(args.market, args.disclosure)
    seller = registry.make(args.seller, "seller", seed=args.seed)
    buyer = registry.make_buyers(args.buyers, seed=args.seed)
    metrics = play_markets(cfg, args.seed, range(args.markets), seller, buyer)
    summary = summarize(metrics, EVAL_METRICS)
    rows = [
        [
            name,
            _f(summary[name], 3),
            f"[{_f(summary[name + '_ci'][0], 3)}, {_f(summary[name + '_ci'][1], 3)}]",
        ]
        for name in EVAL_METRICS
    ]
    print(
        f"{args.seller} vs {args.buyers}: {args.markets} markets, seed {args.seed}, "
        f"disclosure {cfg.disclosure}"
    )
    print(tabulate(rows, headers=["metric", "mean", "95% CI"], disable_numparse=True))
    if args.json:
        out = {
            "seller": args.seller,
            "buyers": args.buyers,
            "markets": args.markets,
            "seed": args.seed,
            "market": cfg.to_dict(),
            **summary,
        }
        print(json.dumps(_json_safe(out)))
    return 0


def _json_safe(x):
    if isinstance(x, float):
        return None if math.isnan(x) else x
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_json_safe(v) for v in x]
    return x


def cmd_tournament(args: argparse.Namespace) -> int:
    from tournaments.runner import run_tournament
    from tournaments.spec import load_spec

    spec = load_spec(args.spec, markets=args.markets, seed=args.seed)
    out = args.out or os.path.join("runs", f"{spec.name}-seed{spec.seed}")
    matches = spec.matches()
    print(
        f"{spec.name}: {len(spec.sellers)} sellers x {len(spec.buyers)} buyer entries x "
        f"{len(spec.disclosure)} disclosure rules x {len(spec.market_configs)} market configs = "
        f"{len(matches)} matches of {spec.markets} markets -> {out}"
    )
    summary = run_tournament(
        spec,
        out,
        workers=args.workers,
        address=args.address,
        use_ray=not args.no_ray,
        progress=not args.quiet,
    )
    rate = summary.markets_run / max(summary.wall_s - summary.ray_start_s, 1e-9)
    print(
        f"played {summary.units_run} of {summary.units_total} units "
        f"({summary.markets_run} markets) in {summary.wall_s:.1f} s "
        f"(Ray start-up with workers {summary.ray_start_s:.1f} s, "
        f"{rate:,.0f} markets/s after it)"
        + (f"; {summary.workers_replaced} workers replaced" if summary.workers_replaced else "")
    )
    return _report(out, full=False)


def cmd_report(args: argparse.Namespace) -> int:
    return _report(args.dir, full=True)


def _report(folder: str, full: bool) -> int:
    """Analyse a run once; print every table (``full``) or the ratings only, and write the
    Markdown report with its plots into the run folder."""
    from tournaments.analysis import format_tables
    from tournaments.report import analyze_run, report_text, write_report
    from tournaments.store import ResultStore

    store = ResultStore.open(folder)
    try:
        records, meta = store.records(), store.meta()
    finally:
        store.close()
    if len(records["match_id"]) == 0:
        raise CliError(f"{folder}: no results stored yet")
    analysis = analyze_run(records, meta)
    if full:
        print(report_text(records, meta, analysis=analysis))
    else:
        print(format_tables(analysis).split("\n\n")[0])
    path = write_report(folder, records, meta, analysis=analysis)
    print(f"\nreport with every table and plot: {path}  (terminal: arena report {folder})")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from tournaments.store import ResultStore

    store = ResultStore.open(args.dir)
    try:
        turns = store.transcript(args.match, args.market)
        if turns is None:
            keys = store.transcript_keys()
            matches = sorted({m for m, _ in keys})
            if args.match not in matches:
                hint = ", ".join(matches[:8]) + (" ..." if len(matches) > 8 else "")
                raise CliError(f"no transcripts for match {args.match!r}; matches: {hint}")
            kept = sorted(k for m, k in keys if m == args.match)
            raise CliError(
                f"no transcript of market {args.market} in {args.match}; "
                f"kept: {', '.join(map(str, kept))}"
            )
    finally:
        store.close()
    print(f"match {args.match}, market {args.market}")
    for rec in turns:
        print(f"--- turn {rec['turn']} " + "-" * 50)
        print(_indent("seller", rec["seller_text"]))
        if rec["seller_violation"] != "ok":
            print(f"  ! seller violation: {rec['seller_error']}")
        if rec["buyer"] >= 0:
            print(_indent(f"buyer {rec['buyer']}", rec["buyer_text"]))
            if rec["buyer_violation"] != "ok":
                print(f"  ! buyer violation: {rec['buyer_error']}")
        if rec["trade"]:
            t = rec["trade"]
            print(f"  => trade: buyer {t['buyer']} buys product {t['product']} at {t['price']:.2f}")
        if rec["buyer_left"]:
            print(f"  => buyer {rec['buyer']} leaves")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from tournaments.store import ResultStore

    store = ResultStore.open(args.dir)
    try:
        n = store.export_csv(args.to) if args.to.endswith(".csv") else None
        if n is None:
            if not args.to.endswith(".json"):
                raise CliError(f"export to .csv or .json, got {args.to!r}")
            n = store.export_json(args.to)
    finally:
        store.close()
    print(f"{n} market rows written to {args.to}")
    return 0


BENCHMARKS = ("engine", "tournament", "scripted")


def cmd_bench(args: argparse.Namespace) -> int:
    """Run one of the benchmark scripts of a source checkout with its own flags."""
    import runpy
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "benchmarks" / f"{args.which}.py"
    if not script.is_file():
        raise CliError(f"no {script.name} here: benchmarks run from a source checkout")
    sys.argv = [str(script), *args.rest]
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exit_:
        return int(exit_.code or 0) if not isinstance(exit_.code, str) else 2
    return 0


def _indent(who: str, text: str) -> str:
    lines = text.splitlines() or [""]
    return "\n".join(
        f"  {who:>9} | {line}" if k == 0 else f"  {'':>9} | {line}" for k, line in enumerate(lines)
    )


def _f(x: float, digits: int = 2) -> str:
    return "n/a" if math.isnan(x) else f"{x:.{digits}f}"


def _matchup_args(p: argparse.ArgumentParser) -> None:
    """The flags that name one seller, one buyer side and one market structure."""
    p.add_argument("--seller", default="posted_price", help="seller entry (see: arena agents)")
    p.add_argument("--buyers", default="truthful", help="buyer entry or population")
    p.add_argument("--market", metavar="FILE.toml", help="a TOML file with a [market] table")
    p.add_argument("--disclosure", choices=DISCLOSURE_RULES, help="override the disclosure rule")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="arena", description="Two-sided agent market arena.")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("play", help="play one market and print its transcript and outcome")
    _matchup_args(p)
    p.add_argument("--seed", type=_nonneg_int, default=0, help="root seed")
    p.add_argument("--index", type=_nonneg_int, default=0, help="market index under the seed")
    p.set_defaults(func=cmd_play)

    p = sub.add_parser("agents", help="list the registered sellers and buyers")
    p.add_argument("--side", choices=("seller", "buyer"), help="only one side")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    p.set_defaults(func=cmd_agents)

    p = sub.add_parser("eval", help="mean metrics with 95%% CIs over many markets")
    _matchup_args(p)
    p.add_argument("--markets", type=_pos_int, default=1000, help="number of markets")
    p.add_argument("--seed", type=_nonneg_int, default=0, help="root seed")
    p.add_argument("--json", action="store_true", help="last line: one JSON object")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("tournament", help="run a round-robin tournament from a TOML spec")
    p.add_argument("spec", metavar="SPEC", help="tournament spec (TOML)")
    p.add_argument("--out", metavar="DIR", help="run folder (default runs/NAME-seedS)")
    p.add_argument("--workers", type=_pos_int, default=2, help="match workers (default 2)")
    p.add_argument("--markets", type=_pos_int, help="override markets per match")
    p.add_argument("--seed", type=_nonneg_int, help="override the tournament seed")
    p.add_argument("--address", help="join an existing Ray cluster (else RAY_ADDRESS, else local)")
    p.add_argument("--no-ray", action="store_true", help="play every match in this process")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_tournament)

    p = sub.add_parser("report", help="print a run's tables and write its Markdown report")
    p.add_argument("dir", metavar="DIR", help="run folder")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("show", help="print a kept transcript of a run")
    p.add_argument("dir", metavar="DIR", help="run folder")
    p.add_argument("--match", required=True, help="match id, e.g. seller|buyer|hidden|small")
    p.add_argument("--market", type=_nonneg_int, default=0, help="market index")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("bench", help="run a benchmark (benchmarks/NAME.py) and print figures")
    p.add_argument("which", choices=BENCHMARKS, help="which benchmark")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="its own flags, e.g. --json")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("export", help="export a run's market rows to CSV or JSON")
    p.add_argument("dir", metavar="DIR", help="run folder")
    p.add_argument("--to", required=True, metavar="FILE", help="FILE.csv or FILE.json")
    p.set_defaults(func=cmd_export)
    return ap


def _pos_int(text: str) -> int:
    value = _nonneg_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError("expected a positive integer, got 0")
    return value


def _nonneg_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:  # output piped into head and the like
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keep interpreter exit quiet
        return 0
    except (CliError, ValueError, registry.UnknownEntry, OSError, sqlite3.Error) as err:
        print(f"arena: error: {err}", file=sys.stderr)
        return 2
    except RuntimeError as err:  # a run that cannot go on (TournamentError); results are kept
        print(f"arena: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("arena: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
