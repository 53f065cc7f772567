"""The HTML report and the transcript viewer: a self-contained page built from a small
run, the viewer's data checked against the store and the oracle, and the page itself in
a real headless browser (Debian's Chromium, which .ci/run installs)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from arena.config import MarketConfig
from arena.generator import generate
from arena.oracle import optimal_assignment, welfare_bound
from tournaments.cli import main
from tournaments.store import ResultStore

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
SPEC = """
[tournament]
name = "tiny"
markets = 40
transcripts = 2
sellers = ["posted_price", "greedy_matcher"]
buyers = ["truthful", "mixed"]
disclosure = ["hidden", "mandatory"]
reference = "posted_price"
[populations]
mixed = "human=noisy_human,agent=strategic"
[configs.m]
buyers = 5
agent_share = 0.4
"""
MATCH = "greedy_matcher|mixed|mandatory|m"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A small run (no Ray) and its HTML report, written by the command line."""
    root = tmp_path_factory.mktemp("html")
    spec = root / "tiny.toml"
    spec.write_text(SPEC)
    out = root / "run"
    assert main(["tournament", str(spec), "--out", str(out), "--no-ray", "--quiet"]) == 0
    assert main(["report", str(out), "--html"]) == 0
    return out


def _data(page: Path) -> dict:
    text = page.read_text()
    block = re.search(r'<script type="application/json" id="arena-data">(.*?)</script>', text, re.S)
    return json.loads(block.group(1))


def test_the_page_is_self_contained_and_reproducible(run):
    page = run / "report.html"
    text = page.read_text()
    # Nothing is fetched at view time: no external script, style, image or font.
    assert not re.search(r'(src|href)="(https?:)?//', text)
    assert "@import" not in text and "url(http" not in text
    assert text.count('<table class="sortable"') >= 8  # run, ratings, leaderboards, split ...
    assert text.count('src="data:image/png;base64,') >= 2  # the report's plots, embedded
    first = page.read_bytes()
    assert main(["report", str(run), "--html"]) == 0
    assert page.read_bytes() == first  # the same run gives the same bytes


def test_viewer_data_holds_every_kept_transcript_with_its_oracle(run):
    data = _data(run / "report.html")["viewer"]
    store = ResultStore.open(run)
    try:
        keys = store.transcript_keys()
        assert len(data["markets"]) == len(keys) == 8 * 2
        for match_id, k in keys:
            market = data["markets"][f"{match_id}#{k}"]
            assert market["turns"] == store.transcript(match_id, k)
            assert market["replayed"]  # the messages replay to the recorded outcome
            assert len(market["states"]) == len(market["turns"])
    finally:
        store.close()
    cfg = MarketConfig(buyers=5, agent_share=0.4, disclosure="mandatory")
    inst = generate(cfg, 0, 1)
    oracle = data["oracle"]["m#1"]
    assert oracle["w_star"] == pytest.approx(
        welfare_bound(inst.values, inst.costs, inst.inventory, cfg.turns), abs=1e-4
    )
    pairs = optimal_assignment(inst.values, inst.costs, inst.inventory, max_trades=cfg.turns)
    assert [(a["buyer"], a["product"]) for a in oracle["assignment"]] == pairs
    # The last state's profit is the stored profit of that market.
    market = data["markets"][f"{MATCH}#1"]
    trades = [r["trade"] for r in market["turns"] if r["trade"]]
    profit = sum(t["price"] - inst.costs[t["product"]] for t in trades)
    assert market["states"][-1]["profit"] == pytest.approx(profit, abs=1e-4)


def test_play_writes_the_viewer_for_one_market(tmp_path, capsys):
    page = tmp_path / "play.html"
    assert (
        main(["play", "--seller", "greedy_matcher", "--buyers", "haggler", "--html", str(page)])
        == 0
    )
    assert "transcript viewer:" in capsys.readouterr().out
    data = _data(page)["viewer"]
    (market,) = data["markets"].values()
    assert market["replayed"] and market["turns"][0]["turn"] == 1


# ---------------------------------------------------------------------- in a browser
def _browser() -> str:
    found = os.environ.get("ARENA_BROWSER") or next(
        (
            shutil.which(b)
            for b in ("chromium", "chromium-browser", "google-chrome")
            if shutil.which(b)
        ),
        None,
    )
    if not found:
        reason = os.environ.get("ARENA_BROWSER_UNAVAILABLE") or (
            "no Chromium on this machine (.ci/run installs Debian's chromium)"
        )
        pytest.skip(f"browser test skipped: {reason}")
    return found


def _chromium(*args: str) -> subprocess.CompletedProcess:
    cmd = [
        _browser(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--enable-logging=stderr",
        "--v=0",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def _console_errors(stderr: str) -> list[str]:
    """What the page wrote to its console. Chromium logs every console message as CONSOLE
    without its level, and these pages write none, so any such line is a failure (an
    uncaught exception, a console.error)."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def _url(page: Path, **params: str) -> str:
    from urllib.parse import urlencode

    return page.resolve().as_uri() + ("?" + urlencode(params) if params else "")


def test_the_page_runs_in_a_browser_and_the_viewer_shows_the_chosen_turns(run):
    page = run / "report.html"
    data = _data(page)["viewer"]
    turns = data["markets"][f"{MATCH}#1"]["turns"]
    shown = min(3, len(turns))
    proc = _chromium(
        "--dump-dom", _url(page, tab="viewer", match=MATCH, market="1", turn=str(shown))
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert 'data-ready="1"' in dom  # the script ran to its end
    assert not _console_errors(proc.stderr), _console_errors(proc.stderr)
    errors = re.search(r'<pre id="errors"[^>]*>(.*?)</pre>', dom, re.S)
    assert errors and errors.group(1).strip() == "", errors.group(1)
    assert re.search(
        rf'id="viewer"[^>]*data-match="{re.escape(MATCH)}"[^>]*data-market="1"[^>]*'
        rf'data-turn="{shown}"',
        dom,
    )
    blocks = re.findall(r'<div class="turn( current)?" data-turn="(\d+)">', dom)
    assert [int(t) for _, t in blocks] == list(range(1, shown + 1))  # turns 1..shown only
    assert blocks[-1][0] == " current"
    last = turns[shown - 1]
    assert _html(last["seller_text"]) in dom
    if last["buyer"] >= 0:
        assert _html(last["buyer_text"]) in dom
    assert f"After turn {shown}" in dom and "W*_T" in dom
    # A table sorted from the URL: ratings by player name, descending.
    proc = _chromium("--dump-dom", _url(page, sort="table-ratings:1:desc"))
    body = re.search(r'id="table-ratings".*?<tbody>(.*?)</tbody>', proc.stdout, re.S).group(1)
    players = re.findall(r"<tr[^>]*><td>[^<]*</td><td>([^<]*)</td>", body)
    assert players == sorted(players, reverse=True) and len(players) == 4
    # A screenshot of the viewer, kept as an artifact of the test run.
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "viewer.png"
    shot.unlink(missing_ok=True)
    proc = _chromium(
        "--hide-scrollbars",
        "--window-size=1400,1000",
        f"--screenshot={shot}",
        _url(page, tab="viewer", match=MATCH, market="1", turn=str(shown)),
    )
    assert proc.returncode == 0 and shot.stat().st_size > 10_000


def test_the_address_follows_the_tab_shown_and_bad_link_parameters_are_ignored(run, tmp_path):
    """The address said tab=viewer while the tables were shown, so a reload opened the
    viewer; a sort column the table lacks stopped the whole script, and turn=abc showed
    "turn NaN"."""
    text = (run / "report.html").read_text()
    marked = tmp_path / "report.html"  # the page, with the address it ends at written out
    tail = "<script>document.body.dataset.url = location.search;</script></body>"
    marked.write_text(text.replace("</body>", tail))

    def address(dom: str) -> str:
        return re.search(r'data-url="([^"]*)"', dom).group(1).replace("&amp;", "&")

    proc = _chromium("--dump-dom", _url(marked))
    assert 'data-ready="1"' in proc.stdout and not _console_errors(proc.stderr)
    assert "tab=tables" in address(proc.stdout) and "tab=viewer" not in address(proc.stdout)
    proc = _chromium("--dump-dom", _url(marked, tab="viewer"))
    assert "tab=viewer" in address(proc.stdout)
    proc = _chromium("--dump-dom", _url(marked, sort="table-ratings:9", turn="abc", tab="viewer"))
    assert 'data-ready="1"' in proc.stdout and not _console_errors(proc.stderr)
    errors = re.search(r'<pre id="errors"[^>]*>(.*?)</pre>', proc.stdout, re.S)
    assert errors.group(1).strip() == ""
    assert re.search(r'id="viewer-position">turn 0 of \d+<', proc.stdout)


def test_the_play_page_runs_in_a_browser(tmp_path):
    page = tmp_path / "play.html"
    assert (
        main(["play", "--seller", "greedy_matcher", "--buyers", "haggler", "--html", str(page)])
        == 0
    )
    n = len(next(iter(_data(page)["viewer"]["markets"].values()))["turns"])
    proc = _chromium("--dump-dom", _url(page, turn=str(n)))
    assert 'data-ready="1"' in proc.stdout and not _console_errors(proc.stderr)
    assert len(re.findall(r'<div class="turn( current)?" data-turn=', proc.stdout)) == n
    assert "(the end)" in proc.stdout


def _html(text: str) -> str:
    import html

    return html.escape(text, quote=False)


def test_text_that_looks_like_markup_stays_data_in_the_page(tmp_path):
    """A "<!--" anywhere in the data (an agent's SAY, a config name) was written as
    "<\\!--", no JSON escape: the page's JSON.parse failed and nothing was set up."""
    from tournaments.html_report import page

    hostile = '<!-- x --> </script><script>undefinedCall()</script> "q" ü 日本'
    text = page("hostile", '<div id="viewer"></div>', {"viewer": None, "note": hostile})
    assert "<!-- x" not in text and "</script><script>undefinedCall" not in text
    marked = tmp_path / "hostile.html"
    marked.write_text(text)
    assert _data(marked)["note"] == hostile
    proc = _chromium("--dump-dom", _url(marked))
    assert 'data-ready="1"' in proc.stdout and not _console_errors(proc.stderr)


def test_the_browser_check_catches_a_script_error(tmp_path):
    """The negative control of the checks above: a page whose script fails is caught."""
    from tournaments.html_report import page

    text = page("broken", '<div id="viewer"></div>', {"viewer": None})
    broken = tmp_path / "broken.html"
    broken.write_text(text.replace("<script>/*", "<script>undefinedCall();/*", 1))
    proc = _chromium("--dump-dom", _url(broken))
    assert _console_errors(proc.stderr) and 'data-ready="1"' not in proc.stdout
