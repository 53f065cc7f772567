"""Agents hosted in their own Ray actors.

Cheap agents (scripted, small torch nets) live inside the match worker that
steps their markets. An expensive agent (a language model on a GPU) gets one
``PolicyHost`` actor shared by every worker; a worker talks to it through a
``RemoteSeller`` / ``RemoteBuyer`` proxy, one call per decision for the whole
batch of markets the worker steps (an actor call costs about a millisecond, so
batching is what makes this affordable).

The host keeps one policy instance per session (a worker's unit of work), so
stateful policies see exactly the calls they would see in-process, and results
do not depend on where an agent is hosted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from agents import registry
from agents.base import BuyerAction, BuyerPolicy, SellerAction, SellerPolicy


class PolicyHost:
    """Hosts policies of one entry, one per session. Used as a Ray actor."""

    def __init__(self, side: str, spec: str, checkpoints: tuple = ()) -> None:
        self.side = side
        self.spec = spec
        for data in checkpoints:  # checkpoint entries, as bytes from the driver
            registry.register_checkpoint(data)
        self.sessions: dict[str, SellerPolicy | BuyerPolicy] = {}
        template = self._build(0)
        self.info = {
            "kind": template.kind,
            "sees_private": getattr(template, "sees_private", False),
            "reads_text": getattr(template, "reads_text", False),
        }

    def _build(self, seed: int):
        if self.side == "seller":
            return registry.make(self.spec, "seller", seed=seed)
        return registry.make_buyers(self.spec, seed=seed)

    def describe(self) -> dict:
        return self.info

    def open(self, session: str, seed: int) -> None:
        self.sessions[session] = self._build(seed)

    def close(self, session: str) -> None:
        self.sessions.pop(session, None)

    def call(self, session: str, method: str, *args):
        return getattr(self.sessions[session], method)(*args)


def _get(ref):
    import ray

    return ray.get(ref)


@dataclass
class _Remote:
    host: object  # a Ray actor handle of PolicyHost
    session: str
    seed: int
    info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        _get(self.host.open.remote(self.session, self.seed))
        self.info = _get(self.host.describe.remote())
        self.kind = self.info["kind"]
        self.sees_private = self.info["sees_private"]
        self.reads_text = self.info.get("reads_text", False)

    def _call(self, method: str, *args):
        return _get(self.host.call.remote(self.session, method, *args))

    def reset(self, batch_size: int) -> None:
        self._call("reset", batch_size)

    def restart(self, rows: np.ndarray) -> None:
        self._call("restart", rows)

    def close(self) -> None:
        _get(self.host.close.remote(self.session))


@dataclass
class RemoteSeller(_Remote, SellerPolicy):
    def reveal(self, batch, rows=None) -> None:
        self._call("reveal", batch, rows)

    def act(self, obs) -> SellerAction:
        return self._call("act", obs)


@dataclass
class RemoteBuyer(_Remote, BuyerPolicy):
    def kinds(self, is_agent: np.ndarray, key: np.ndarray) -> np.ndarray:
        return self._call("kinds", is_agent, key)

    def disclose(self, is_agent: np.ndarray, key: np.ndarray, market=None) -> np.ndarray:
        return self._call("disclose", is_agent, key, market)

    def act(self, obs) -> BuyerAction:
        return self._call("act", obs)
