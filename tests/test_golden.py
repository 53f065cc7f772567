"""A small tournament against committed numbers: stored rows, ratings and every analysed
figure stay the same for the same seed, whatever the code's inner layout.

The golden file holds numbers, not wording. Figures that come from bootstrap draws are kept
apart (``bootstrap``), so that a change of resampling scheme shows up as exactly that.
Regenerate (only on purpose) with ``python tests/test_golden.py``.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

GOLDEN = Path(__file__).parent / "golden" / "small_run.json"

# The old table name [markets.NAME] on purpose: spec files written before the rename still run.
SPEC = """
[tournament]
name = "golden"
seed = 5
markets = 40
sellers = ["posted_price", "greedy_matcher", "disclosure_aware"]
buyers = ["truthful", "strategic", "strategic+disclosed", "mixed"]
disclosure = ["hidden", "mandatory", "voluntary"]
reference = "posted_price"
transcripts = 1

[populations]
mixed = "human=noisy_human,agent=strategic"

[markets.retail]
buyers = 6
products = 3
turns = 8
agent_share = 0.5

[markets.wholesale]
buyers = 8
products = 4
inventory = 1
turns = 6
price_range = [100.0, 1100.0]
patience = 2
agent_share = 0.5
"""


def _key(*parts: object) -> str:
    return "|".join(str(p) for p in parts)


def _rows_digest(records) -> dict:
    """A digest of every stored row (exact) and per-column sums (to locate a difference)."""
    records = {name: np.asarray(records[name]) for name in records}
    names = list(records.keys())
    h = hashlib.sha256()
    n = len(records["market"])
    for i in range(n):
        h.update(repr(tuple(_plain(records[c][i]) for c in names)).encode())
    sums = {c: float(np.nansum(records[c])) for c in names if records[c].dtype.kind == "f"}
    return {"rows": n, "sha256": h.hexdigest(), "sums": sums}


def _plain(x):
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    return x


def figures(analysis) -> tuple[dict[str, float], dict[str, float]]:
    """(point figures, bootstrap figures) of an analysis, keyed by what they are."""
    point: dict[str, float] = {}
    boot: dict[str, float] = {}
    for r in analysis.ratings:
        point[_key("rating", r.player, "bt")] = r.bt
        point[_key("rating", r.player, "elo")] = r.elo
        point[_key("rating", r.player, "games")] = r.games
        boot[_key("rating", r.player, "lower")] = r.lower
        boot[_key("rating", r.player, "upper")] = r.upper
        boot[_key("rating", r.player, "rank")] = r.rank
    for side, board in analysis.sides.items():
        for r in board.ratings:
            point[_key(side, r.player, "rating")] = r.rating
            point[_key(side, r.player, "games")] = r.games
            boot[_key(side, r.player, "lower")] = r.lower
            boot[_key(side, r.player, "upper")] = r.upper
            boot[_key(side, r.player, "rank")] = r.rank
        for p in board.pairs:
            k = (side, p.a, p.b)
            for name in ("markets", "wins", "ties", "losses", "win_rate", "mean_diff"):
                point[_key(*k, name)] = getattr(p, name)
            boot[_key(*k, "diff_lower")] = p.diff_lower
            boot[_key(*k, "diff_upper")] = p.diff_upper
    for r in analysis.split:
        k = (r.config, r.disclosure, r.seller, r.buyer)
        point[_key(*k, "n")] = r.n
        for name, (mean, lower, upper) in r.metrics.items():
            point[_key(*k, name)] = mean
            point[_key(*k, name, "lower")] = lower
            point[_key(*k, name, "upper")] = upper
    for r in analysis.effect:
        k = (r.treatment, r.control, r.config, r.seller, r.buyer, r.metric)
        for name in ("n", "control_mean", "treatment_mean", "diff", "t_lower", "t_upper"):
            point[_key(*k, name)] = getattr(r, name)
        boot[_key(*k, "lower")] = r.lower
        boot[_key(*k, "upper")] = r.upper
    return point, boot


def golden_run(folder: Path) -> dict:
    from tournaments.report import analyze_run
    from tournaments.runner import run_tournament
    from tournaments.spec import load_spec
    from tournaments.store import ResultStore

    spec_path = folder / "golden.toml"
    spec_path.write_text(SPEC)
    run_tournament(load_spec(str(spec_path)), folder / "run", use_ray=False, progress=False)
    store = ResultStore.open(folder / "run")
    try:
        records, meta = store.records(), store.meta()
    finally:
        store.close()
    point, boot = figures(analyze_run(records, meta))
    return {"rows": _rows_digest(records), "figures": point, "bootstrap": boot}


def _same(a: float, b: float) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def _as_json(x: dict) -> dict:
    # NaN as null: the file stays plain JSON.
    return json.loads(json.dumps(x, allow_nan=True).replace("NaN", "null"))


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    return _as_json(golden_run(tmp_path_factory.mktemp("golden")))


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(GOLDEN.read_text())


def test_stored_rows_are_the_golden_ones(run, golden):
    assert run["rows"]["rows"] == golden["rows"]["rows"]
    for col, total in golden["rows"]["sums"].items():
        assert _same(run["rows"]["sums"][col], total), col
    assert run["rows"]["sha256"] == golden["rows"]["sha256"]


@pytest.mark.parametrize("part", ["figures", "bootstrap"])
def test_analysed_figures_are_the_golden_ones(run, golden, part):
    got, want = run[part], golden[part]
    assert sorted(got) == sorted(want)
    wrong = [k for k in want if not _same(got[k], want[k])]
    assert not wrong, [(k, got[k], want[k]) for k in wrong[:10]]


if __name__ == "__main__":
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    with tempfile.TemporaryDirectory() as tmp:
        data = _as_json(golden_run(Path(tmp)))
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}: {len(data['figures'])} figures, {len(data['bootstrap'])} bootstrap")
