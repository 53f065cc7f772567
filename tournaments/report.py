"""Reports of a tournament run: terminal text and a Markdown file with plots.

``report_text`` is what ``arena report DIR`` prints; ``write_report`` writes
``report.md`` into the run folder with its plots next to it (``tournaments.plots``).
Both render one ``Analysis`` (``analyze_run``), computed once; the tables come from
``tournaments.tables``, and each figure is placed after the table whose key it belongs to.

Nothing time-dependent goes into the report: the same records and metadata give the
same ``report.md``, byte for byte.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabulate import tabulate

from tournaments.analysis import SCORE_COLUMNS, Analysis, analyze, elo_of_records
from tournaments.background import Background
from tournaments.effects import informative_effects
from tournaments.formatting import Section
from tournaments.records import Records
from tournaments.spec import SpecError, TournamentSpec, stored_spec
from tournaments.store import stored_agents
from tournaments.tables import format_tables, sections


@dataclass(frozen=True)
class RunInfo:
    """What a report says about the run: its spec (rebuilt from what is stored) and the
    package versions. The run's creation time is left out on purpose, so that a report
    depends on results only."""

    spec: TournamentSpec | None
    """None when the folder holds no readable spec."""
    seed: Any = "-"
    versions: dict[str, str] = field(default_factory=dict)
    agents: tuple[dict, ...] = ()
    """The modules of entries of one's own (``tournaments.store.stored_agents``)."""

    @property
    def name(self) -> str:
        return self.spec.name if self.spec else "-"

    @property
    def reference(self) -> str | None:
        return self.spec.reference if self.spec else None


def _parsed(value: Any) -> Any:
    """A meta value as stored (JSON text) or already parsed."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def run_info(meta: Mapping[str, Any]) -> RunInfo:
    """The report's view of ``ResultStore.meta()`` (values as stored JSON text or parsed)."""
    try:
        data = _parsed(meta.get("spec"))
        spec = stored_spec(data) if isinstance(data, dict) else None
    except (SpecError, TypeError, ValueError, AttributeError):
        spec = None
    versions = _parsed(meta.get("versions", {}))
    seed = spec.seed if spec else _parsed(meta.get("seed", "-"))
    return RunInfo(
        spec,
        seed,
        dict(sorted(versions.items())) if isinstance(versions, dict) else {},
        tuple(stored_agents(meta)),
    )


def _meta_rows(info: RunInfo, analysis: Analysis, seed: int) -> list[list[str]]:
    spec = info.spec
    rows = [
        ["spec", info.name],
        ["tournament seed", str(info.seed)],
        ["markets per match", str(spec.markets) if spec else "-"],
        ["sellers", ", ".join(spec.sellers) if spec else "-"],
        ["buyers", ", ".join(spec.buyers) if spec else "-"],
    ]
    rows += [[f"population {k}", v] for k, v in sorted(spec.populations if spec else ())]
    rows += [
        ["disclosure rules", ", ".join(spec.disclosure) if spec else "-"],
        ["configs", ", ".join(sorted(n for n, _ in spec.configs)) if spec else "-"],
        *(
            [
                f"entries of {Path(m['module']).name}",
                f"{', '.join(m['entries'])} ({m['module']}"
                + (f", sha256 {m['sha256'][:12]})" if m.get("sha256") else ")"),
            ]
            for m in info.agents
        ),
        [
            "rating reference",
            info.reference
            if info.reference in {r.player for r in analysis.ratings}
            else "(mean at 1000)",
        ],
        ["market rows analysed", _rows_analysed(info, analysis)],
        ["analysis seed", str(seed)],
    ]
    return rows


def planned_markets(info: RunInfo) -> int | None:
    """The market rows a run's spec plans (None without a readable spec)."""
    return info.spec.markets * len(info.spec.matches()) if info.spec else None


def incomplete(meta: Mapping[str, Any], analysed: int) -> str | None:
    """What a report of a run that stored fewer markets than its spec plans says of it
    (None when complete): a report of part of a run must not read as the whole."""
    planned = planned_markets(run_info(meta))
    if planned is None or analysed >= planned:
        return None
    return (
        f"incomplete run: {analysed:,} of {planned:,} planned markets stored; its tables "
        "cover those only (the same arena tournament command finishes it)"
    )


def _rows_analysed(info: RunInfo, analysis: Analysis) -> str:
    planned = planned_markets(info)
    if planned is None or analysis.markets >= planned:
        return str(analysis.markets)
    return f"{analysis.markets} of {planned} planned (incomplete run)"


def _reference(records: Records, meta: Mapping[str, Any]) -> str | None:
    """The spec's rating reference if it played in these records."""
    reference = run_info(meta).reference
    played = set(records.match.tolist())
    t = records.matches
    entries = {t.seller[m] for m in played} | {t.buyer[m] for m in played}
    return reference if reference in entries else None


def analyze_run(
    records: Records,
    meta: Mapping[str, Any],
    *,
    seed: int = 0,
    background: bool | Background | None = None,
) -> Analysis:
    """The analysis a report shows; compute it once and pass it to the writers.
    ``background`` is :func:`tournaments.analysis.analyze`'s (``start_elo`` gives one)."""
    rec = Records.from_columns(records)
    analysis = analyze(rec, reference=_reference(rec, meta), seed=seed, background=background)
    spec = run_info(meta).spec
    from tournaments.disclosure import disclosure_study, is_study

    if is_study(spec):
        study = disclosure_study(rec, spec, seed=seed)
        analysis = dataclasses.replace(analysis, study=study)
    return analysis


def start_elo(folder: str | Path, meta: Mapping[str, Any], *, seed: int = 0) -> Background:
    """Start the Elo of a run folder in a second process, before this one reads the
    records: Elo takes longest of all the analyses, and the second process reads only
    the columns it needs. Pass the result to :func:`analyze_run`."""
    return Background("tournaments.report:elo_of_run", str(folder), dict(meta), seed)


def elo_of_run(folder: str, meta: Mapping[str, Any], seed: int) -> tuple[int, dict[str, float]]:
    """(games, Elo ratings) of a run folder, as :func:`analyze_run` computes them."""
    from tournaments.store import ResultStore

    store = ResultStore.open(folder)
    try:
        records = store.records(SCORE_COLUMNS)
    finally:
        store.close()
    return elo_of_records(records, _reference(records, meta), seed)


def report_text(
    records: Records, meta: Mapping[str, Any], *, seed: int = 0, analysis: Analysis | None = None
) -> str:
    """Run metadata and every table, as plain text for the terminal."""
    info = run_info(meta)
    analysis = analysis or analyze_run(records, meta, seed=seed)
    head = tabulate(_meta_rows(info, analysis, seed), tablefmt="plain", disable_numparse=True)
    title = f"Tournament {info.name}"
    return f"{title}\n{'=' * len(title)}\n{head}\n\n" + format_tables(analysis)


def _md_table(headers: list[str], rows: list[list[str]]) -> str:
    if not rows:
        return "_(no rows)_"
    esc = [[c.replace("|", "\\|") for c in row] for row in rows]
    return tabulate(esc, headers=headers, tablefmt="github", disable_numparse=True)


def _figures(analysis: Analysis, stem: str) -> dict[str, tuple[str, str, Any, Any, bool]]:
    """Section key -> (file name, alt text, plot function, a function giving its rows, before
    the table), in the order to draw them."""
    from tournaments import plots

    out: dict[str, tuple[str, str, Any, Any, bool]] = {
        "conduct": (f"{stem}_surplus.png", "Surplus split per pairing",
                    plots.plot_surplus_split, lambda: analysis.split, False),
    }  # fmt: skip
    # One forest plot per rule compared with hidden, of the pairings the rule changed.
    for treat in ("mandatory", "voluntary"):
        rows, _ = informative_effects([r for r in analysis.effect if r.treatment == treat])
        suffix = "" if treat == "mandatory" else f"_{treat}"
        name = f"{stem}_disclosure{suffix}.png"
        out[f"effect:{treat}"] = (
            name, "Disclosure effect forest plot", plots.plot_disclosure_forest,
            lambda rows=rows: rows, True,
        )  # fmt: skip
    if analysis.study is not None:  # the disclosure study's forest plots, by agent share
        from tournaments.disclosure_tables import study_forest_rows

        for treat in ("mandatory", "voluntary"):
            out[f"study:effect:{treat}"] = (
                f"{stem}_study_{treat}.png", "Disclosure study forest plot",
                plots.plot_disclosure_forest,
                lambda t=treat: study_forest_rows(analysis.study, t), True,
            )  # fmt: skip
    # Last: the ratings may still be waiting for Elo from a second process.
    out["ratings"] = (f"{stem}_ratings.png", "Ratings with 95% bootstrap intervals",
                      plots.plot_ratings, lambda: analysis.ratings, False)  # fmt: skip
    return out


_STEP_NAMES = {
    "conduct": "plot: surplus split",
    "ratings": "ratings (Bradley-Terry, its bootstrap, Elo) and their plot",
}


def write_report(
    folder: str | Path,
    records: Records,
    meta: Mapping[str, Any],
    out_name: str = "report.md",
    *,
    seed: int = 0,
    analysis: Analysis | None = None,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Write the Markdown report ``folder/out_name`` and its plots; return its path.
    ``progress`` is told each step (each figure, then the Markdown file) as it starts.

    Contents: run metadata and package versions, the ratings table (sellers and buyers on
    one scale), the within-side leaderboards and paired comparisons, the surplus split and
    efficiency tables, the disclosure effect tables; plots ``STEM_ratings.png``,
    ``STEM_surplus.png`` and ``STEM_disclosure.png`` (STEM = the stem of ``out_name``) are
    saved next to it and linked. A plot without data is not drawn (a stale file of that
    name is removed).
    """
    folder = Path(folder)
    if Path(out_name).name != out_name or out_name.startswith("."):
        raise ValueError(f"out_name {out_name!r}: a file name in the folder, not a path")
    folder.mkdir(parents=True, exist_ok=True)
    step = progress or (lambda what: None)
    info = run_info(meta)
    analysis = analysis or analyze_run(records, meta, seed=seed)
    drawn: dict[str, tuple[str, str, bool]] = {}
    figures = _figures(analysis, Path(out_name).stem)
    for key, (name, alt, draw, get_rows, before) in figures.items():
        step(_STEP_NAMES.get(key, f"plot: {key.replace('effect:', 'disclosure effect, ')}"))
        path = folder / name
        rows = get_rows()
        if rows:
            draw(rows, path)
            drawn[key] = (name, alt, before)
        elif path.exists():
            path.unlink()

    step(out_name)
    lines = [f"# Tournament report: {info.name}", "", "## Run", ""]
    lines += [_md_table(["item", "value"], _meta_rows(info, analysis, seed)), ""]
    if info.versions:
        lines += ["Package versions:", ""]
        lines += [
            _md_table(["package", "version"], [[k, str(v)] for k, v in info.versions.items()])
        ]
        lines.append("")
    for sec in sections(analysis):
        lines += _md_section(sec, drawn.get(sec.key))
    path = folder / out_name
    path.write_text("\n".join(lines).rstrip() + "\n")
    return path


def _md_section(sec: Section, figure: tuple[str, str, bool] | None) -> list[str]:
    image = [f"![{figure[1]}]({figure[0]})", ""] if figure else []
    before = image if figure and figure[2] else []
    after = image if figure and not figure[2] else []
    return [f"## {sec.title}", "", sec.note, "", *before, _md_table(sec.headers, sec.rows), "",
            *after]  # fmt: skip


__all__ = [
    "RunInfo",
    "analyze_run",
    "elo_of_run",
    "report_text",
    "run_info",
    "start_elo",
    "write_report",
]
