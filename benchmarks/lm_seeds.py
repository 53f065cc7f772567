"""The language-model seller over training seeds and warm-start schedules.

    python benchmarks/lm_seeds.py [--seeds 0 1 2] [--schedules constant cosine]
                                  [--out runs/lm_seeds] [--jobs 2] [--markets 1000]

For each (seed, schedule) it writes a copy of ``agents/lm/configs/seller.toml`` with
``seed`` set in ``[train]`` and ``[model]`` (the model's weights, its tokenizer, the
teacher's markets) and ``schedule`` in ``[sft]``, trains it with the documented command

    python -m agents.lm.train CONFIG --out OUT/seedS-SCHEDULE

and evaluates the final model and its warm start on 1000 retail markets of seed S + 1,
markets it never trained on (``python -m agents.lm.evaluate ... --seed S+1``). It prints
one row per run: profit ratio to the teacher, seller violation rate, GRPO minus the warm
start (paired 95% CI), and the SHA-256 of the final weights. A run folder that already
holds an evaluation is read, not redone, so a stopped benchmark picks up where it was.
Each training and evaluation runs on one torch thread; ``--jobs`` runs that many side by
side (about 5 minutes of training and 3 of evaluation each, on one core).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tabulate import tabulate

from agents.command import nonneg_int, pos_int

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "agents" / "lm" / "configs" / "seller.toml"
MARKET = "tournaments/specs/default.toml:retail"


def variant(text: str, seed: int, schedule: str) -> str:
    """The shipped config's text with the seeds and the warm-start schedule replaced."""
    out, table = [], None
    for line in text.splitlines():
        head = line.strip()
        if head.startswith("["):
            table = head.split("]")[0].strip("[")
        key = head.split("=")[0].strip() if "=" in head and not head.startswith("#") else None
        if key == "seed" and table in ("train", "model"):
            line = f"seed = {seed}"
        elif key == "schedule" and table == "sft":
            line = f'schedule = "{schedule}"'
        out.append(line)
    result = "\n".join(out) + "\n"
    parsed = tomllib.loads(result)
    assert parsed["train"]["seed"] == parsed["model"]["seed"] == seed
    assert parsed["sft"]["schedule"] == schedule
    return result


def run_one(out: Path, seed: int, schedule: str, markets: int) -> dict:
    folder = out / f"seed{seed}-{schedule}"
    evaluation = folder / "evaluation.json"
    if evaluation.exists():
        return json.loads(evaluation.read_text())
    out.mkdir(parents=True, exist_ok=True)
    config = out / f"seed{seed}-{schedule}.toml"
    config.write_text(variant(CONFIG.read_text(), seed, schedule))
    if not (folder / "final" / "model.safetensors").exists():
        resume = ["--resume"] if folder.exists() else []  # a stopped run continues
        _run(["agents.lm.train", str(config), "--out", str(folder)] + resume)
    got = _run(
        ["agents.lm.evaluate", "--model", str(folder / "final"), "--warm", str(folder / "sft")]
        + ["--market", MARKET, "--buyers", "truthful", "--markets", str(markets)]
        + ["--seed", str(seed + 1)]
    )
    result = json.loads(got.stdout)
    weights = (folder / "final" / "model.safetensors").read_bytes()
    result.update(seed=seed, schedule=schedule, sha256=hashlib.sha256(weights).hexdigest())
    evaluation.write_text(json.dumps(result, indent=1) + "\n")
    return result


def _run(args: list[str]) -> subprocess.CompletedProcess:
    """``python -m ARGS`` from the checkout's root; its error line as a SystemExit message
    (the training's progress bar, on stderr, is dropped when it succeeds)."""
    got = subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if got.returncode != 0:
        lines = [line for line in got.stderr.splitlines() if line.strip()]
        sys.exit(f"{args[0]} exited with code {got.returncode}: {lines[-1] if lines else ''}")
    return got


def ci(v: list[float]) -> str:
    return f"{v[0]:+.2f} [{v[1]:.2f}, {v[2]:.2f}]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seeds", type=nonneg_int, nargs="+", default=[0, 1, 2])
    ap.add_argument(
        "--schedules", nargs="+", choices=["constant", "cosine"], default=["constant", "cosine"]
    )
    ap.add_argument("--out", type=Path, default=Path("runs/lm_seeds"), help="folder of the runs")
    ap.add_argument("--jobs", type=pos_int, default=2, help="runs side by side")
    ap.add_argument("--markets", type=pos_int, default=1000, help="evaluation markets a run")
    args = ap.parse_args(argv)
    out = args.out.resolve()
    runs = [(s, k) for s in args.seeds for k in args.schedules]
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda r: run_one(out, r[0], r[1], args.markets), runs))
    rows = [
        [
            f"{r['seed']} (`--seed {r['seed'] + 1}`)",
            r["schedule"],
            f"{r['profit_ratio']:.3f}x",
            f"{r['seller_violation_rate']:.4f}",
            ci(r["minus_warm"]),
            r["sha256"][:8] + "…",
        ]
        for r in results
    ]
    head = ["training seed (evaluated on)", "schedule", "profit / teacher", "violation rate"]
    print(
        tabulate(
            rows,
            head + ["GRPO - warm start", "final weights"],
            tablefmt="github",
            disable_numparse=True,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
