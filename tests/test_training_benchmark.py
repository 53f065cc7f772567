"""benchmarks/training.py: it measures the checkpoint it is given, and refuses others."""

from __future__ import annotations

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
    for key in ("rl_seller_greedy_turns_per_s", "rollout_turns_per_s", "update_samples_per_s"):
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
