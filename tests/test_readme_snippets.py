"""The README's Python examples run as printed (in a fresh folder, nothing else given)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SNIPPETS = [
    textwrap.dedent(m.group(1))
    for m in re.finditer(r"```python\n(.*?)```", README.read_text(), re.S)
]


def test_the_readme_has_its_examples():
    assert len(SNIPPETS) >= 2
    assert any("gymnasium" in s for s in SNIPPETS)
    assert any("pettingzoo_env" in s for s in SNIPPETS)


@pytest.mark.parametrize("code", SNIPPETS, ids=lambda s: s.split("\n")[0][:40])
def test_a_readme_example_runs(code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope: dict = {"__name__": "readme_example"}
    exec(compile(code, str(README), "exec"), scope)
    if "gymnasium" in code:  # one step of one market, and the vector env built
        assert (
            scope["obs"]["observation"].shape == scope["env"].observation_space["observation"].shape
        )
        assert scope["vec"].num_envs == 1024
    if "pettingzoo_env" in code:  # the loop played the market to its end
        assert scope["game"].agents == []
