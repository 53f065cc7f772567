"""benchmarks/teacher_inputs.py: the stage-2 teachers asked on the learner's features
against their own play on the same states."""

from __future__ import annotations

import pytest


def test_a_teacher_asked_on_features_of_other_options_answers_otherwise(load_benchmark, capsys):
    bench = load_benchmark("teacher_inputs")
    rows = {r[0]: r for r in bench.compare(str(bench.SHIPPED_CONFIG), 8, 99)}
    assert set(rows) == {"retail", "wholesale"}
    # The wholesale specialist knows neither the prior nor the assignment: it is asked on
    # features it never trained on; the retail one (assignment, no prior) much less so.
    assert rows["wholesale"][2] == "0, False" and rows["wholesale"][3] == "0.25, True"
    assert float(rows["wholesale"][4]) > 0.5 > float(rows["retail"][4])
    assert float(rows["wholesale"][7].rstrip("%")) < float(rows["retail"][7].rstrip("%"))
    assert bench.main(["--markets", "8", "--markdown"]) == 0
    assert "| wholesale" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:  # argparse: one usage line, exit 2
        bench.main(["--markets", "0"])
    assert stop.value.code == 2
    assert bench.main(["--config", "agents/rl/configs/buyer.toml", "--markets", "8"]) == 2
    assert "names no teachers" in capsys.readouterr().err
