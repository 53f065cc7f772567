"""The disclosure study: effects by agent share, the policy table, voluntary disclosure
rates, a learned choice against both forced ones, and the shipped study specs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from agents import registry
from agents.base import AGENT
from agents.scripted.buyers import StrategicAgent
from tournaments.disclosure import ALL_SELLERS, is_study, study_configs
from tournaments.report import analyze_run, report_text, write_report
from tournaments.runner import run_tournament
from tournaments.spec import load_spec, spec_from_dict
from tournaments.store import ResultStore


@dataclass
class _Chooser(StrategicAgent):
    """A strategic agent that discloses on about half of its markets (by the market key's
    parity): a stand-in for a learned choice."""

    def disclose(self, is_agent, key, market=None):
        pick = (np.asarray(key, np.uint64) % np.uint64(2) == 0)[:, None]
        return np.asarray(is_agent, bool) & pick


def _config(share: float) -> dict:
    return {"buyers": 4, "products": 2, "turns": 6, "agent_share": share}


SPEC = {
    "tournament": {
        "name": "study",
        "seed": 4,
        "markets": 80,
        "sellers": ["greedy_matcher", "disclosure_aware"],
        "buyers": ["p_never", "p_always", "p_learned"],
        "disclosure": ["hidden", "mandatory", "voluntary"],
        "transcripts": 0,
    },
    "populations": {
        "p_never": "human=noisy_human,agent=strategic",
        "p_always": "human=noisy_human,agent=strategic+disclosed",
        "p_learned": "human=noisy_human,agent=strategic+learned",
    },
    "configs": {"s0": _config(0.0), "s50": _config(0.5), "s100": _config(1.0)},
}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    registry.register(
        registry.Entry("strategic+learned", "buyer", AGENT, _Chooser, {}, "test stand-in")
    )
    try:
        folder = tmp_path_factory.mktemp("study")
        spec = spec_from_dict(SPEC)
        run_tournament(spec, folder, use_ray=False, progress=False)
        store = ResultStore.open(folder)
        try:
            meta, rec = store.meta(), store.records()
        finally:
            store.close()
        analysis = analyze_run(rec, meta)
        yield folder, rec, meta, analysis
    finally:
        for name in ("strategic+learned", "strategic+learned+disclosed"):
            registry._ENTRIES.pop(name, None)


def test_a_run_over_agent_shares_is_a_study(study):
    _, _, meta, analysis = study
    s = analysis.study
    assert [(c.name, c.share) for c in s.configs] == [("s0", 0.0), ("s50", 0.5), ("s100", 1.0)]
    plain = spec_from_dict({**SPEC, "configs": {"a": _config(0.5), "b": {**_config(0.5),
                                                                        "turns": 7}}})  # fmt: skip
    assert not is_study(plain) and study_configs(plain) == []


def test_disclosure_rates_and_the_learned_choice(study):
    _, rec, _, analysis = study
    s = analysis.study
    rates = {(r.agent, r.share): r for r in s.rates}
    assert rates[("strategic", 0.5)].rate == 0.0
    assert rates[("strategic+disclosed", 0.5)].rate == 1.0
    assert 0.2 < rates[("strategic+learned", 1.0)].rate < 0.8
    assert rates[("strategic", 0.5)].agents == 80 * 2 and rates[("strategic", 1.0)].agents == 320
    assert rates[("strategic", 0.0)].agents == 0
    # The learned choice against never disclosing, by hand: paired per market.
    row = next(
        r
        for r in s.learned
        if (r.versus, r.seller, r.config, r.metric)
        == ("never", "disclosure_aware", "s50", "buyer_surplus_agent")
    )

    def cell(buyer):
        mask = (
            (rec["seller"] == "disclosure_aware")
            & (rec["buyer"] == buyer)
            & (rec["disclosure"] == "voluntary")
            & (rec["config"] == "s50")
        )
        return rec["buyer_surplus_agent"][np.asarray(mask)]

    d = cell("p_learned") - cell("p_never")
    assert row.n == 80 and row.diff == pytest.approx(d.mean())
    assert row.lower <= row.diff <= row.upper
    assert {(r.versus, r.family) for r in s.learned} == {("never", "strategic"),
                                                          ("always", "strategic")}  # fmt: skip
    # A seller that ignores the flag: the choice changes nothing, exactly.
    ignore = [r for r in s.learned if r.seller == "greedy_matcher"]
    assert ignore and all(r.diff == 0 and not r.significant for r in ignore)


def test_the_policy_table_says_who_gains_and_who_loses(study):
    _, _, _, analysis = study
    rows = {(r.rule, r.seller, r.config, r.outcome): r for r in analysis.study.policy}
    for outcome in ("profit", "buyer_surplus_agent", "buyer_surplus_human", "welfare"):
        for rule in ("mandatory", "voluntary"):
            r = rows[(rule, "greedy_matcher", "s50", outcome)]
            assert (r.diff, r.verdict) == (0.0, "no significant change")
            zero = rows[(rule, ALL_SELLERS, "s0", outcome)]  # no agents, nothing to tell
            assert (zero.diff, zero.verdict) == (0.0, "no significant change")
    told = rows[("mandatory", "disclosure_aware", "s50", "profit")]
    assert told.verdict in ("gains", "loses") and told.lower <= told.diff <= told.upper
    # 'all sellers' averages the sellers' cells (each over the same buyer entries).
    pooled = rows[("mandatory", ALL_SELLERS, "s50", "profit")]
    assert pooled.diff == pytest.approx(told.diff / 2)


def test_the_report_adds_the_study(study):
    folder, rec, meta, analysis = study
    text = report_text(rec, meta, analysis=analysis)
    for title in (
        "Disclosure study: mandatory - hidden by agent share",
        "Disclosure study: voluntary - hidden by agent share",
        "Disclosure policy: who gains and who loses",
        "Voluntary disclosure: how often each agent entry discloses",
        "Learned disclosure against both forced choices",
    ):
        assert title in text
    path = write_report(folder, rec, meta, analysis=analysis)
    md = path.read_text()
    assert "![Disclosure study forest plot](report_study_mandatory.png)" in md
    assert (folder / "report_study_voluntary.png").stat().st_size > 0


def test_the_shipped_study_specs():
    scripted = load_spec("tournaments/specs/disclosure_scripted.toml")
    full = load_spec("tournaments/specs/disclosure.toml")
    for spec in (scripted, full):
        assert is_study(spec) and spec.markets >= 1000
        assert [c.share for c in study_configs(spec)] == [0.0, 0.25, 0.5, 0.75, 1.0]
        assert set(spec.disclosure) == {"hidden", "mandatory", "voluntary"}
        assert {"greedy_matcher", "disclosure_aware"} <= set(spec.sellers)
    # The full study names the shipped RL agents.
    assert "rl_seller" in full.sellers
    mixes = set(dict(full.populations).values())
    for agent in ("rl_buyer", "rl_buyer+disclosed", "rl_buyer+learned", "strategic"):
        assert f"human=noisy_human,agent={agent}" in mixes
