"""The HTML report: one self-contained ``report.html`` (nothing fetched at view time).

``write_html_report`` renders a run's analysis (``tournaments.analysis``): the run's
metadata, every table of ``tournaments.tables`` (sortable by any column), the plots of
the Markdown report embedded as PNG data, and a transcript viewer over the run's kept
transcripts: choose a match and a market and step through its messages turn by turn,
with the state after each turn (standing bids, stock, trades, profit) and the oracle
(W*_T, an optimal assignment, Walrasian and VCG profits) beside what happened
(``tournaments.viewer``). ``write_play_html`` writes the viewer alone for one market
(``arena play --html``).

The page is plain HTML with inline CSS and a vanilla script (``tournaments/static``); its
data is one JSON block. Like ``report.md``, it holds nothing time-dependent: the same
run gives the same bytes.
"""

from __future__ import annotations

import base64
import html
import json
import math
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from arena.generator import MarketInstance
from tournaments.analysis import Analysis
from tournaments.formatting import Section
from tournaments.records import Records
from tournaments.tables import sections
from tournaments.viewer import play_data, viewer_data

STATIC = Path(__file__).resolve().parent / "static"


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _finite(x: Any) -> Any:
    """NaN and infinities as null, the only way JSON can carry them."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    return x


def _json_block(data: dict) -> str:
    """JSON that is safe inside a <script> element: every ``<`` written as ``\\u003c``, so
    no ``</script`` ends it early and no ``<!--`` changes how it is parsed, and the text
    stays JSON (``<\\!--`` is no JSON escape: the page's JSON.parse failed on it)."""
    text = json.dumps(_finite(data), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c")


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], table_id: str = "") -> str:
    if not rows:
        return '<p class="note">(no rows)</p>'
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    ident = f' id="{_e(table_id)}"' if table_id else ""
    return (
        f'<table class="sortable"{ident}><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )


def _image(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img class="plot" alt="{_e(alt)}" src="data:image/png;base64,{data}">'


def table_id(key: str) -> str:
    """The HTML id of a section's table (``?sort=ID:COLUMN`` sorts it on load)."""
    return "table-" + "".join(ch if ch.isalnum() else "-" for ch in key)


def _section(sec: Section, figure: str | None, before: bool) -> str:
    parts = [f'<section class="card" id="section-{_e(table_id(sec.key)[6:])}">']
    parts.append(f"<h2>{_e(sec.title)}</h2>")
    if sec.note:
        parts.append(f'<p class="note">{_e(sec.note)}</p>')
    table = _table(sec.headers, sec.rows, table_id(sec.key))
    parts += [figure, table] if figure and before else [table, figure or ""]
    parts.append("</section>")
    return "".join(parts)


def page(title: str, body: str, data: dict, tabs: Sequence[tuple[str, str]] = ()) -> str:
    """A whole page: ``tabs`` (name, label) switch between ``<section id="tab-NAME">``
    blocks of ``body``; ``data`` is what the script reads."""
    css = (STATIC / "report.css").read_text()
    js = (STATIC / "report.js").read_text()
    nav = "".join(
        f'<button type="button" data-tab="{_e(name)}">{_e(label)}</button>' for name, label in tabs
    )
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{css}</style></head>\n"
        f"<body><header><h1>{_e(title)}</h1><nav>{nav}</nav></header>\n"
        f'<main>{body}<pre id="errors" class="hidden"></pre></main>\n'
        f'<script type="application/json" id="arena-data">{_json_block(data)}</script>\n'
        f"<script>{js}</script>\n</body></html>\n"
    )


def _viewer_section() -> str:
    return (
        '<section class="card"><h2>Transcripts</h2><p class="note">Choose a match and a '
        "market, then step through the messages (buttons, or the arrow keys). Beside them: "
        "the state after the turn shown, and the oracle: W*_T, an optimal assignment within "
        "T trades, the seller's profit at the highest Walrasian prices and under VCG. "
        'Private values are shown for reference; no side saw them.</p><div id="viewer"></div>'
        "</section>"
    )


def _figures(analysis: Analysis, folder: Path, stem: str) -> dict[str, tuple[str, bool]]:
    """Section key -> (image tag, before the table): the Markdown report's plots, read
    from ``folder`` where it drew them, else drawn here into a scratch folder."""
    from tournaments.report import _figures as figure_table

    out = {}
    with tempfile.TemporaryDirectory() as scratch:
        for key, (name, alt, draw, get_rows, before) in figure_table(analysis, stem).items():
            rows = get_rows()
            if not rows:
                continue
            path = folder / name
            if not path.is_file():
                path = Path(scratch) / name
                draw(rows, path)
            out[key] = (_image(path, alt), before)
    return out


def write_html_report(
    folder: str | Path,
    records: Records,
    meta: Mapping[str, Any],
    *,
    analysis: Analysis,
    transcripts: Iterable[tuple[str, int, list[dict]]] = (),
    seed: int = 0,
    out_name: str = "report.html",
    stem: str = "report",
) -> Path:
    """Write ``folder/out_name``; return its path. ``transcripts``: the run's kept ones,
    ``(match id, market, turns)``; the plots are those ``write_report`` drew with file
    stem ``stem`` (drawn here if absent)."""
    from tournaments.report import _meta_rows, run_info

    folder = Path(folder)
    info = run_info(meta)
    figures = _figures(analysis, folder, stem)
    run = [
        '<section class="card"><h2>Run</h2>',
        _table(["item", "value"], _meta_rows(info, analysis, seed), "table-run"),
    ]
    if info.versions:
        run += [
            "<h2>Package versions</h2>",
            _table(["package", "version"], [[k, str(v)] for k, v in info.versions.items()]),
        ]
    run.append("</section>")
    body = ['<div id="tab-tables">', *run]
    for sec in sections(analysis):
        image, before = figures.get(sec.key, (None, False))
        body.append(_section(sec, image, before))
    body.append("</div>")
    kept = list(transcripts)
    if info.spec is not None:
        matches = {m.match_id: m for m in info.spec.matches()}
        viewer = viewer_data(kept, matches, info.spec.seed)
    else:
        viewer = {"matches": [], "markets": {}, "oracle": {}}
    body += ['<div id="tab-viewer" class="hidden">', _viewer_section(), "</div>"]
    title = f"Tournament report: {info.name}"
    tabs = [("tables", "Tables and plots"), ("viewer", f"Transcripts ({len(viewer['markets'])})")]
    text = page(title, "".join(body), {"kind": "tournament", "viewer": viewer}, tabs)
    path = folder / out_name
    path.write_text(text)
    return path


def write_play_html(
    path: str | Path, instance: MarketInstance, turns: list[dict], seller: str, buyers: str
) -> Path:
    """The transcript viewer alone, for one market played by ``arena play``."""
    data = {"kind": "play", "viewer": play_data(instance, turns, seller, buyers)}
    cfg = instance.config
    title = (
        f"Market {instance.index} (seed {instance.seed}): {seller} vs {buyers}, "
        f"{cfg.buyers} buyers, {cfg.products} products, T={cfg.turns}"
    )
    path = Path(path)
    path.write_text(page(title, _viewer_section(), data))
    return path


__all__ = ["page", "table_id", "write_html_report", "write_play_html"]
