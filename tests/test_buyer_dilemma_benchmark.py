"""benchmarks/buyer_dilemma.py: crowds, newcomers and the social dilemma reading."""

from __future__ import annotations

import numpy as np
import pytest

from agents import registry
from agents.evaluate import evaluate_batch
from arena.generator import generate_batch


@pytest.fixture(scope="module")
def dil(load_benchmark):
    return load_benchmark("buyer_dilemma")


def test_a_crowd_with_its_own_newcomer_plays_as_the_entry_alone(dil):
    batch = generate_batch(dil.CONFIGS["retail"], dil.SEED, range(60))
    n = batch.values.shape[1]
    alone = evaluate_batch(batch, registry.make("greedy_matcher", "seller"),
                           registry.make("haggler", "buyer", seed=0))  # fmt: skip
    s = dil.surplus(batch, "greedy_matcher", "haggler", "haggler")
    np.testing.assert_allclose(s["buyers"], alone["buyer_surplus"])
    np.testing.assert_allclose(s["profit"], alone["profit"])
    np.testing.assert_allclose(s["crowd"] * (n - 1) + s["newcomer"], s["buyers"])


def test_the_newcomer_sits_in_one_slot_the_same_for_every_pair(dil):
    batch = generate_batch(dil.CONFIGS["wholesale"], dil.SEED, range(50))
    n = batch.values.shape[1]
    slots = [
        dil.buyers(a, b, n).assign(batch.is_agent, batch.keys) == 1
        for a, b in (("truthful", "truthful"), ("truthful", "haggler"), ("haggler", "truthful"))
    ]
    assert np.all(slots[0].sum(axis=1) == 1)
    assert all(np.array_equal(slots[0], s) for s in slots[1:])
    assert len(set(np.argmax(slots[0], axis=1))) > 3  # dealt by the key, not always buyer 0


def _got(per_buyer: dict, lone: dict) -> dict:
    """A ``rows``-like dict: symmetric cells with a per-buyer mean, mixed cells where the
    newcomer earns ``lone[(crowd, newcomer)]`` more than the crowd (over 50 markets)."""
    out = {}
    rng = np.random.default_rng(0)
    for x, v in per_buyer.items():
        z = rng.standard_normal(50)
        mine = v + 0.5 * (z - z.mean())  # mean exactly v
        out[(x, x)] = {"per_buyer": mine, "crowd": mine, "newcomer": mine}
    for (x, y), gap in lone.items():
        crowd = np.full(50, 1.0)
        out[(x, y)] = {"crowd": crowd, "newcomer": crowd + gap + 0.01 * rng.standard_normal(50)}
    return out


def test_the_reading_names_a_dilemma_only_where_defecting_pays_and_costs_all(dil):
    dilemma = _got(
        {"coop": 12.0, "defect": 8.0}, {("coop", "defect"): 5.0, ("defect", "coop"): -3.0}
    )
    text = dil.reading(dilemma, "coop", "defect")
    assert "social dilemma" in text and "each gains by defect" in text
    assert text.startswith("every buyer playing coop earns 12.00 each, playing defect 8.00")
    # The better profile is also the one each buyer prefers: no dilemma.
    plain = _got({"coop": 12.0, "defect": 8.0}, {("coop", "defect"): -2.0, ("defect", "coop"): 4.0})
    assert "dilemma" not in dil.reading(plain, "defect", "coop")
    assert "does not out-earn them, a lone coop among defect out-earns" in dil.reading(
        plain, "defect", "coop"
    )
    # Crowds that earn alike (paired CI around 0) are no dilemma, whoever out-earns whom.
    tie = _got({"coop": 12.0, "defect": 11.9}, {("coop", "defect"): 5.0, ("defect", "coop"): -3.0})
    assert "dilemma" not in dil.reading(tie, "coop", "defect")
    assert "within its 95% CI of 0" in dil.reading(tie, "coop", "defect")


def test_the_table_and_bad_input(dil, capsys):
    table, readings = dil.rows(["truthful", "haggler"], "greedy_matcher", 30, configs=("retail",))
    assert [r[1:3] for r in table] == [
        ["truthful", "truthful"],
        ["truthful", "haggler"],
        ["haggler", "truthful"],
        ["haggler", "haggler"],
    ]
    assert len(readings) == 1 and readings[0].startswith("retail: every buyer playing")
    assert dil.main(["truthful", "--markets", "5"]) == 2  # one buyer
    assert dil.main(["truthful", "nobody", "--markets", "5"]) == 2
    assert dil.main(["truthful", "haggler", "--configs", "mars", "--markets", "5"]) == 2
    assert dil.main(["truthful", "haggler", "--seller", "nobody", "--markets", "5"]) == 2
    assert dil.main(["truthful", "haggler", "--threads", "0", "--markets", "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 5 and all(
        line.startswith("benchmarks/buyer_dilemma.py: error:") for line in err
    )
    assert dil.main(["truthful", "haggler", "--seller", "greedy_matcher", "--markets", "20",
                     "--configs", "retail", "--markdown"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert out.count("| retail ") == 4 and "- retail: every buyer playing" in out
