"""Checkpoint directories as tournament entries: named by their config, carried as bytes."""

from __future__ import annotations

import shutil

import pytest
import torch

from agents.rl import checkpoint
from agents.rl.policies import RLBuyer, RLSeller
from tests.test_tournament import assert_same_records, records
from tournaments.runner import run_tournament
from tournaments.spec import SpecError, load_spec

SPEC = """
[tournament]
name = "ck"
seed = 1
markets = 30
sellers = ["greedy_matcher", "{seller}"]
buyers = ["truthful", "{buyer}", "{buyer}+disclosed", "mix"]
checkpoints = ["{buyer}"]
disclosure = ["hidden", "voluntary"]
transcripts = 1
[populations]
mix = "human=noisy_human,agent=ck_buyer"
[configs.small]
buyers = 4
products = 2
turns = 6
agent_share = 0.5
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("ck")
    torch.manual_seed(0)
    checkpoint.save(root / "ck" / "seller", RLSeller(hidden=16), name="ck_seller")
    checkpoint.save(root / "ck" / "buyer", RLBuyer(hidden=16), name="ck_buyer")
    (root / "spec.toml").write_text(SPEC.format(seller="ck/seller", buyer="ck/buyer"))
    return root


def test_checkpoint_paths_become_entries_named_by_their_config(folder):
    spec = load_spec(str(folder / "spec.toml"))
    assert spec.sellers == ("greedy_matcher", "ck_seller")
    assert spec.buyers == ("truthful", "ck_buyer", "ck_buyer+disclosed", "mix")
    assert dict(spec.checkpoints).keys() == {"ck_seller", "ck_buyer"}
    assert spec.to_dict()["tournament"]["checkpoints"] == dict(spec.checkpoints)


def test_checkpoint_entries_play_the_same_on_ray_workers_and_actors(folder, ray_session):
    spec = load_spec(str(folder / "spec.toml"))
    run_tournament(spec, folder / "local", use_ray=False, progress=False)
    run_tournament(spec, folder / "ray", workers=2, progress=False)
    hosted = load_spec(str(folder / "spec.toml"))
    hosted = type(hosted)(**{**hosted.__dict__, "hosted": ("ck_seller",)})
    run_tournament(hosted, folder / "actor", workers=2, progress=False)
    base = records(folder / "local")
    assert len(base["match_id"]) == 2 * 4 * 2 * 30
    assert_same_records(base, records(folder / "ray"))
    assert_same_records(base, records(folder / "actor"))


def test_a_moved_checkpoint_is_the_same_entry_and_a_changed_one_a_different_spec(folder):
    spec = load_spec(str(folder / "spec.toml"))
    run_tournament(spec, folder / "run", use_ray=False, progress=False)
    moved = folder / "moved"
    shutil.copytree(folder / "ck", moved / "ck")
    (moved / "spec.toml").write_text((folder / "spec.toml").read_text())
    again = run_tournament(load_spec(str(moved / "spec.toml")), folder / "run", use_ray=False,
                           progress=False)  # fmt: skip
    assert again.units_run == 0  # nothing to replay: the same spec
    torch.manual_seed(1)
    checkpoint.save(moved / "ck" / "seller", RLSeller(hidden=16), name="ck_seller")
    with pytest.raises(ValueError, match="different spec|spec"):
        run_tournament(load_spec(str(moved / "spec.toml")), folder / "run", use_ray=False,
                       progress=False)  # fmt: skip


def test_bad_checkpoint_paths_in_a_spec_are_spec_errors(folder, tmp_path):
    bad = tmp_path / "spec.toml"
    bad.write_text(SPEC.format(seller="ck/nowhere", buyer="ck/buyer"))
    with pytest.raises(SpecError, match="no such checkpoint"):
        load_spec(str(bad))
    shutil.copytree(folder / "ck", tmp_path / "ck")
    (tmp_path / "ck" / "seller" / "config.json").write_text("{")
    bad.write_text(SPEC.format(seller="ck/seller", buyer="ck/buyer"))
    with pytest.raises(SpecError, match="not valid JSON"):
        load_spec(str(bad))


def test_a_worker_reads_each_checkpoints_weights_once_whatever_it_plays(folder, monkeypatch):
    """Every match of the spec in small units, on one worker: the checkpoints' networks are
    built once each (the seller, and the buyer shared by its variants and the population)."""
    from tournaments.worker import MatchWorker, plan_units

    built = []
    real = checkpoint.load_tensors
    monkeypatch.setattr(checkpoint, "load_tensors", lambda raw: built.append(1) or real(raw))
    monkeypatch.setattr(checkpoint, "_SHARED", {})
    spec = load_spec(str(folder / "spec.toml"))
    worker = MatchWorker(spec)
    units = list(plan_units(spec, unit_markets=10))
    for unit in units:
        worker.play(unit)
    assert len(units) == 3 * len(spec.matches()) and len(built) == 2
