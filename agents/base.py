"""The policy protocol: one call decides for a batch of B markets.

Scripted, torch and language-model policies all implement it. A policy gets
the observation arrays of ``arena.observation`` and returns an action of
arrays. Randomness comes from ``arena.noise`` keyed by (policy seed, market
key, turn, buyer), never from global or per-call generator state, so a policy
decides a market the same way whether it sees it alone or among 4,096, and
whatever the order of play.

Stateful policies (one that learns within an episode) keep their state in
arrays indexed by batch row and reset it in ``reset``.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

import numpy as np

from arena.generator import MarketBatch
from arena.observation import BuyerObs, SellerObs

HUMAN, AGENT = "human", "agent"


def is_entry_name(name: object) -> bool:
    """Whether ``name`` can name an entry read from a file (a checkpoint's or a language
    model's): a non-empty string with none of the characters that specs, match ids and
    paths give a meaning (``| # / \\ , : =`` and blanks), not starting with a dot."""
    return (
        isinstance(name, str)
        and bool(name)
        and not any(c in name for c in "|#/\\,:= ")
        and not name.startswith(".")
    )


@dataclass(frozen=True, eq=False)
class SellerAction:
    """One seller message per market: TO ``to``, OFFER ``product`` at ``price``."""

    to: np.ndarray  # (B,) buyer index
    product: np.ndarray  # (B,) product index, -1: a talk turn without an offer
    price: np.ndarray  # (B,)
    malformed: np.ndarray | None = None  # (B,) the message text did not parse
    # The messages as written, for agents that write text (``agents.text`` makes the arrays
    # from them); None in a row whose message is the arrays' (a mixed batch).
    texts: list[str | None] | None = None


@dataclass(frozen=True, eq=False)
class BuyerAction:
    """One answer per market: ``decision`` 0 reject, 1 accept, 2 counter (with a bid)."""

    decision: np.ndarray  # (B,)
    product: np.ndarray  # (B,) product of the counter bid (ignored otherwise)
    price: np.ndarray  # (B,) price of the counter bid
    malformed: np.ndarray | None = None
    texts: list[str | None] | None = None


class SellerPolicy(abc.ABC):
    """Decides one message per market for a batch of markets."""

    side = "seller"
    kind = AGENT
    sees_private = False  # True only for labelled references that read private values
    # True for policies that read the dialogue (``obs.text(b)``): markets they play keep it.
    reads_text = False

    def reset(self, batch_size: int) -> None:  # noqa: B027 - most policies are stateless
        """Start a new batch of episodes (clear any per-market state)."""

    def restart(self, rows: np.ndarray) -> None:  # noqa: B027 - stateless policies need none
        """Rows (a (B,) bool mask) whose markets start afresh in the middle of a batch (an
        environment's per-row reset): forget what the policy remembers about them. The
        conformance check holds every policy to playing a restarted row as a fresh one."""

    def reveal(self, batch: MarketBatch, rows: np.ndarray | None = None) -> None:  # noqa: B027
        """Called after ``reset`` (all rows) or ``restart`` (``rows``) with the full
        instances, for ``sees_private`` policies only."""

    @abc.abstractmethod
    def act(self, obs: SellerObs) -> SellerAction: ...


class BuyerPolicy(abc.ABC):
    """Answers for the buyer each market asks, for a batch of markets."""

    side = "buyer"
    kind = HUMAN
    reads_text = False  # see SellerPolicy.reads_text

    def reset(self, batch_size: int) -> None:  # noqa: B027
        """Start a new batch of episodes."""

    def restart(self, rows: np.ndarray) -> None:  # noqa: B027
        """Rows (a (B,) bool mask) whose markets start afresh; see ``SellerPolicy.restart``."""

    def kinds(self, is_agent: np.ndarray, key: np.ndarray) -> np.ndarray:
        """(B, N) which buyers are agents when this policy plays them. One policy plays
        one kind; a population decides per buyer (the drawn ``is_agent`` is used only by
        populations split by kind)."""
        return np.full(np.shape(is_agent), self.kind == AGENT)

    def disclose(
        self, is_agent: np.ndarray, key: np.ndarray, market: MarketBatch | None = None
    ) -> np.ndarray:
        """Under the voluntary rule: which of its buyers (B, N) tell the seller they are
        agents, decided before the market starts. ``market`` (when given) holds what a
        buyer may use to decide: the public catalog, N, T, the price range, and each
        buyer's own values (row i for buyer i; a policy must not read another buyer's).
        The market ignores the wish of a human buyer."""
        return np.zeros(np.shape(is_agent), bool)

    @abc.abstractmethod
    def act(self, obs: BuyerObs) -> BuyerAction: ...


def offered_value(obs: BuyerObs) -> np.ndarray:
    """(B,) the answering buyer's value for the product offered (nan without an offer)."""
    j = obs.offer_product
    v = np.take_along_axis(obs.values, np.maximum(j, 0)[:, None], axis=1)[:, 0]
    return np.where(j >= 0, v, np.nan)
