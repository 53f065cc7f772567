"""Buyer populations: several buyer policies sharing the buyers of each market.

Two ways to write one (``--buyers`` on the command line, ``buyers`` in a spec):

* by share, ``noisy_human:0.5,strategic:0.5``: in every market the N buyers are
  split in those shares (largest-remainder rounding, so the counts add up to N)
  and the slots are dealt out in an order drawn from the market key. Each
  buyer's kind is its member's kind.
* by kind, ``human=noisy_human,agent=strategic``: the market's drawn kinds
  (``agent_share`` of the config) decide, and each kind is played by its member.

Assignment is a pure function of (market key, N), so a population is batch-
invariant and every pairing of a tournament deals the same slots.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from agents.base import AGENT, HUMAN, BuyerAction, BuyerPolicy
from arena.noise import hash64
from arena.observation import BuyerObs

_DEAL_STREAM = 0x5EED


@dataclass
class Population(BuyerPolicy):
    """Members and their shares (share mode) or a human and an agent member (kind mode)."""

    members: list[BuyerPolicy]
    shares: list[float] | None = None  # None: kind mode, members = [human, agent]
    names: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.members:
            raise ValueError("a population needs at least one member")
        if self.shares is None:
            if len(self.members) != 2:
                raise ValueError("a population by kind has exactly a human and an agent member")
            self.kind = "mixed"
            return
        shares = np.asarray(self.shares, float)
        if shares.shape != (len(self.members),) or not np.all(np.isfinite(shares)):
            raise ValueError("a population needs one finite share per member")
        if np.any(shares <= 0) or abs(shares.sum() - 1.0) > 1e-6:
            raise ValueError(f"population shares must be positive and sum to 1, got {self.shares}")
        kinds = {m.kind for m in self.members}
        self.kind = kinds.pop() if len(kinds) == 1 else "mixed"

    # -------------------------------------------------------------- assignment
    def assign(self, is_agent: np.ndarray, key: np.ndarray) -> np.ndarray:
        """(B, N) the member index that plays each buyer."""
        is_agent = np.asarray(is_agent, bool)
        if self.shares is None:
            return is_agent.astype(np.int64)
        _, n = is_agent.shape
        counts = _largest_remainder(np.asarray(self.shares), n)
        member_of_rank = np.repeat(np.arange(len(counts)), counts)  # (N,)
        order = hash64(np.asarray(key, np.uint64)[:, None], np.arange(n), _DEAL_STREAM)
        rank = np.argsort(np.argsort(order, axis=1, kind="stable"), axis=1, kind="stable")
        return member_of_rank[rank]

    def kinds(self, is_agent: np.ndarray, key: np.ndarray) -> np.ndarray:
        if self.shares is None:
            return np.asarray(is_agent, bool).copy()
        member_is_agent = np.array([m.kind == AGENT for m in self.members])
        return member_is_agent[self.assign(is_agent, key)]

    def disclose(self, is_agent: np.ndarray, key: np.ndarray, market=None) -> np.ndarray:
        who = self.assign(is_agent, key)
        out = np.zeros(np.shape(is_agent), bool)
        for k, member in enumerate(self.members):
            out |= (who == k) & member.disclose(is_agent, key, market)
        return out

    @property
    def reads_text(self) -> bool:
        """A population with a member that reads the dialogue needs the market to keep it."""
        return any(getattr(m, "reads_text", False) for m in self.members)

    # -------------------------------------------------------------- play
    def reset(self, batch_size: int) -> None:
        for member in self.members:
            member.reset(batch_size)

    def restart(self, rows: np.ndarray) -> None:
        for member in self.members:
            member.restart(rows)

    def act(self, obs: BuyerObs) -> BuyerAction:
        if self.shares is None:
            who = obs.is_agent.astype(np.int64)
        else:
            n = obs.num_buyers
            table = self.assign(np.zeros((obs.batch_size, n), bool), obs.key)
            who = table[np.arange(obs.batch_size), obs.buyer]
        decision = np.zeros(obs.batch_size, np.int64)
        product = np.zeros(obs.batch_size, np.int64)
        price = np.zeros(obs.batch_size)
        malformed = np.zeros(obs.batch_size, bool)
        texts: list[str | None] | None = None  # members that write text keep their words
        for k, member in enumerate(self.members):
            # Every member decides every row, even where it plays no buyer: skipping it would
            # make a stateful member's history depend on the other markets of the batch.
            rows = who == k
            a = member.act(obs)
            decision = np.where(rows, a.decision, decision)
            product = np.where(rows, a.product, product)
            price = np.where(rows, a.price, price)
            if a.malformed is not None:
                malformed |= rows & a.malformed
            if a.texts is not None:
                texts = texts if texts is not None else [None] * obs.batch_size
                for r in np.flatnonzero(rows):
                    texts[r] = a.texts[r]
        return BuyerAction(
            decision, product, price, malformed if malformed.any() else None, texts=texts
        )


def _largest_remainder(shares: np.ndarray, n: int) -> np.ndarray:
    raw = shares * n
    counts = np.floor(raw).astype(np.int64)
    short = n - counts.sum()
    # Ties in the remainders go to the earlier member, so the split is deterministic.
    order = np.argsort(-(raw - counts), kind="stable")
    counts[order[:short]] += 1
    return counts


__all__ = ["Population", "HUMAN", "AGENT"]
