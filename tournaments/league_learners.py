"""The league's learners: one PPO run per job (``agents.rl.ppo.train``), in a Ray task or
in the driver, resumable, and runnable on a node that does not see the driver's folder
(the checkpoints it names travel as bytes in the job)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# What a learner's folder holds that the league keeps (a task on another node sends them).
LEARNER_FILES = (
    "model.safetensors",
    "config.json",
    "curve.csv",
    "curve.png",
    "train_state.json",
    "train_state.safetensors",
)


@dataclass(frozen=True)
class LearnerJob:
    """One PPO run: its config (checkpoints named by the driver's paths), the driver's
    folder for it, and the bytes of every checkpoint it names (for other nodes)."""

    cfg: Any  # TrainConfig
    out: str
    checkpoints: tuple = ()  # ((path, CheckpointData), ...)
    cost: float = 1.0  # for scheduling: the longest first

    @property
    def label(self) -> str:
        return Path(self.out).name


def learner_job(cfg: Any, out: Path) -> LearnerJob:
    from agents.rl.checkpoint import read_checkpoint

    paths = [o.name for o in cfg.opponents if "/" in o.name] + ([cfg.init] if cfg.init else [])
    data = tuple((p, read_checkpoint(p)) for p in dict.fromkeys(paths))
    # A seller's turn costs several times a buyer's decision (it scores every pair).
    per_iteration = cfg.batch_size * (5.0 if cfg.side == "seller" else 1.0)
    return LearnerJob(cfg, str(out), data, cost=cfg.iterations * per_iteration)


def trained(cfg: Any, out: Path) -> bool:
    """Whether ``out`` holds the finished run of ``cfg``."""
    from agents.rl.ppo import STATE_JSON

    try:
        state = json.loads((Path(out) / STATE_JSON).read_text())
    except (OSError, ValueError):
        return False
    return (
        state.get("iteration") == cfg.iterations
        and state.get("config") == json.loads(json.dumps(cfg.to_dict()))
        and (Path(out) / "config.json").is_file()
    )


def run_learner(job: LearnerJob) -> dict[str, bytes]:
    """Train (or resume, or find finished) one learner; returns its folder's files. Runs
    in a Ray task or in the driver. Where the driver's folder is not visible (another
    node), trains in a temporary folder from the checkpoints' bytes."""
    from agents.rl.ppo import STATE_JSON, train

    cfg, out = job.cfg, Path(job.out)
    tmp = None
    if not out.parent.is_dir():
        tmp = Path(tempfile.mkdtemp(prefix="league-"))
        cfg = _materialized(cfg, job.checkpoints, tmp)
        out = tmp / "run"
    try:
        if not trained(cfg, out):
            resume = (out / STATE_JSON).is_file()
            train(cfg, out, resume=resume, progress=False)
        return {n: (out / n).read_bytes() for n in LEARNER_FILES if (out / n).is_file()}
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _materialized(cfg: Any, checkpoints: tuple, root: Path) -> Any:
    """``cfg`` with every checkpoint path replaced by a copy written under ``root``."""
    from agents.rl.config import Opponent

    where = {}
    for k, (path, data) in enumerate(checkpoints):
        d = root / f"ck{k}"
        d.mkdir(parents=True)
        (d / "config.json").write_bytes(data.config)
        (d / "model.safetensors").write_bytes(data.weights)
        where[path] = str(d)
    return dataclasses.replace(
        cfg,
        init=where.get(cfg.init, cfg.init),
        opponents=tuple(Opponent(where.get(o.name, o.name), o.weight) for o in cfg.opponents),
    )


def write_files(out: Path, files: dict[str, bytes]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        path = out / name
        if path.is_file() and path.read_bytes() == data:
            continue
        tmp = path.with_name(name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)


__all__ = ["LEARNER_FILES", "LearnerJob", "learner_job", "run_learner", "trained", "write_files"]
