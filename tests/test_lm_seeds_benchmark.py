"""benchmarks/lm_seeds.py: the configs it trains are the shipped LM seller's config with
the seeds and the warm-start schedule replaced, and nothing else."""

from __future__ import annotations

import tomllib

from benchmarks.lm_seeds import CONFIG, variant


def test_a_variant_changes_the_two_seeds_and_the_schedule_only():
    shipped = tomllib.loads(CONFIG.read_text())
    assert shipped["train"]["seed"] == shipped["model"]["seed"] == 0
    assert tomllib.loads(variant(CONFIG.read_text(), 0, "cosine")) == shipped
    got = tomllib.loads(variant(CONFIG.read_text(), 2, "constant"))
    assert got["train"]["seed"] == got["model"]["seed"] == 2
    assert got["sft"]["schedule"] == "constant"
    got["train"]["seed"] = got["model"]["seed"] = 0
    got["sft"]["schedule"] = shipped["sft"]["schedule"]
    assert got == shipped


def test_a_seed_key_of_another_table_is_left_alone():
    text = "[market]\nseed = 7\n[train]\nseed = 0\n[model]\nseed = 0\n[sft]\nschedule = 'x'\n"
    got = tomllib.loads(variant(text, 3, "cosine"))
    assert got == {
        "market": {"seed": 7},
        "train": {"seed": 3},
        "model": {"seed": 3},
        "sft": {"schedule": "cosine"},
    }
