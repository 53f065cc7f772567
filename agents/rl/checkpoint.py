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
a name read from the file, and the weights must hash to ``weights_sha256``. Reading checks
everything play depends on: the kind, the net's sizes and the policy's params (types and
ranges), the tensors (finite, of the shapes the net has). Anything wrong (a missing
file, malformed JSON, an unknown class or field, tampered weights, tensors of the wrong
shape) raises ``CheckpointError`` with one line naming the file and the field.

A checkpoint's ``identity`` hashes what plays (the policy's config and the weights);
two checkpoints of one name are the same entry only when their identities agree.

``read_checkpoint`` returns the files' bytes (``CheckpointData``), so a checkpoint can
travel to another process or node and be built there (``build``) without a shared
filesystem; ``load`` does both.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import os
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError, deserialize
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from agents.base import is_entry_name
from agents.rl.fixed import FixedMLP, FixedMLPConfig, FixedSizeSeller
from agents.rl.nets import BuyerNet, BuyerNetConfig, SellerNet, SellerNetConfig
from agents.rl.policies import RLBuyer, RLSeller
from arena.config import finite_float
from arena.words import shown

FORMAT = "agent-market-arena/policy-1"
WEIGHTS = "model.safetensors"
CONFIG = "config.json"
LM_POLICY = "policy.json"  # what marks a language-model directory (agents.lm.policy.POLICY_FILE)

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
# JSON types of the net's fields: a whole number, a list of them, true/false, a string.
_NET_TYPES = {
    "RLSeller": {"features": "ints", "levels": "int", "hidden": "int", "film": "bool"},
    "RLBuyer": {"features": "int", "levels": "int", "hidden": "int", "disclosure": "int"},
    "FixedSizeSeller": {"inputs": "int", "outputs": "int", "hidden": "ints", "activation": "str"},
}
# Where a float's exponent bits sit, by safetensors dtype: all ones is inf or NaN.
_EXPONENTS = {
    "F64": ("<u8", 0x7FF0000000000000),
    "F32": ("<u4", 0x7F800000),
    "F16": ("<u2", 0x7C00),
    "BF16": ("<u2", 0x7F80),
    "F8_E5M2": ("u1", 0x7C),
    "F8_E4M3": ("u1", 0x7F),  # no infinities; NaN is every other bit set
}
# safetensors' names of the dtypes a network's tensors may have.
_DTYPE_NAMES = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
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

    @property
    def identity(self) -> str:
        """A hash of what plays: the policy's config (class, name, side, kind, params and
        net, in canonical form: defaults filled in, numbers as floats) and the weights'
        hash. Training records and provenance are left out, so a copy or a re-save of
        the same policy keeps its identity; any change to its play changes it."""
        policy = self.meta()["policy"]
        cls, _, cfg_cls, _ = POLICY_CLASSES[policy["class"]]
        playing = {
            **{k: policy[k] for k in ("class", "name", "side", "kind")},
            "params": cls.from_checkpoint_params(policy["params"]),
            "net": cfg_cls(**policy["net"]).to_dict(),
            "weights_sha256": self.weights_sha256,
        }
        text = json.dumps(playing, sort_keys=True, separators=(",", ":"), allow_nan=False)
        return hashlib.sha256(text.encode()).hexdigest()


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
    """Whether ``path`` names a checkpoint directory: it holds a config.json and no
    policy.json (a language-model directory holds both)."""
    root = Path(path)
    return root.is_dir() and (root / CONFIG).is_file() and not (root / LM_POLICY).is_file()


def read_checkpoint(path: str | os.PathLike) -> CheckpointData:
    """The checkpoint's bytes, checked (``CheckpointError`` if anything is wrong; for a
    language-model directory, one that says what it is and how it plays instead)."""
    root = Path(path)
    try:
        found = root.is_dir()
    except OSError as err:  # e.g. a name too long for the filesystem
        raise CheckpointError(f"{_short(str(root))}: cannot read ({err.strerror})") from None
    if not found:
        raise CheckpointError(f"{root}: no such checkpoint directory")
    language_model = _language_model(root)
    if language_model:
        raise CheckpointError(language_model)
    files = {}
    for name in (CONFIG, WEIGHTS):
        try:
            files[name] = (root / name).read_bytes()
        except OSError as err:
            raise CheckpointError(f"{root / name}: cannot read ({err.strerror})") from None
    data = CheckpointData(str(root), files[CONFIG], files[WEIGHTS])
    _check_weights(data, _parse_config(data))
    return data


def _language_model(root: Path) -> str | None:
    """What a language-model directory given as a checkpoint is, and how it plays instead
    (None for any other directory): a trained model (its policy.json names its side) or
    the run folder ``agents.lm.train`` writes (the trained model in ``final``)."""
    for model in (root, root / "final"):
        if not (model / LM_POLICY).is_file():
            continue
        try:
            side = json.loads((model / LM_POLICY).read_text()).get("side")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
            side = None
        register = "register it as an entry built by agents.lm.policy.from_directory"
        if side == "seller":
            todo = f"evaluate it with `python -m agents.lm.evaluate --model {model}` or {register}"
        else:
            todo = register
        who = f"language-model {side}" if side in ("seller", "buyer") else "language model"
        if model == root:
            return f"{root}: a {who} ({LM_POLICY}), not an RL checkpoint; {todo}"
        return (
            f"{root}: a language-model training run, not an RL checkpoint; its trained {who} "
            f"is {model}: {todo}"
        )
    return None


def _short(text: str, most: int = 200) -> str:
    """``text`` cut short for a message line."""
    return text if len(text) <= most else f"{text[: most - 50]}... ({len(text)} characters)"


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
    kind = POLICY_CLASSES[cls][0].kind
    if policy["kind"] != kind:
        raise CheckpointError(
            f"{where}: policy.kind: a {cls} is {kind!r}, got {shown(policy['kind'], 60)}"
        )
    if not isinstance(policy["params"], dict) or set(policy["params"]) - _PARAMS[cls]:
        raise CheckpointError(f"{where}: policy params must be among {sorted(_PARAMS[cls])}")
    _check_net(where, cls, policy["net"])
    _check_params(where, cls, policy["params"])
    provenance = meta.get("provenance")
    digest = provenance.get("weights_sha256") if isinstance(provenance, dict) else None
    no_hash = not isinstance(digest, str) or not digest
    if no_hash and (provenance is None or isinstance(provenance, dict)):
        # Nothing to check the weights against: not a mismatch, which would send one
        # looking for tampered weights. (A provenance that is there but no table keeps
        # the mismatch message, as ever.)
        what = "is missing" if digest is None else f"must be a hex string, got {shown(digest, 60)}"
        raise CheckpointError(
            f"{where}: provenance.weights_sha256 {what} (the SHA-256 of {WEIGHTS}, which "
            "reading checks the weights against)"
        )
    if digest != data.weights_sha256:
        raise CheckpointError(
            f"{data.source}/{WEIGHTS}: the weights do not match the hash in {CONFIG}"
        )
    return meta


TRAIN_STATE = "train_state.json"  # what a training folder holds beside its checkpoint


def unfinished(path: str | os.PathLike) -> str | None:
    """``"trained K of N iterations"`` when ``path`` is the folder of a training run that
    stopped before its last iteration (killed, interrupted, ``--stop-after``): its trainer
    state says how far it got and its config how far it was to go. None otherwise (a
    finished run, or a checkpoint without a trainer state, as the shipped ones are)."""
    root = Path(path)
    try:
        done = json.loads((root / TRAIN_STATE).read_text())["iteration"]
        planned = json.loads((root / CONFIG).read_text())["training"]["iterations"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if isinstance(done, int) and isinstance(planned, int) and 0 <= done < planned:
        return f"trained {done} of {planned} iterations"
    return None


def market_problem(data: CheckpointData, config: Any) -> str | None:
    """Why the checkpoint's policy cannot play the markets of ``config`` (a
    ``MarketConfig``), or None if it can: what its class declares through an optional
    ``market_problem(params, config)`` classmethod (``FixedSizeSeller``'s: one market
    size), asked with the checkpoint's params. A class without one plays any market, as
    ``RLSeller`` and ``RLBuyer`` do. A spec asks this of each config before a run, so a
    checkpoint that cannot play one is refused up front, not after a long run."""
    policy = data.meta()["policy"]
    cls = POLICY_CLASSES[policy["class"]][0]
    declared = getattr(cls, "market_problem", None)
    if declared is None:
        return None
    return declared(cls.from_checkpoint_params(policy["params"]), config)


def _check_net(where: str, cls: str, net: Any) -> None:
    """``policy.net``: exactly the fields of the class's net config (those without a
    default required), each of its JSON type, and sizes the config accepts."""
    cfg_cls = POLICY_CLASSES[cls][2]
    fields = dataclasses.fields(cfg_cls)
    required = {f.name for f in fields if f.default is dataclasses.MISSING}
    if not isinstance(net, dict):
        raise CheckpointError(f"{where}: policy.net must be a table of {sorted(_NET_TYPES[cls])}")
    unknown = sorted(set(net) - {f.name for f in fields})
    missing = sorted(required - set(net))
    if unknown or missing:
        what = f"unknown {', '.join(unknown)}" if unknown else f"missing {', '.join(missing)}"
        raise CheckpointError(
            f"{where}: policy.net: {what} (fields: {', '.join(sorted(_NET_TYPES[cls]))})"
        )
    for key, value in net.items():
        if not _json_is(value, _NET_TYPES[cls][key]):
            raise CheckpointError(
                f"{where}: policy.net.{key} must be {_JSON_WORDS[_NET_TYPES[cls][key]]}, "
                f"got {shown(value, 60)}"
            )
    try:
        cfg_cls(**net)
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"{where}: policy.net: {err}") from None


_JSON_WORDS = {
    "int": "a whole number",
    "ints": "a list of whole numbers",
    "bool": "true or false",
    "str": "a string",
}


def _json_is(value: Any, what: str) -> bool:
    if what == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if what == "ints":
        return isinstance(value, list) and all(_json_is(v, "int") for v in value)
    return isinstance(value, bool if what == "bool" else str)


def _check_params(where: str, cls: str, params: dict) -> None:
    """``policy.params``: every number finite, then what the policy class accepts (its
    ``from_checkpoint_params`` checks the types and ranges)."""
    for key, value in params.items():
        for x in value if isinstance(value, list) else [value]:
            if isinstance(x, int | float) and not isinstance(x, bool) and finite_float(x) is None:
                raise CheckpointError(
                    f"{where}: policy.params.{key}: {shown(x, 60)} is not a finite number"
                )
    try:
        POLICY_CLASSES[cls][0].from_checkpoint_params(params)
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"{where}: policy.params: {err}") from None


def _check_weights(data: CheckpointData, meta: dict[str, Any]) -> None:
    """The tensors of ``model.safetensors``: readable, finite, and of the names, shapes
    and dtypes of the network the config describes (built on the meta device: no memory,
    no values). The dtype too: loading casts to the network's, so an F64 value finite
    in the file may be infinite in float32, and integers would pass the finite check."""
    where = f"{data.source}/{WEIGHTS}"
    try:
        tensors = deserialize(data.weights)
    except (SafetensorError, ValueError, TypeError) as err:
        raise CheckpointError(f"{where}: not a safetensors file ({_first_line(err)})") from None
    shapes, dtypes = {}, {}
    for name, info in tensors:
        shapes[name] = tuple(info["shape"])
        dtypes[name] = info["dtype"]
        if info["dtype"] in _EXPONENTS:
            view, bits = _EXPONENTS[info["dtype"]]
            raw = np.frombuffer(info["data"], dtype=view)
            if ((raw & bits) == bits).any():
                raise CheckpointError(f"{where}: tensor {name!r} holds NaN or infinite values")
    with torch.device("meta"):
        net = _policy(data, meta["policy"]).net
    state = net.state_dict()
    want = {k: tuple(v.shape) for k, v in state.items()}
    if shapes != want:
        missing = sorted(set(want) - set(shapes))
        extra = sorted(set(shapes) - set(want))
        if missing or extra:
            detail = f"missing {missing[0]}" if missing else f"unexpected {extra[0]}"
        else:
            key = next(k for k in sorted(want) if want[k] != shapes[k])
            detail = f"{key}: {list(shapes[key])} in the file, {list(want[key])} in the network"
        raise CheckpointError(f"{where}: weights do not fit ({detail})")
    for key in sorted(want):
        dtype = _DTYPE_NAMES.get(state[key].dtype, str(state[key].dtype))
        if dtypes[key] != dtype:
            raise CheckpointError(
                f"{where}: weights do not fit ({key}: {dtypes[key]} in the file, {dtype} "
                "in the network)"
            )


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


def _policy(data: CheckpointData, policy: dict[str, Any], **kwargs: Any) -> RLSeller | RLBuyer:
    """The policy of a checked config, with a fresh network (its weights not loaded).
    The network's initial values are drawn from a fork of torch's generator: building a
    policy leaves the caller's seeded torch stream as it was."""
    cls, net_cls, cfg_cls, _ = POLICY_CLASSES[policy["class"]]
    try:
        with torch.random.fork_rng(devices=[]):
            net = net_cls(cfg_cls(**policy["net"]))
        params = cls.from_checkpoint_params(policy["params"])
        return cls(net, **params, **kwargs)
    except (TypeError, ValueError, RuntimeError) as err:  # RuntimeError: torch's, on sizes
        raise CheckpointError(
            f"{data.source}/{CONFIG}: bad policy config ({_first_line(err)})"
        ) from None


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
    out = _policy(data, meta["policy"], seed=seed, greedy=greedy, **kwargs)
    net = out.net
    try:
        state = load_tensors(data.weights)
        net.load_state_dict(state, strict=True)
    except (SafetensorError, RuntimeError) as err:
        raise CheckpointError(
            f"{data.source}/{WEIGHTS}: weights do not fit ({_first_line(err)})"
        ) from None
    # The network's own tensors, as loading cast them: a value finite in the file's
    # dtype may not be in the network's.
    for name, tensor in net.state_dict().items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise CheckpointError(
                f"{data.source}/{WEIGHTS}: tensor {name!r} holds NaN or infinite values"
            )
    net.eval()
    return out


_SHARED: dict[str, RLSeller | RLBuyer] = {}


def load(path: str | os.PathLike, *, seed: int = 0, greedy: bool = True) -> RLSeller | RLBuyer:
    return build(read_checkpoint(path), seed=seed, greedy=greedy)
