"""benchmarks/training.py: it measures the checkpoint it is given, and refuses others."""

from __future__ import annotations

import json

import pytest
import torch

from agents.rl import checkpoint
from agents.rl.policies import RLBuyer, RLSeller


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("training")


@pytest.fixture(autouse=True)
def _threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_a_given_seller_checkpoint_is_the_one_measured(bench, tmp_path, capsys):
    torch.manual_seed(0)
    checkpoint.save(tmp_path / "wide", RLSeller(hidden=24), name="wide")
    out = bench.main(["--seller", str(tmp_path / "wide"), "--markets", "64", "--repeats", "1",
                      "--threads", "1"])  # fmt: skip
    assert out["seller_weights"] == str(tmp_path / "wide") and out["seller_hidden"] == 24
    for key in (
        "rl_seller_greedy_turns_per_s",
        "assignment_matcher_turns_per_s",
        "rollout_turns_per_s",
        "update_samples_per_s",
    ):
        assert out[key] > 0
    capsys.readouterr()


def test_a_bad_seller_is_one_error_line_and_exit_2(bench, tmp_path, capsys):
    checkpoint.save(tmp_path / "buyer", RLBuyer(hidden=8), name="buyer")
    for bad in (tmp_path / "missing", tmp_path / "buyer"):
        with pytest.raises(SystemExit) as exit_:
            bench.main(["--seller", str(bad), "--markets", "8", "--repeats", "1"])
        assert exit_.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("benchmarks/training.py: error:")


def test_a_staged_seller_counts_its_own_run_and_the_longest_stage_before_it(
    bench, tmp_path, monkeypatch
):
    def run(name, wall, **training):
        (tmp_path / name).mkdir()
        (tmp_path / name / "curve.csv").write_text(f"iteration,wall_s\n0,0\n5,{wall}\n")
        (tmp_path / name / "config.json").write_text(json.dumps({"training": training}))
        return tmp_path / name

    monkeypatch.setattr(bench, "CONFIGS", tmp_path / "configs")
    run("joint", 100.0)
    run("retail", 50.0)
    final = run("final", 10.0, init="../joint", teachers={"a": "../retail", "b": "../joint"})
    assert bench._training_wall(final) == 110.0
    assert bench._training_wall(tmp_path / "retail") == 50.0
    lost = run("lost", 10.0, teachers={"a": "../nowhere"})
    assert bench._training_wall(lost) is None
