"""Checkpoint directories as tournament entries: named by their config, carried as bytes."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import warnings

import pytest
import torch
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from agents import registry
from agents.rl import checkpoint
from agents.rl.policies import RLBuyer, RLSeller
from tests.test_tournament import assert_same_records, records
from tournaments.runner import run_tournament
from tournaments.spec import SpecError, load_spec
from tournaments.store import StoreError

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


def test_a_moved_checkpoint_is_the_same_entry_and_a_changed_one_a_different_spec(
    folder, monkeypatch
):
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
    # This process registered ck_seller with the old weights: the changed one may not take
    # its name.
    taken = f"checkpoint {moved / 'ck' / 'seller'} is named 'ck_seller', which another entry"
    with pytest.raises(SpecError, match=re.escape(taken)):
        load_spec(str(moved / "spec.toml"))
    # A fresh process (a fresh registry) reads the changed spec, which the store refuses.
    fresh = {k: v for k, v in registry._ENTRIES.items() if not k.startswith("ck_seller")}
    monkeypatch.setattr(registry, "_ENTRIES", fresh)
    changed = load_spec(str(moved / "spec.toml"))
    other = (
        f"{folder / 'run'} holds results of a different spec (differs in "
        "tournament.checkpoints); rerun with the same spec, seed and --markets, or choose "
        "another --out"
    )
    with pytest.raises(StoreError, match=re.escape(other)):
        run_tournament(changed, folder / "run", use_ray=False, progress=False)


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


# ---------------------------------------------------------------------- identity and checks
SHIPPED = ("rl_seller", "rl_buyer")
SHIPPED_SPEC = """
[tournament]
name = "shipped"
sellers = ["./rl_seller"]
buyers = ["./rl_buyer+disclosed"]
[configs.small]
buyers = 2
products = 2
"""


def _copy(name: str, to) -> None:
    """The shipped checkpoint ``name``'s two files in folder ``to``."""
    to.mkdir(parents=True)
    for file in (checkpoint.CONFIG, checkpoint.WEIGHTS):
        shutil.copy(registry.SHIPPED / name / file, to / file)


def _edit(folder, change=None, tensors=None) -> None:
    """Apply ``change`` to the config.json of ``folder`` and ``tensors`` to its weights
    (their hash rewritten, so that only the edit is wrong)."""
    path = folder / checkpoint.CONFIG
    meta = json.loads(path.read_text())
    if change is not None:
        change(meta)
    if tensors is not None:
        state = load_tensors((folder / checkpoint.WEIGHTS).read_bytes())
        tensors(state)
        raw = save_tensors(state)
        (folder / checkpoint.WEIGHTS).write_bytes(raw)
        meta["provenance"]["weights_sha256"] = hashlib.sha256(raw).hexdigest()
    path.write_text(json.dumps(meta))


def test_the_shipped_checkpoints_pass_the_checks_and_keep_their_identity(tmp_path):
    """Every shipped checkpoint reads; a copy of the shipped seller and buyer, even with its
    JSON rewritten and its provenance and training record changed, is the registered entry
    itself, and a spec naming it records its weights hash as before."""
    for folder in sorted(registry.SHIPPED.glob("**/config.json")):
        checkpoint.read_checkpoint(folder.parent)
    for name in SHIPPED:
        data = checkpoint.read_checkpoint(registry.SHIPPED / name)
        meta = data.meta()
        assert data.weights_sha256 == meta["provenance"]["weights_sha256"]
        _copy(name, tmp_path / name)

        def redo(m):
            m["training"] = {}
            m["provenance"]["created"] = "2000-01-01T00:00:00+00:00"

        _edit(tmp_path / name, redo)
        copy = checkpoint.read_checkpoint(tmp_path / name)
        assert copy.config != data.config and copy.identity == data.identity
        assert registry.register_checkpoint(copy) is registry.get(name)
    spec = tmp_path / "spec.toml"
    spec.write_text(SHIPPED_SPEC)
    assert load_spec(str(spec)).checkpoints == (
        ("rl_buyer", checkpoint.read_checkpoint(tmp_path / "rl_buyer").weights_sha256),
        ("rl_seller", checkpoint.read_checkpoint(tmp_path / "rl_seller").weights_sha256),
    )
    # What the trainer writes reads back, every option on.
    torch.manual_seed(0)
    seller = RLSeller(hidden=8, signal_prior=0.25, assignment=True, within_plan=True)
    buyer = RLBuyer(hidden=8, disclosure_head=True, bid_to_offer=True)
    for policy, name in ((seller, "s"), (buyer, "b")):
        checkpoint.read_checkpoint(checkpoint.save(tmp_path / name, policy, name=name))


@pytest.mark.parametrize("shipped", [True, False])
def test_a_checkpoint_with_an_entrys_name_and_weights_but_another_config_is_refused(
    tmp_path, folder, shipped
):
    """Same name, same weights, other policy params: another policy, so not the entry of
    that name (which it would silently play), but a name clash, as with other weights."""
    if shipped:
        name = "rl_seller"
        _copy(name, tmp_path / "tweaked")
    else:
        name = "ck_twin_seller"
        checkpoint.save(tmp_path / "first", RLSeller(hidden=16), name=name)
        registry.register_checkpoint(checkpoint.read_checkpoint(tmp_path / "first"))
        shutil.copytree(tmp_path / "first", tmp_path / "tweaked")

    def tweak(m):
        m["policy"]["params"]["markups"] = [0.05, 0.1, 0.15, 0.2, 0.25]

    _edit(tmp_path / "tweaked", tweak)
    data = checkpoint.read_checkpoint(tmp_path / "tweaked")
    assert data.weights_sha256 == registry_data(name).weights_sha256
    with pytest.raises(ValueError, match=f"named '{name}', which another entry already uses"):
        registry.register_checkpoint(data)
    assert registry.get(name).source.split("#")[0] != str(tmp_path / "tweaked")  # as it was
    assert data.identity != registry_data(name).identity
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.format(seller="./tweaked", buyer=f"{folder}/ck/buyer"))
    with pytest.raises(SpecError, match="already uses"):
        load_spec(str(spec))


def test_two_checkpoints_of_one_name_and_weights_but_other_configs_are_a_spec_error(tmp_path):
    """In one spec, two paths whose checkpoints share a name and weights but not their
    policy params are two players under one name: refused, not the last one played."""
    name = "ck_spec_twin_seller"
    checkpoint.save(tmp_path / "a", RLSeller(hidden=16), name=name)
    shutil.copytree(tmp_path / "a", tmp_path / "b")

    def tweak(m):
        params = m["policy"]["params"]
        params["markups"] = [x + 0.01 for x in params["markups"]]

    _edit(tmp_path / "b", tweak)
    spec = tmp_path / "spec.toml"
    spec.write_text(
        '[tournament]\nname = "twins"\nsellers = ["./a"]\nbuyers = ["truthful"]\n'
        'checkpoints = ["./b"]\n[configs.small]\nbuyers = 2\nproducts = 2\n'
    )
    with pytest.raises(SpecError, match=f"two different checkpoints are named '{name}'"):
        load_spec(str(spec))


def registry_data(name: str) -> checkpoint.CheckpointData:
    """The checkpoint bytes the registered entry ``name`` plays."""
    source = registry.get(name).source
    return checkpoint.read_checkpoint(source.split("#")[0])


def _nan(state):
    for v in state.values():
        v.fill_(float("nan"))


BAD = [
    # (checkpoint, what to change, words of the error)
    ("rl_seller", lambda m: m["policy"]["net"].update(hidden=0), "hidden"),
    ("rl_seller", lambda m: m["policy"]["net"].update(hidden=-3), "hidden"),
    ("rl_seller", lambda m: m["policy"]["net"].update(levels=-3), "levels"),
    ("rl_seller", lambda m: m["policy"]["net"].update(depth=2), "policy.net: unknown depth"),
    ("rl_seller", lambda m: m["policy"]["net"].pop("levels"), "policy.net: missing levels"),
    ("rl_seller", lambda m: m["policy"]["net"].update(features="abcd"), "features"),
    ("rl_seller", lambda m: m["policy"]["net"].update(film="yes"), "film"),
    ("rl_buyer", lambda m: m["policy"]["net"].update(disclosure=-1), "disclosure"),
    ("rl_seller", lambda m: m["policy"].update(kind="robot"), "policy.kind"),
    ("rl_seller", lambda m: m["policy"].update(kind=5), "policy.kind"),
    ("rl_buyer", lambda m: m["policy"].update(kind="human"), "policy.kind"),
    ("rl_buyer", lambda m: m["policy"]["params"].update(shares=[5.0] * 13), "shares"),
    ("rl_buyer", lambda m: m["policy"]["params"].update(shares=[float("nan")] * 13), "shares"),
    ("rl_buyer", lambda m: m["policy"]["params"].update(shares=[-0.1] * 13), "shares"),
    ("rl_seller", lambda m: m["policy"]["params"].update(offsets=[float("nan")] * 12), "offsets"),
    ("rl_seller", lambda m: m["policy"]["params"].update(offsets=[1e300] * 12), "offsets"),
    ("rl_seller", lambda m: m["policy"]["params"].update(offsets="abcdefghijkl"), "offsets"),
    ("rl_seller", lambda m: m["policy"]["params"].update(markups=[True] * 5), "markups"),
    ("rl_seller", lambda m: m["policy"]["params"].update(signal_prior=float("inf")), "prior"),
    ("rl_seller", lambda m: m["policy"]["net"].update(hidden=32), "weights do not fit"),
]


@pytest.mark.parametrize(("name", "change", "words"), BAD)
def test_a_bad_checkpoint_config_is_one_error_when_read(tmp_path, name, change, words):
    """Each is refused when the checkpoint is read (before any network is built), in one
    line naming the file and the field, with no warning from torch on the way."""
    _copy(name, tmp_path / "ck")
    _edit(tmp_path / "ck", change)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(checkpoint.CheckpointError, match=re.escape(words)) as err:
            checkpoint.read_checkpoint(tmp_path / "ck")
    assert str(tmp_path / "ck") in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "tensors",
    [_nan, lambda s: s["pair_head.bias"].fill_(float("inf"))],
    ids=["nan", "inf"],
)
def test_weights_that_are_not_finite_are_refused(tmp_path, tensors):
    _copy("rl_seller", tmp_path / "ck")
    _edit(tmp_path / "ck", tensors=tensors)
    with pytest.raises(checkpoint.CheckpointError, match="NaN or infinite") as err:
        checkpoint.read_checkpoint(tmp_path / "ck")
    assert f"{tmp_path / 'ck'}/model.safetensors" in str(err.value)
    data = checkpoint.CheckpointData(  # bytes that skipped the read's checks
        str(tmp_path / "ck"),
        (tmp_path / "ck" / "config.json").read_bytes(),
        (tmp_path / "ck" / "model.safetensors").read_bytes(),
    )
    with pytest.raises(checkpoint.CheckpointError, match="NaN or infinite"):
        checkpoint.build(data)


@pytest.mark.parametrize(
    "call",
    [
        lambda: registry.get(None),
        lambda: registry.get(""),
        lambda: registry.get(5, "seller"),
        lambda: registry.make_buyers(None),
        lambda: registry.make_buyers(""),
        lambda: registry.get("x" * 10_000),
        lambda: registry.get("a/" + "x" * 10_000),
        lambda: registry.make("descending_offers", "seller", start="x"),
        lambda: registry.make("rl_seller", "seller", greedy="no"),
    ],
    ids=["none", "empty", "int", "buyers-none", "buyers-empty", "long", "long-path", "str", "flag"],
)
def test_bad_names_and_parameters_are_clear_registry_errors(call):
    with pytest.raises((registry.UnknownEntry, ValueError)) as err:
        call()
    text = str(err.value)
    assert "\n" not in text and len(text) < 2000 and "config.json" not in text
    assert any(w in text for w in ("entry", "cannot read", "start", "greedy")), text


@pytest.mark.parametrize("flag", ["--seller", "--buyers"])
def test_an_empty_name_on_the_command_line_is_not_the_current_directory(capsys, flag):
    from tournaments.cli import main

    assert main(["eval", flag, "", "--markets", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("arena: error: ") and err.count("\n") == 1
    assert "config.json" not in err and "non-empty" in err
