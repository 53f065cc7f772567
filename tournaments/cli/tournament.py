"""Tournament commands: run a ``tournament``, ``report`` on a run, ``show`` a kept
transcript, ``export`` the stored rows."""

from __future__ import annotations

import argparse
import os

from tournaments.cli.common import CliError, nonneg_int, pos_int, print_transcript


def cmd_tournament(args: argparse.Namespace) -> int:
    from tournaments.runner import run_tournament
    from tournaments.spec import load_spec

    spec = load_spec(args.spec, markets=args.markets, seed=args.seed)
    out = args.out or os.path.join("runs", f"{spec.name}-seed{spec.seed}")
    print(
        f"{spec.name}: {len(spec.sellers)} sellers x {len(spec.buyers)} buyer entries x "
        f"{len(spec.disclosure)} disclosure rules x {len(spec.configs)} configs = "
        f"{len(spec.matches())} matches of {spec.markets} markets -> {out}"
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
    return _report(args.dir, full=True, html=args.html)


def _report(folder: str, full: bool, html: bool = False) -> int:
    """Analyse a run once; print every table (``full``) or the ratings only, and write the
    Markdown report with its plots into the run folder."""
    from tournaments.analysis import BACKGROUND_ELO_GAMES, COLUMNS
    from tournaments.report import analyze_run, report_text, start_elo, write_report
    from tournaments.store import ResultStore
    from tournaments.tables import format_section, sections

    store = ResultStore.open(folder)
    try:
        meta, (rows, _) = store.meta(), store.counts()
        # Elo, the longest analysis, starts in a second process before the rows are read.
        elo = None
        if rows >= BACKGROUND_ELO_GAMES and (os.cpu_count() or 1) >= 2:
            elo = start_elo(folder, meta)
        records = store.records(COLUMNS)
    finally:
        store.close()
    if records.rows == 0:
        raise CliError(f"{folder}: no results stored yet")
    analysis = analyze_run(records, meta, background=elo)
    # The report file first: its plots need no Elo, which may still be running beside.
    try:
        path = write_report(folder, records, meta, analysis=analysis)
    finally:
        if full:
            print(report_text(records, meta, analysis=analysis))
        else:
            (ratings,) = [s for s in sections(analysis) if s.key == "ratings"]
            print(format_section(ratings))
    print(f"\nreport with every table and plot: {path}  (terminal: arena report {folder})")
    if html:
        from tournaments.html_report import write_html_report

        page = write_html_report(
            folder, records, meta, analysis=analysis, transcripts=_transcripts(folder)
        )
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
    print_transcript(turns)
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


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tournament", help="run a round-robin tournament from a TOML spec")
    p.add_argument("spec", metavar="SPEC", help="tournament spec (TOML)")
    p.add_argument("--out", metavar="DIR", help="run folder (default runs/NAME-seedS)")
    p.add_argument("--workers", type=pos_int, default=2, help="match workers (default 2)")
    p.add_argument("--markets", type=pos_int, help="override markets per match")
    p.add_argument("--seed", type=nonneg_int, help="override the tournament seed")
    p.add_argument("--address", help="join an existing Ray cluster (else RAY_ADDRESS, else local)")
    p.add_argument("--no-ray", action="store_true", help="play every match in this process")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_tournament)

    p = sub.add_parser("report", help="print a run's tables and write its Markdown report")
    p.add_argument("dir", metavar="DIR", help="run folder")
    p.add_argument(
        "--html", action="store_true", help="also write DIR/report.html (tables, plots, viewer)"
    )
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("show", help="print a kept transcript of a run")
    p.add_argument("dir", metavar="DIR", help="run folder")
    p.add_argument("--match", required=True, help="match id, e.g. seller|buyer|hidden|config")
    p.add_argument("--market", type=nonneg_int, default=0, help="market index")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("export", help="export a run's market rows to CSV or JSON")
    p.add_argument("dir", metavar="DIR", help="run folder")
    p.add_argument("--to", required=True, metavar="FILE", help="FILE.csv or FILE.json")
    p.set_defaults(func=cmd_export)
