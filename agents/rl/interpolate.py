"""A checkpoint whose weights lie on the line between two others: weight-space
interpolation of a fine-tuned policy and the one it was fine-tuned from.

    python -m agents.rl.interpolate FINE_TUNED START --weight W --name NAME --out DIR

The new weights are ``(1 - W) * FINE_TUNED + W * START``, tensor by tensor; everything
else (class, play parameters such as the signal prior, network sizes) is
``FINE_TUNED``'s. Both must be checkpoints of one policy class with one network shape,
and ``START`` should be where ``FINE_TUNED``'s training began (its ``train.init``): only
then do the two lie in one basin of the loss, where the line between them stays good.
Fine-tuning that teaches a second task (wholesale) can lose part of what the start did
well on markets neither trained on; averaging the weights keeps some of both
(robust fine-tuning by weight-space ensembling, as in "WiSE-FT", Wortsman et al. 2022).

The new checkpoint's ``config.json`` records both parents (paths, names and weights
hashes) and ``W`` under ``training.interpolation``, beside the fine-tuned one's training
config: the file says how it was made, and the command makes the same weights again,
bit for bit (only the time it was made differs).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch

from agents.base import is_entry_name
from agents.command import run_guarded
from agents.rl.checkpoint import CheckpointError, build, read_checkpoint, save


def interpolate(fine_tuned: str, start: str, weight: float, name: str, out: str) -> Path:
    """Write the checkpoint ``(1 - weight) * fine_tuned + weight * start`` to ``out``
    under the entry name ``name``; CheckpointError when the two do not fit together."""
    if not (math.isfinite(weight) and 0.0 <= weight <= 1.0):
        raise CheckpointError(f"--weight: expected a number in [0, 1], got {weight}")
    if not is_entry_name(name):  # else it writes a checkpoint no reader accepts
        raise CheckpointError(
            f"--name: expected a plain name (no blanks, none of | # / \\ , : =, not starting "
            f"with a dot), got {name!r}"
        )
    target = Path(out)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise CheckpointError(f"--out {out}: holds files already; choose an empty or new folder")
    data_a, data_b = read_checkpoint(fine_tuned), read_checkpoint(start)
    meta_a, meta_b = data_a.meta(), data_b.meta()
    for key in ("class", "net"):
        if meta_a["policy"][key] != meta_b["policy"][key]:
            raise CheckpointError(
                f"{start}: its policy {key} ({meta_b['policy'][key]}) is not {fine_tuned}'s "
                f"({meta_a['policy'][key]}): only one network shape interpolates"
            )
    policy = build(data_a)
    other = build(data_b).net.state_dict()
    with torch.no_grad():
        state = {
            k: torch.lerp(v, other[k], weight) if v.is_floating_point() else v
            for k, v in policy.net.state_dict().items()
        }
        policy.net.load_state_dict(state, strict=True)
    training = meta_a.get("training")
    training = dict(training) if isinstance(training, dict) else {}  # as a reader takes it
    training["interpolation"] = {
        "weight": weight,
        "fine_tuned": {
            "path": str(fine_tuned),
            "name": meta_a["policy"]["name"],
            "weights_sha256": data_a.weights_sha256,
        },
        "start": {
            "path": str(start),
            "name": meta_b["policy"]["name"],
            "weights_sha256": data_b.weights_sha256,
        },
    }
    return save(out, policy, name=name, training=training)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m agents.rl.interpolate",
        description=__doc__.split("\n\n")[0],
    )
    ap.add_argument("fine_tuned", metavar="FINE_TUNED", help="checkpoint directory")
    ap.add_argument("start", metavar="START", help="checkpoint it was fine-tuned from")
    ap.add_argument("--weight", type=float, required=True, help="START's share, in [0, 1]")
    ap.add_argument("--name", required=True, help="the new checkpoint's entry name")
    ap.add_argument("--out", required=True, help="the new checkpoint directory")
    args = ap.parse_args(argv)

    def body() -> int:
        path = interpolate(args.fine_tuned, args.start, args.weight, args.name, args.out)
        print(f"{args.name}: {1 - args.weight:g} x {args.fine_tuned} + {args.weight:g} x "
              f"{args.start} -> {path}")  # fmt: skip
        return 0

    return run_guarded(ap.prog, body)


if __name__ == "__main__":
    raise SystemExit(main())
