"""``arena train seller|buyer``: train a policy from a training config.

    arena train seller --config agents/rl/configs/seller.toml --out runs/rl_seller
    arena train buyer --config agents/rl/configs/buyer.toml --out runs/rl_buyer --resume
    arena train seller --config agents/lm/configs/seller.toml --out runs/lm_seller

A config whose ``[train] policy`` names a language-model class goes to the language-model
trainer (``agents.lm.train``: warm start, then GRPO); any other to PPO (``agents.rl.ppo``).

``--agents FILE.py`` registers entries of one's own first, so that the config's
``[[opponents]]`` (or its teacher) may name them; training runs in this process.

The folder ``--out`` becomes a checkpoint (``model.safetensors`` + ``config.json``) that
any command or spec takes wherever it takes an entry name, beside the learning curve
(``curve.csv``, ``curve.png``) and the trainer's state (for ``--resume``).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from tournaments.cli import own_agents
from tournaments.cli.common import CliError, nonempty, nonneg_int, pos_int


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train a seller or a buyer (PPO) from a training config",
        description="Train a seller or a buyer from a training config (TOML).",
    )
    p.add_argument("side", choices=["seller", "buyer"], help="the side that learns")
    p.add_argument("--config", required=True, metavar="FILE.toml", help="training config")
    p.add_argument(
        "--out",
        required=True,
        type=nonempty,
        metavar="DIR",
        help="run folder (the checkpoint); a new or empty one unless --resume",
    )
    p.add_argument("--resume", action="store_true", help="continue the run in DIR")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where to train")
    p.add_argument("--iterations", type=pos_int, help="override train.iterations")
    p.add_argument("--seed", type=nonneg_int, help="override train.seed")
    p.add_argument(
        "--stop-after", type=pos_int, metavar="N", help="stop after iteration N (resumable)"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    own_agents.add_flag(p)  # opponents (or a teacher) of one's own
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from agents.lm.train import is_lm_config

    own_agents.load_all(args.agents)
    if is_lm_config(args.config):
        return _train_language_model(args)
    from agents.rl.checkpoint import CheckpointError
    from agents.rl.config import load_train_config
    from agents.rl.ppo import TrainError, train

    cfg = load_train_config(args.config, iterations=args.iterations, seed=args.seed)
    if cfg.side != args.side:
        raise CliError(f"{args.config} trains a {cfg.side}, not a {args.side}")
    try:
        out = train(
            cfg,
            args.out,
            resume=args.resume,
            device=args.device,
            progress=not args.quiet,
            until=args.stop_after,
        )
    except (TrainError, CheckpointError) as err:
        raise CliError(str(err)) from None
    _summary(out)
    if args.stop_after is not None and args.stop_after < cfg.iterations:
        print(
            f"stopped after iteration {args.stop_after} of {cfg.iterations}: the same command "
            "with --resume instead of --stop-after continues it"
        )
    return 0


def _train_language_model(args: argparse.Namespace) -> int:
    """A config whose ``[train] policy`` is a language-model class: supervised warm start
    on a teacher's transcripts, then GRPO (``agents.lm.train``)."""
    from agents.lm.train import load_config, train

    for flag in ("iterations", "seed", "stop_after"):
        if getattr(args, flag) is not None:
            raise CliError(f"--{flag.replace('_', '-')}: not for a language-model config")
    cfg = load_config(args.config)
    if cfg.side != args.side:
        raise CliError(f"{args.config} trains a {cfg.side}, not a {args.side}")
    out = train(cfg, args.out, resume=args.resume, device=args.device, progress=not args.quiet)
    print(f"checkpoint: {out}")
    return 0


def _summary(out: Path) -> None:
    with open(out / "curve.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    last = next((r for r in reversed(rows) if r.get("phase") == "train"), None)
    first_eval = next((r for r in rows if r.get("phase") == "eval"), {})
    print(f"checkpoint: {out} (model.safetensors + config.json); curve: {out / 'curve.png'}")
    if last is None:
        return
    print(f"iterations {last['iteration']}, samples {last['samples']}, {last['wall_s']} s")
    evals = [k for k in last if k.startswith("eval_") and "[" not in k and last[k]]
    if evals:
        print("evaluation (greedy play; scripted reference in brackets):")
        for k in evals:
            ref = [v for c, v in first_eval.items() if c.startswith(k + "[") and v]
            extra = f"  [{float(ref[0]):.2f}]" if ref else ""
            print(f"  {k[5:]:<50} {float(last[k]):10.2f}{extra}")
