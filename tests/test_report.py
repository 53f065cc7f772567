"""Reports: the Markdown file and its plots, byte-identical text for identical results, and the
terminal text with every table."""

from __future__ import annotations

import dataclasses
import json
import struct

import numpy as np
import pytest
from test_analysis import make_records, take

from tournaments.analysis import RatingRow
from tournaments.plots import plot_disclosure_forest, plot_ratings, plot_surplus_split
from tournaments.report import report_text, run_info, write_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TITLES = (
    "Ratings",
    "Within-side leaderboard: sellers",
    "Within-side leaderboard: buyers",
    "Paired comparisons: sellers",
    "Paired comparisons: buyers",
    "Surplus split",
    "Efficiency and conduct",
    "Disclosure effect (mandatory - hidden)",
)


def make_meta(reference: str | None = "weak") -> dict[str, str]:
    """Meta as ``ResultStore.meta()`` returns it: JSON text values."""
    tournament = {
        "name": "synthetic",
        "seed": 11,
        "markets": 60,
        "sellers": ["strong", "weak"],
        "buyers": ["alpha", "beta"],
        "disclosure": ["hidden", "mandatory"],
        **({"reference": reference} if reference else {}),
    }
    spec = {"tournament": tournament, "populations": {}, "markets": {"small": {"buyers": 4}}}
    return {
        "spec": json.dumps(spec, sort_keys=True),
        "seed": "11",
        "versions": json.dumps({"numpy": "9.9.9", "python": "3.11.0"}),
        "created": "2001-02-03T04:05:06Z",
    }


@pytest.fixture(scope="module")
def records() -> dict[str, np.ndarray]:
    return make_records(n=60)


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
    return width, height


def test_write_report_files_and_contents(tmp_path, records):
    path = write_report(tmp_path, records, make_meta())
    assert path == tmp_path / "report.md"
    text = path.read_text()
    names = ("report_ratings.png", "report_surplus.png", "report_disclosure.png")
    for name in names:
        w, h = png_size(tmp_path / name)
        assert w > 300 and h > 150
        assert f"]({name})" in text
    assert b"Software" not in (tmp_path / names[0]).read_bytes()
    assert text.startswith("# Tournament report: synthetic\n")
    for title in TITLES:
        assert f"\n## {title}\n" in text
    for fragment in ("| tournament seed", "| 11 ", "| markets per match", "| 60 ", "9.9.9"):
        assert fragment in text
    assert "| rating reference     | weak" in text
    assert "2001" not in text  # no creation time, nothing time-dependent
    assert "nan" not in text


def test_report_md_is_identical_across_calls(tmp_path, records):
    a = write_report(tmp_path / "a", records, make_meta()).read_bytes()
    perm = np.random.default_rng(2).permutation(len(records["market"]))
    b = write_report(tmp_path / "b", take(records, perm), make_meta()).read_bytes()
    assert a == b
    c = write_report(tmp_path / "a", records, make_meta(), seed=1).read_bytes()
    assert c != a  # the analysis seed reaches the intervals


def test_report_without_disclosure_pairs_drops_the_forest(tmp_path, records):
    write_report(tmp_path, records, make_meta())
    assert (tmp_path / "report_disclosure.png").exists()
    hidden = take(records, np.flatnonzero(records["disclosure"] == "hidden"))
    text = write_report(tmp_path, hidden, make_meta()).read_text()
    assert not (tmp_path / "report_disclosure.png").exists()
    assert "report_disclosure.png" not in text
    assert "_(no rows)_" in text


def test_other_out_name_keeps_its_own_plots(tmp_path, records):
    path = write_report(tmp_path, records, make_meta(None), out_name="second.md")
    assert path.name == "second.md"
    assert (tmp_path / "second_ratings.png").read_bytes()[:8] == PNG_MAGIC
    assert "(mean at 1000)" in path.read_text()


def test_plot_size_grows_with_rows(tmp_path, records):
    rows = [
        RatingRow(f"p{k}", "seller" if k % 2 else "buyer", 1000.0 + k, 1000.0 + k, 990.0 + k,
                  1010.0 + k, 1, 9)
        for k in range(20)
    ]  # fmt: skip
    _, h_small = png_size(plot_ratings(rows[:3], tmp_path / "s.png"))
    _, h_big = png_size(plot_ratings(rows, tmp_path / "b.png"))
    assert h_big > 2 * h_small
    # Plots accept the analysis rows directly, NaN included.
    from tournaments.analysis import disclosure_effect, surplus_split

    split = surplus_split(records)
    split[0].metrics["buyer_surplus_agent"] = (float("nan"),) * 3
    assert png_size(plot_surplus_split(split, tmp_path / "split.png"))[1] > 0
    effect = disclosure_effect(records, rounds=50)
    effect[0] = dataclasses.replace(effect[0], diff=float("nan"))
    assert png_size(plot_disclosure_forest(effect, tmp_path / "forest.png"))[1] > 0


def test_report_text_has_every_table(records):
    text = report_text(records, make_meta())
    assert text.startswith("Tournament synthetic\n")
    for title in TITLES:
        assert f"\n{title}\n{'=' * len(title)}\n" in text
    assert "markets per match" in text and "strong" in text
    assert text == report_text(records, make_meta())


def test_run_info_reads_stored_and_parsed_meta():
    stored = run_info(make_meta())
    parsed = run_info({k: json.loads(v) if k != "created" else v for k, v in make_meta().items()})
    assert stored == parsed
    assert stored.name == "synthetic" and stored.seed == 11 and stored.spec.markets == 60
    assert [name for name, _ in stored.spec.configs] == ["small"]
    assert stored.reference == "weak"
    assert run_info({}).name == "-"
