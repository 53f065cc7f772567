"""Checkpoints of RL policies: a directory with ``model.safetensors`` and ``config.json``.

Never pickle. ``config.json``::

    {
      "format": "agent-market-arena/policy-1",
      "policy": {"class": "RLSeller", "name": "rl_seller", "side": "seller",
                 "kind": "agent", "params": {...}, "net": {...}},
      "training": {...},                       # the training config, for provenance
      "provenance": {"package_version": ..., "torch_version": ...,
                     "weights_sha256": ..., "created": ...}
    }

The policy class is looked up in a fixed table (``POLICY_CLASSES``), never imported by
a name read from the file, and the weights must hash to ``weights_sha256``. Anything
else (a missing file, malformed JSON, an unknown class or field, tampered weights,
tensors of the wrong shape) raises ``CheckpointError`` with one line naming the file.

``read_checkpoint`` returns the files' bytes (``CheckpointData``), so a checkpoint can
travel to another process or node and be built there (``build``) without a shared
filesystem; ``load`` does both.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from agents.base import is_entry_name
from agents.rl.fixed import FixedMLP, FixedMLPConfig, FixedSizeSeller
from agents.rl.nets import BuyerNet, BuyerNetConfig, SellerNet, SellerNetConfig
from agents.rl.policies import RLBuyer, RLSeller

FORMAT = "agent-market-arena/policy-1"
WEIGHTS = "model.safetensors"
CONFIG = "config.json"

# class name -> (policy class, net class, net config class, side)
POLICY_CLASSES: dict[str, tuple[type, type, type, str]] = {
    "RLSeller": (RLSeller, SellerNet, SellerNetConfig, "seller"),
    "RLBuyer": (RLBuyer, BuyerNet, BuyerNetConfig, "buyer"),
    # An MLP for markets of one size, e.g. exported from RLlib (examples/rllib_seller.py).
    "FixedSizeSeller": (FixedSizeSeller, FixedMLP, FixedMLPConfig, "seller"),
}
_POLICY_KEYS = {"class", "name", "side", "kind", "params", "net"}
_PARAMS = {
    "RLSeller": {
        "offsets",
        "expert_offsets",
        "markups",
        "signal_prior",
        "assignment",
        "within_plan",
        "expert_pair",
    },
    "RLBuyer": {"shares", "bid_to_offer"},
    "FixedSizeSeller": {"buyers", "products", "offsets"},
}


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class CheckpointData:
    """A checkpoint's files as bytes (what travels between processes)."""

    source: str  # where it was read from, for messages
    config: bytes
    weights: bytes

    def meta(self) -> dict[str, Any]:
        return _parse_config(self)

    @property
    def weights_sha256(self) -> str:
        return hashlib.sha256(self.weights).hexdigest()


def package_version() -> str:
    try:
        return version("agent-market-arena")
    except PackageNotFoundError:  # a source tree that is not installed
        return "unknown"


def save(
    path: str | os.PathLike,
    policy: RLSeller | RLBuyer,
    *,
    name: str,
    training: dict[str, Any] | None = None,
) -> Path:
    """Write ``policy`` (its network and parameters) as a checkpoint directory."""
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    cls = type(policy).__name__
    if cls not in POLICY_CLASSES:
        raise CheckpointError(f"{cls} cannot be saved as a checkpoint")
    tensors = {k: v.detach().contiguous().clone() for k, v in policy.net.state_dict().items()}
    weights = save_tensors(tensors)
    params = policy.checkpoint_params()
    config = {
        "format": FORMAT,
        "policy": {
            "class": cls,
            "name": name,
            "side": POLICY_CLASSES[cls][3],
            "kind": policy.kind,
            "params": params,
            "net": policy.net.cfg.to_dict(),
        },
        "training": training or {},
        "provenance": {
            "package_version": package_version(),
            "torch_version": torch.__version__,
            "weights_sha256": hashlib.sha256(weights).hexdigest(),
            "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        },
    }
    # Weights first, config last: a directory with a config always has its weights.
    _write(out / WEIGHTS, weights)
    _write(out / CONFIG, (json.dumps(config, indent=2, sort_keys=True) + "\n").encode())
    return out


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def is_checkpoint(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a checkpoint directory (it holds a config.json)."""
    return Path(path).is_dir() and (Path(path) / CONFIG).is_file()


def read_checkpoint(path: str | os.PathLike) -> CheckpointData:
    """The checkpoint's bytes, checked (``CheckpointError`` if anything is wrong)."""
    root = Path(path)
    if not root.is_dir():
        raise CheckpointError(f"{root}: no such checkpoint directory")
    files = {}
    for name in (CONFIG, WEIGHTS):
        try:
            files[name] = (root / name).read_bytes()
        except OSError as err:
            raise CheckpointError(f"{root / name}: cannot read ({err.strerror})") from None
    data = CheckpointData(str(root), files[CONFIG], files[WEIGHTS])
    _parse_config(data)
    return data


def _parse_config(data: CheckpointData) -> dict[str, Any]:
    where = f"{data.source}/{CONFIG}"
    try:
        meta = json.loads(data.config.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{where}: not valid JSON ({err})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{where}: not a policy checkpoint (format must be {FORMAT!r})")
    policy = meta.get("policy")
    if not isinstance(policy, dict) or set(policy) != _POLICY_KEYS:
        raise CheckpointError(f"{where}: 'policy' must have exactly {sorted(_POLICY_KEYS)}")
    cls = policy["class"]
    if not isinstance(cls, str) or cls not in POLICY_CLASSES:
        raise CheckpointError(
            f"{where}: unknown policy class {cls!r}; known: {sorted(POLICY_CLASSES)}"
        )
    if policy["side"] != POLICY_CLASSES[cls][3]:
        raise CheckpointError(f"{where}: a {cls} plays the {POLICY_CLASSES[cls][3]} side")
    name = policy["name"]
    if not is_entry_name(name):
        raise CheckpointError(f"{where}: bad policy name {name!r}")
    if not isinstance(policy["params"], dict) or set(policy["params"]) - _PARAMS[cls]:
        raise CheckpointError(f"{where}: policy params must be among {sorted(_PARAMS[cls])}")
    provenance = meta.get("provenance")
    digest = provenance.get("weights_sha256") if isinstance(provenance, dict) else None
    if digest != data.weights_sha256:
        raise CheckpointError(
            f"{data.source}/{WEIGHTS}: the weights do not match the hash in {CONFIG}"
        )
    return meta


def build(
    data: CheckpointData,
    *,
    seed: int = 0,
    greedy: bool = True,
    shared: bool = False,
    **kwargs: Any,
) -> RLSeller | RLBuyer:
    """The policy a checkpoint describes, ready to play. ``shared``: reuse the network
    already built from the same bytes in this process (frozen, for play only), so a
    tournament worker loads each checkpoint once however many matches it plays.
    ``kwargs``: play-time options of the policy class (``disclosure`` of a buyer)."""
    if shared:
        key = hashlib.sha256(data.config + data.weights).hexdigest()
        if key not in _SHARED:
            _SHARED[key] = build(data)
        first = _SHARED[key]
        cls = type(first)
        params = cls.from_checkpoint_params(first.checkpoint_params())
        return cls(first.net, seed=seed, greedy=greedy, **params, **kwargs)
    meta = _parse_config(data)
    policy = meta["policy"]
    cls, net_cls, cfg_cls, _ = POLICY_CLASSES[policy["class"]]
    try:
        net = net_cls(cfg_cls(**policy["net"]))
        params = cls.from_checkpoint_params(policy["params"])
        out = cls(net, seed=seed, greedy=greedy, **params, **kwargs)
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"{data.source}/{CONFIG}: bad policy config ({err})") from None
    try:
        state = load_tensors(data.weights)
        net.load_state_dict(state, strict=True)
    except (SafetensorError, RuntimeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(f"{data.source}/{WEIGHTS}: weights do not fit ({first})") from None
    net.eval()
    return out


_SHARED: dict[str, RLSeller | RLBuyer] = {}


def load(path: str | os.PathLike, *, seed: int = 0, greedy: bool = True) -> RLSeller | RLBuyer:
    return build(read_checkpoint(path), seed=seed, greedy=greedy)
