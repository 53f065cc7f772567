"""A checkpoint's weights as the network holds them: tensors of another dtype than the
network's are refused by name, and the finite check runs on what loading made of them
(an F64 value finite in the file can be infinite in float32)."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from agents.rl import checkpoint
from agents.rl.policies import RLBuyer, RLSeller


def _saved(tmp_path, policy):
    torch.manual_seed(0)
    return checkpoint.save(tmp_path / "ck", policy, name="ck")


def _retyped(folder, change) -> bytes:
    """The folder's weights changed by ``change`` (name, tensor -> tensor), written back
    with the config's hash to match: what only the weights' checks can refuse."""
    tensors = load_tensors((folder / checkpoint.WEIGHTS).read_bytes())
    weights = save_tensors({k: change(k, v) for k, v in tensors.items()})
    (folder / checkpoint.WEIGHTS).write_bytes(weights)
    config = json.loads((folder / checkpoint.CONFIG).read_text())
    config["provenance"]["weights_sha256"] = hashlib.sha256(weights).hexdigest()
    (folder / checkpoint.CONFIG).write_text(json.dumps(config))
    return weights


def _huge(name, tensor):
    if name != "pair_head.weight":
        return tensor
    wide = tensor.double()
    wide[0, 0] = 1e300  # finite as F64, infinite as float32
    return wide


@pytest.mark.parametrize(
    ("policy", "change", "words"),
    [
        (lambda: RLSeller(hidden=8), _huge, "pair_head.weight: F64 in the file, F32 in"),
        (lambda: RLSeller(hidden=8), lambda k, v: v.to(torch.int64), ": I64 in the file"),
        (lambda: RLBuyer(hidden=8), lambda k, v: v.half(), ": F16 in the file, F32 in"),
    ],
)
def test_weights_of_another_dtype_than_the_networks_are_refused(tmp_path, policy, change, words):
    folder = _saved(tmp_path, policy())
    _retyped(folder, change)
    with pytest.raises(checkpoint.CheckpointError, match=words) as err:
        checkpoint.load(folder)
    assert str(err.value).startswith(f"{folder}/{checkpoint.WEIGHTS}: weights do not fit (")
    assert "\n" not in str(err.value)


def test_building_checks_the_loaded_parameters_not_the_files_tensors(tmp_path):
    """Bytes handed to ``build`` directly (as a worker gets them) skip the file's checks:
    the parameters, as loading cast them, are what must be finite."""
    folder = _saved(tmp_path, RLSeller(hidden=8))
    weights = _retyped(folder, _huge)
    config = (folder / checkpoint.CONFIG).read_bytes()
    data = checkpoint.CheckpointData(str(folder), config, weights)
    with pytest.raises(checkpoint.CheckpointError, match="'pair_head.weight' holds NaN or inf"):
        checkpoint.build(data)


def test_the_shipped_checkpoints_weights_are_the_networks_dtype():
    for name in ("rl_seller", "rl_buyer"):
        policy = checkpoint.load(f"agents/rl/checkpoints/{name}")
        assert {v.dtype for v in policy.net.state_dict().values()} == {torch.float32}
