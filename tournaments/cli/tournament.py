"""Tournament commands: run a ``tournament``, ``report`` on a run, ``show`` a kept
transcript, ``export`` the stored rows."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from arena.limits import MAX_MARKETS_PER_MATCH, MAX_WORKERS
from tournaments.cli import own_agents
from tournaments.cli.common import (
    CliError,
    Steps,
    at_most,
    market_index,
    nonempty,
    nonneg_int,
    plural,
    pos_float,
    print_transcript,
)


def cmd_tournament(args: argparse.Namespace) -> int:
    from arena import limits
    from tournaments.runner import run_tournament
    from tournaments.spec import SpecError, load_spec, spec_agents

    if args.no_ray and args.address:
        raise CliError(
            "--address joins a Ray cluster and --no-ray plays without Ray: give one of them"
        )
    if args.no_ray and args.connect_timeout is not None:
        raise CliError("--connect-timeout waits for a Ray cluster and --no-ray plays without Ray")
    # The spec's own `agents` first, then --agents: each registers entries it may name.
    named = spec_agents(args.spec)
    agents = own_agents.load_all(named, where=f"{args.spec}: tournament.agents: ")
    agents = own_agents.load_all(args.agents, before=agents)
    try:
        spec = load_spec(args.spec, markets=args.markets, seed=args.seed)
    except SpecError as err:
        if own_agents.names_unknown_entry(err):
            raise CliError(own_agents.hinted(err, [*named, *(args.agents or [])])) from None
        raise
    # What the run would need, checked before anything is printed or created.
    limits.spec_unit_markets(spec)
    if not args.no_ray and not (args.address or os.environ.get("RAY_ADDRESS")):
        limits.check_workers(args.workers, os.cpu_count() or 1)
    out = args.out or os.path.join("runs", f"{spec.name}-seed{spec.seed}")
    say = _say(args.quiet)
    say(
        f"{spec.name}: {plural(len(spec.sellers), 'seller')} x "
        f"{plural(len(spec.buyers), 'buyer entry', 'buyer entries')} x "
        f"{plural(len(spec.disclosure), 'disclosure rule')} x "
        f"{plural(len(spec.configs), 'config')} = {plural(len(spec.matches()), 'match', 'matches')}"
        f" of {plural(spec.markets, 'market')} -> {out}"
    )
    # On Ray, every worker registers the --agents entries before it plays.
    with own_agents.ship(() if args.no_ray else agents), own_agents.worker_errors():
        summary = run_tournament(
            spec,
            out,
            workers=args.workers,
            address=args.address,
            use_ray=not args.no_ray,
            progress=not args.quiet,
            connect_timeout=args.connect_timeout,  # None: the runner's default
            agents=[m.record() for m in agents],
        )
    if summary.complete_before:
        say(
            f"{out} is complete: {plural(summary.units_total, 'unit')} "
            f"({plural(summary.markets_total, 'market')}) stored already, nothing to play"
        )
    else:
        played = (
            f"played {summary.units_run:,} of {plural(summary.units_total, 'unit')} "
            f"({plural(summary.markets_run, 'market')}) in {summary.wall_s:.1f} s"
        )
        if summary.used_ray:
            rate = summary.markets_run / max(summary.wall_s - summary.ray_start_s, 1e-9)
            played += (
                f" (Ray start-up with workers {summary.ray_start_s:.1f} s, "
                f"{rate:,.0f} markets/s after it; Ray's log: {os.path.join(out, 'ray.log')})"
            )
        else:
            played += f" ({summary.markets_run / max(summary.wall_s, 1e-9):,.0f} markets/s)"
        if summary.workers_replaced:
            played += f"; {plural(summary.workers_replaced, 'worker')} replaced"
        if summary.units_retried:
            played += f"; {plural(summary.units_retried, 'unit')} played again after an error"
        say(played)
    return _report(out, full=False, quiet=args.quiet)


def cmd_report(args: argparse.Namespace) -> int:
    return _report(args.dir, full=True, quiet=args.quiet, html=args.html)


def _say(quiet: bool):
    return (lambda text: None) if quiet else print


REPORT_STEPS = 8
"""Steps ``_report`` shows: reading, the analyses, the four figures of ``write_report``
(the last waits for the ratings), report.md, the tables."""


def _report(folder: str, full: bool, quiet: bool = False, html: bool = False) -> int:
    """Analyse a run once; print every table (``full``) or the ratings only, and write the
    Markdown report with its plots into the run folder (a read-only folder gets the tables
    and a warning). Progress on stderr unless ``quiet``."""
    from tournaments.analysis import BACKGROUND_ELO_GAMES, COLUMNS
    from tournaments.formatting import format_section
    from tournaments.report import analyze_run, incomplete, report_text, start_elo, write_report
    from tournaments.store import ResultStore
    from tournaments.tables import sections

    store = ResultStore.open(folder)
    steps = Steps(REPORT_STEPS, enabled=not quiet, desc="report")
    try:
        meta, (rows, _) = store.meta(), store.counts()
        # Elo, the longest analysis, starts in a second process before the rows are read.
        elo = None
        if rows >= BACKGROUND_ELO_GAMES and (os.cpu_count() or 1) >= 2:
            elo = start_elo(folder, meta)
        steps(f"reading {plural(rows, 'market row')}")
        records = store.records(COLUMNS)
    finally:
        store.close()
    if records.rows == 0:
        steps.close()
        raise CliError(f"{folder}: no results stored yet")
    steps("leaderboards, surplus split, disclosure effect")
    analysis = analyze_run(records, meta, background=elo)
    # The report file first: its plots need no Elo, which may still be running beside.
    path, unwritten = None, None
    try:
        path = write_report(folder, records, meta, analysis=analysis, progress=steps)
    except OSError as err:
        unwritten = err
    steps("tables")
    if full:
        text = report_text(records, meta, analysis=analysis)
    else:
        (ratings,) = [s for s in sections(analysis) if s.key == "ratings"]
        text = format_section(ratings)
    steps.close()
    print(text)
    partial = incomplete(meta, records.rows)
    if partial is not None:
        import sys

        print(f"arena: warning: {folder}: {partial}", file=sys.stderr)
    if unwritten is not None:
        import sys

        reason = (unwritten.strerror or str(unwritten)).lower()
        files = "report.md, its plots and report.html" if html else "report.md and its plots"
        print(
            f"arena: warning: {folder}: could not write {files} ({reason}); "
            "the tables above are complete",
            file=sys.stderr,
        )
    elif not quiet:
        print(f"\nreport with every table and plot: {path}  (terminal: arena report {folder})")
    if html and unwritten is None:
        from tournaments.html_report import write_html_report

        page = write_html_report(
            folder, records, meta, analysis=analysis, transcripts=_transcripts(folder)
        )
        if not quiet:
            print(f"HTML report (sortable tables, plots, transcript viewer): {page}")
    return 0


def _transcripts(folder: str) -> list[tuple[str, int, list[dict]]]:
    """Every kept transcript of a run: (match id, market, turns)."""
    from tournaments.store import ResultStore

    store = ResultStore.open(folder)
    try:
        return [(m, k, store.transcript(m, k)) for m, k in store.transcript_keys()]
    finally:
        store.close()


def cmd_show(args: argparse.Namespace) -> int:
    from tournaments.store import ResultStore

    if args.match is None and args.market is not None:
        raise CliError("--market K picks a market of one match: give --match ID too")
    if args.match is not None and args.filter is not None:
        raise CliError(
            "--filter lists match ids and --match prints one transcript: give one of them"
        )
    market = 0 if args.market is None else args.market
    store = ResultStore.open(args.dir)
    try:
        keys = store.transcript_keys()
        if args.match is None:
            return _list_matches(keys, args.filter)
        turns = store.transcript(args.match, market)
        if turns is None:
            matches = sorted({m for m, _ in keys})
            if args.match not in matches:
                near = [m for m in matches if args.match in m] or matches
                hint = ", ".join(near[:8]) + (" ..." if len(near) > 8 else "")
                raise CliError(
                    f"no transcripts for match {args.match!r}; matches: {hint} "
                    f"(arena show {args.dir} lists them all)"
                )
            kept = sorted(k for m, k in keys if m == args.match)
            raise CliError(
                f"no transcript of market {market} in {args.match}; "
                f"kept: {', '.join(map(str, kept))}"
            )
        row = store.market_row(args.match, market)
    finally:
        store.close()
    print(f"match {args.match}, market {market}")
    print_transcript(turns)
    _print_outcome(turns, row)
    return 0


def _list_matches(keys: list[tuple[str, int]], text: str | None) -> int:
    """Every match id with kept transcripts (those containing ``text``), with the markets."""
    kept: dict[str, list[int]] = {}
    for match_id, market in keys:
        if text is None or text in match_id:
            kept.setdefault(match_id, []).append(market)
    if not kept:
        if not keys:
            raise CliError("this run keeps no transcripts (tournament.transcripts = 0)")
        raise CliError(f"no match id contains {text!r}")
    for match_id, markets in kept.items():
        print(f"{match_id}  markets {', '.join(map(str, markets))}")
    print(
        f"{plural(len(kept), 'match', 'matches')} with kept transcripts; "
        "arena show DIR --match ID --market K prints one"
    )
    return 0


def _print_outcome(turns: list[dict], row: dict[str, float] | None) -> None:
    """How the market ended (its stored metrics) and every violation of the transcript."""
    from collections import Counter

    from tournaments.cli.common import number

    print("=" * 60)
    if row is not None:
        print(
            f"outcome: {plural(int(row['trades']), 'trade')} in "
            f"{plural(int(row['turns_used']), 'turn')}; seller profit {number(row['profit'])}, "
            f"buyer surplus {number(row['buyer_surplus'])}, welfare {number(row['welfare'])} "
            f"of W*_T {number(row['w_star'])} (efficiency {number(row['efficiency'], 3)})"
        )
    for side in ("seller", "buyer"):
        codes = Counter(
            t[f"{side}_violation"]
            for t in turns
            if t[f"{side}_violation"] != "ok" and (side == "seller" or t["buyer"] >= 0)
        )
        detail = ", ".join(f"{code} x{n}" for code, n in sorted(codes.items()))
        print(f"{side} violations: {sum(codes.values())}" + (f" ({detail})" if detail else ""))


def cmd_export(args: argparse.Namespace) -> int:
    import sys

    from agents.lm.transcripts import to_jsonl
    from tournaments.report import incomplete
    from tournaments.store import ResultStore

    if not args.to and not args.transcripts:
        raise CliError("export what? --to FILE.csv|FILE.json and/or --transcripts FILE.jsonl")
    if args.to and not args.to.endswith((".csv", ".json")):
        raise CliError(f"--to: export to FILE.csv or FILE.json, got {args.to!r}")
    if args.transcripts and not args.transcripts.endswith(".jsonl"):
        raise CliError(f"--transcripts: write a .jsonl file, got {args.transcripts!r}")
    if args.to:
        _export_target("--to", args.to, args.dir, (".csv", ".json"))
    if args.transcripts:
        _export_target("--transcripts", args.transcripts, args.dir, (".jsonl",))
    store = ResultStore.open(args.dir)
    try:
        # Everything checked before the first file is written: a refused export writes none.
        records = _prompt_records(store) if args.transcripts else None
        if args.to:
            write = store.export_csv if args.to.endswith(".csv") else store.export_json
            n = write(args.to)
            print(f"{plural(n, 'market row')} written to {args.to}")
            partial = incomplete(store.meta(), n)
            if partial is not None:
                print(f"arena: warning: {args.dir}: {partial}", file=sys.stderr)
        if records is not None:
            to_jsonl(records, args.transcripts)
            print(
                f"{plural(len(records), 'prompt/completion record')} written to {args.transcripts}"
            )
    finally:
        store.close()
    return 0


_RUN_OWN = ("spec.json", "league.json", "round.json")
"""The JSON files a run or league folder writes for itself (the suffix rule keeps an export
off its results.sqlite)."""


def _export_target(flag: str, target: str, run_dir: str, suffixes: tuple[str, ...]) -> None:
    """Refuse an export that would write over a run's own files: through a link (to its
    results.sqlite, say) or by name (its spec.json)."""
    real = Path(os.path.realpath(target))
    if not real.name.endswith(suffixes):
        raise CliError(f"{flag}: {target} links to {real}, not a {' or '.join(suffixes)} file")
    if real.name in _RUN_OWN and real.parent == Path(os.path.realpath(run_dir)):
        raise CliError(f"{flag}: {target} is the run's own {real.name}; export to another file")


def _prompt_records(store) -> list[dict]:
    """Every kept transcript as prompt/completion records (for JSONL), both sides."""
    from agents.lm.transcripts import prompt_completion

    records = []
    for match_id, market in store.transcript_keys():
        turns = store.transcript(match_id, market) or []
        for side in ("seller", "buyer"):
            for rec in prompt_completion(turns, side, market):
                records.append({"match_id": match_id, **rec})
    if store.transcript_keys() and not records:
        raise CliError(
            "this run kept no prompts; set prompts = true in its [tournament] table to "
            "export prompt/completion records"
        )
    return records


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tournament",
        help="run a round-robin tournament from a TOML spec",
        description=(
            "Run a round-robin tournament from a TOML spec (resumable: the same command on\n"
            "the same --out goes on where it stopped). Entries of one's own: --agents FILE.py\n"
            "registers them here and, on Ray, in every worker (the file is shipped to a\n"
            "cluster joined with --address); a resumed run needs the same --agents. A spec\n"
            'may name them itself: agents = ["my_agents.py"] in its [tournament] table.'
        ),
    )
    p.add_argument("spec", metavar="SPEC", help="tournament spec (TOML)")
    own_agents.add_flag(p)
    p.add_argument(
        "--out", type=nonempty, metavar="DIR", help="run folder (default runs/NAME-seedS)"
    )
    p.add_argument(
        "--workers", type=at_most(MAX_WORKERS, "workers"), default=2, help="match workers"
    )
    p.add_argument(
        "--markets",
        type=at_most(MAX_MARKETS_PER_MATCH, "markets per match"),
        help="override markets per match",
    )
    p.add_argument("--seed", type=nonneg_int, help="override the tournament seed")
    p.add_argument(
        "--address",
        type=nonempty,
        metavar="HOST:PORT",
        help="join an existing Ray cluster (else RAY_ADDRESS, else a private local Ray)",
    )
    p.add_argument(
        "--connect-timeout",
        type=pos_float,
        metavar="S",
        help="seconds to wait for the cluster of --address before giving up (default: 30.0)",
    )
    p.add_argument("--no-ray", action="store_true", help="play every match in this process")
    p.add_argument(
        "--quiet", action="store_true", help="print only errors and the final ratings table"
    )
    p.set_defaults(func=cmd_tournament)

    p = sub.add_parser("report", help="print a run's tables and write its Markdown report")
    p.add_argument("dir", metavar="DIR", help="run folder")
    p.add_argument("--quiet", action="store_true", help="no progress, only the tables")
    p.add_argument(
        "--html", action="store_true", help="also write DIR/report.html (tables, plots, viewer)"
    )
    p.set_defaults(func=cmd_report)

    p = sub.add_parser(
        "show",
        help="list a run's kept transcripts, or print one",
        description="Without --match: the match ids with kept transcripts (--filter TEXT:\n"
        "those containing TEXT). With --match: that transcript, its outcome and violations.",
    )
    p.add_argument("dir", metavar="DIR", help="run folder")
    p.add_argument("--match", help="match id, e.g. seller|buyer|hidden|config")
    p.add_argument("--market", type=market_index, help="market index, with --match (default 0)")
    p.add_argument("--filter", metavar="TEXT", help="list only match ids containing TEXT")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser(
        "export", help="export a run's market rows (CSV, JSON) or its transcripts (JSONL)"
    )
    p.add_argument("dir", metavar="DIR", help="run folder")
    p.add_argument(
        "--to", type=nonempty, metavar="FILE", help="FILE.csv or FILE.json: every market row"
    )
    p.add_argument(
        "--transcripts",
        type=nonempty,
        metavar="FILE.jsonl",
        help="kept transcripts as prompt/completion records (a run with prompts = true)",
    )
    p.set_defaults(func=cmd_export)
