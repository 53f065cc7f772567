"""``arena check MODULE:CLASS`` and the bring-your-own-agent guide's examples, run as the
guide runs them (``--agents`` itself: tests/test_user_agents.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tournaments.cli import main

ROOT = Path(__file__).resolve().parents[1]
AGENTS = ROOT / "examples" / "my_agents.py"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_an_empty_class_does_not_conform_and_says_why(capsys):
    code, out, _ = run(capsys, "check", f"{AGENTS}:EmptySeller")
    assert code == 1
    assert "EmptySeller (seller) does not conform" in out and "abstract method act" in out
    assert "--param" not in out  # no constructor argument would help: it has no act


def test_a_policy_that_breaks_the_rules_is_told_where(capsys):
    code, out, _ = run(capsys, "check", f"{AGENTS}:FirstTry")
    assert code == 1 and "violations by the seller" in out and "config 2" in out


def test_the_guides_seller_conforms_by_file_and_by_module(capsys, monkeypatch):
    code, out, _ = run(capsys, "check", f"{AGENTS}:SignalSeller")
    assert code == 0 and "SignalSeller (seller) conforms on 3 configs" in out
    monkeypatch.chdir(AGENTS.parent)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "my_agents", raising=False)
    code, out, _ = run(capsys, "check", "my_agents:SignalSeller", "--markets", "4")
    assert code == 0 and "conforms" in out


@pytest.mark.parametrize(
    "target, needle",
    [
        ("json:JSONDecoder", "neither a SellerPolicy nor a BuyerPolicy"),
        ("no_such_module_here:X", "cannot import 'no_such_module_here'"),
        ("json:NoSuchClass", "has no class 'NoSuchClass'"),
        ("MySeller", "expected MODULE:CLASS"),
    ],
)
def test_what_cannot_be_checked_is_one_error_line(capsys, target, needle):
    code, _, err = run(capsys, "check", target)
    assert code == 2 and needle in err and err.count("\n") == 1


def test_the_guides_tournament_plays_the_new_entry(tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    out = tmp_path / "byo"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "byo_tournament.py"), "--out", str(out),
         "--markets", "20", "--no-ray"],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "played 360 markets" in proc.stdout
    proc = subprocess.run(
        [sys.executable, "-m", "tournaments.cli", "report", str(out)],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0 and "signal_seller" in proc.stdout
    # The guide's command line plays the same spec with the same results: the spec names
    # the module, from another folder too.
    cli = tmp_path / "cli"
    proc = subprocess.run(
        [sys.executable, "-m", "tournaments.cli", "tournament", str(ROOT / "examples" / "byo.toml"),
         "--out", str(cli), "--markets", "20", "--no-ray", "--quiet"],
        cwd=tmp_path,
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert exported(cli, env) == exported(out, env)


def exported(folder: Path, env: dict) -> list[str]:
    """A run's market rows as CSV lines, sorted."""
    path = folder.parent / f"{folder.name}.csv"
    proc = subprocess.run(
        [sys.executable, "-m", "tournaments.cli", "export", str(folder), "--to", str(path)],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return sorted(path.read_text().splitlines())


def _bare_classes(source: str) -> dict[str, str]:
    """Each class of ``source`` as an AST dump without docstrings and annotations (the
    guide prints the example's code without them)."""
    import ast

    out = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        for sub in ast.walk(node):
            body = getattr(sub, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
                if isinstance(getattr(body[0], "value", None), ast.Constant):
                    if isinstance(body[0].value.value, str):
                        sub.body = body[1:] or [ast.Pass()]
            if isinstance(sub, ast.FunctionDef):
                sub.returns = None
            if isinstance(sub, ast.arg):
                sub.annotation = None
        out[node.name] = ast.dump(node)
    return out


def test_the_guides_classes_are_the_examples_code():
    """The classes the guide prints run as examples/my_agents.py's (which the tests above
    check), docstrings and annotations aside: the guide cannot drift from what is tested."""
    import re

    guide = (ROOT / "docs" / "bring_your_own_agent.md").read_text()
    printed = _bare_classes(
        "\n".join(m.group(1) for m in re.finditer(r"```python\n(.*?)```", guide, re.S))
    )
    example = _bare_classes(AGENTS.read_text())
    assert {"EmptySeller", "FirstTry", "SignalSeller"} <= set(printed)
    for name, dump in printed.items():
        assert dump == example[name], name


def test_a_policy_that_raises_is_told_the_line_of_its_own_code(capsys, tmp_path):
    """A problem ``raised X`` names the deepest line of the checked file, not the engine's."""
    (tmp_path / "divider_agents.py").write_text(
        "from agents.base import SellerPolicy\n"
        "\n"
        "\n"
        "class Divider(SellerPolicy):\n"
        "    def act(self, obs):\n"
        "        return self.helper(obs)\n"
        "\n"
        "    def helper(self, obs):\n"
        "        return 1 / 0\n"
    )
    code, out, _ = run(capsys, "check", f"{tmp_path / 'divider_agents.py'}:Divider")
    assert code == 1
    where = f"(at {tmp_path / 'divider_agents.py'}:9, in helper)"
    assert f"config 0: raised ZeroDivisionError: division by zero {where}" in out


NEEDS_ARG = """
import numpy as np

from agents.base import SellerAction, SellerPolicy
from arena.prices import cents


class NeedsArg(SellerPolicy):
    def __init__(self, markup: float, seed: int = 0) -> None:
        self.markup, self.seed = markup, seed

    def act(self, obs):
        b, n, m = obs.signals.shape
        open_ = obs.active[:, :, None] & (obs.stock > 0)[:, None, :]
        pair = np.argmax(np.where(open_, obs.signals, -np.inf).reshape(b, n * m), axis=1)
        to, product = pair // m, pair % m
        lo, hi = obs.price_range
        price = obs.costs[np.arange(b), product] * self.markup
        return SellerAction(to=to, product=product, price=cents(price, lo, hi))
"""


def test_constructor_arguments_are_given_with_param(capsys, tmp_path):
    (tmp_path / "needs_arg_agents.py").write_text(NEEDS_ARG)
    target = f"{tmp_path / 'needs_arg_agents.py'}:NeedsArg"
    code, out, _ = run(capsys, "check", target)
    assert code == 1
    assert "missing 1 required positional argument: 'markup' (constructor arguments: --param" in out
    code, out, _ = run(capsys, "check", target, "--param", "markup=1.5", "--lenient")
    assert code == 0 and "NeedsArg (seller) conforms" in out
    # The value is read as TOML: a string where a number is due fails in the policy.
    code, out, _ = run(capsys, "check", target, "--param", 'markup="high"')
    assert code == 1 and "raised" in out
    code, _, err = run(capsys, "check", target, "--param", "markp=1.5")
    assert code == 2
    assert "--param markp: NeedsArg takes no parameter 'markp' (it takes: markup)" in err
    code, _, err = run(capsys, "check", target, "--param", "markup=1.5", "--param", "seed=3")
    assert code == 2
    assert (
        err
        == "arena: error: --param seed: the check gives the policy its seeds itself (--seed N)\n"
    )
    with pytest.raises(SystemExit) as exit_:
        main(["check", target, "--param", "=1.5"])
    assert exit_.value.code == 2
    assert "argument --param: expected KEY=VALUE, got '=1.5'" in capsys.readouterr().err
