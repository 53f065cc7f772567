"""The analyst's short list: what a human analyst would hand a seller, from public information.

A language-model seller's prompt ends with a short note (``Analyst.notes``) that ranks the
few best (buyer, product, price) offers by expected margin, as the scripted greedy matcher
computes them (``GreedyMatcher.pair_table``) from what the seller may see: the public
signals, the costs, the stock, the refusals so far (a refused price is never asked again,
nor any higher one) and standing bids. Private values never enter it. The best offer is
written last, just above the cue, where the model writes its message::

    Analyst's short list (public information only; best last):
    3rd: buyer 4, product 0 at 61.10, expected margin 20.3
    2nd: buyer 5, product 2 at 70.00, expected margin 28.4
    1st: buyer 0, product 2 at 73.14, expected margin 31.2

The analyst remembers refusals per batch row (as the greedy matcher does), so it is reset
and restarted with the policy that holds it, and asked once per turn for every row.
``narrate`` writes a teacher's move as the message the model learns to write: the THINK
line names the analyst's rank of the move (or says it is the teacher's own), then TO,
OFFER (its price with two decimals, as the list writes it: ``cents``) and a short SAY.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from agents.base import SellerAction, SellerPolicy
from agents.scripted.sellers import GreedyMatcher
from agents.text import seller_action
from arena.messages import Offer, SellerMessage
from arena.observation import SellerObs
from arena.protocol import render
from arena.text import num

HEADER = "Analyst's short list (public information only; best last):"
RANKS = ("1st", "2nd", "3rd", "4th", "5th", "6th", "7th", "8th", "9th")
SAY = "A good offer for you."
OWN = "my own move"


@dataclass(frozen=True)
class ShortList:
    """Per market row, the ``top`` best open pairs by expected margin (best first); rows
    with fewer open pairs are padded with buyer -1."""

    buyer: np.ndarray  # (B, K)
    product: np.ndarray  # (B, K)
    price: np.ndarray  # (B, K)
    margin: np.ndarray  # (B, K)

    def note(self, b: int) -> str:
        """The note of row ``b`` (empty when no pair is open)."""
        lines = []
        for k in range(self.buyer.shape[1]):
            if self.buyer[b, k] < 0:
                break
            lines.append(
                f"{RANKS[k]}: buyer {int(self.buyer[b, k])}, product {int(self.product[b, k])} "
                f"at {cents(self.price[b, k])}, expected margin {num(self.margin[b, k], 1)}"
            )
        if not lines:
            return ""
        return "\n".join([HEADER, *reversed(lines)])

    def rank(self, b: int, to: int, product: int, price: float) -> int:
        """The rank (0 best) of an offer on row ``b``'s list, -1 when it is not on it."""
        for k in range(self.buyer.shape[1]):
            same = (int(self.buyer[b, k]), int(self.product[b, k])) == (to, product)
            if same and num(self.price[b, k]) == num(price):
                return k
        return -1


@dataclass
class Analyst:
    """Computes the short list each turn; remembers refusals per row."""

    top: int = 3
    """Offers listed (the best ``top`` open pairs)."""
    table: GreedyMatcher = field(default_factory=GreedyMatcher, repr=False)

    def __post_init__(self) -> None:
        if not 1 <= self.top <= len(RANKS):
            raise ValueError(f"analyst top must be 1..{len(RANKS)}, got {self.top}")

    def reset(self, batch_size: int) -> None:
        self.table.reset(batch_size)

    def restart(self, rows: np.ndarray) -> None:
        self.table.restart(rows)

    def short_list(self, obs: SellerObs) -> ShortList:
        """This turn's list for every row (call once per turn, before the move)."""
        value, price = self.table.pair_table(obs)
        b, n, m = value.shape
        flat = value.reshape(b, n * m)
        # A stable sort keeps the greedy matcher's tie order (lowest buyer, then product),
        # so the 1st choice is exactly the matcher's move.
        order = np.argsort(-flat, axis=1, kind="stable")[:, : self.top]
        k = order.shape[1]
        top_value = np.take_along_axis(flat, order, axis=1)
        open_ = np.isfinite(top_value)
        pad = self.top - k
        buyer = np.where(open_, order // m, -1)
        product = np.where(open_, order % m, -1)
        chosen = np.take_along_axis(price.reshape(b, n * m), order, axis=1)
        out = [buyer, product, np.where(open_, chosen, np.nan), np.where(open_, top_value, np.nan)]
        if pad:
            fill = [-1, -1, np.nan, np.nan]
            out = [
                np.pad(a, ((0, 0), (0, pad)), constant_values=f)
                for a, f in zip(out, fill, strict=True)
            ]
        return ShortList(*out)


def cents(price: float) -> str:
    """A price with exactly two decimals (``80.00``, ``9.50``), in the short list and in the
    narrated messages alike: one shape for every price is easier to copy than the views'
    shortest form (``80``, ``61.3``, ``61.23``), which a tiny model gets wrong on the rarer
    shapes. The protocol reads both forms as the same price."""
    return f"{round(float(price), 2):.2f}"


def narrate(to: int, product: int, price: float, rank: int) -> str:
    """A move as the four-part message the model learns to write (the canonical rendering,
    the price written with two decimals: ``cents``)."""
    think = f"the analyst's {RANKS[rank]} choice" if rank >= 0 else OWN
    offer = None if product < 0 else Offer(int(product), float(num(price)))
    return render(SellerMessage(to=int(to), offer=offer, say=SAY, think=think), price=cents)


@dataclass(eq=False)
class NarratedTeacher(SellerPolicy):
    """A teacher seller whose moves are written as the model's messages, keeping for every
    live row the prompt a language-model seller would see and the message written
    (``records``: dicts with ``market`` (row), ``turn``, ``prompt``, ``completion``).

    The action comes from parsing those texts, as a model's would, so the conversation the
    next prompt shows holds these very messages. A teacher that reads the buyers' private
    values is refused: they are not handed on (the model never sees them)."""

    teacher: SellerPolicy
    analyst: Analyst = field(default_factory=Analyst)
    records: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        if getattr(self.teacher, "sees_private", False):
            raise ValueError(
                f"{type(self.teacher).__name__} reads the buyers' private values, which a "
                "narrated teacher does not hand on: narrate a seller that plays from public "
                "information"
            )
        self.kind = self.teacher.kind

    @property
    def reads_text(self) -> bool:  # the prompts need the dialogue
        return True

    def reset(self, batch_size: int) -> None:
        self.teacher.reset(batch_size)
        self.analyst.reset(batch_size)

    def restart(self, rows: np.ndarray) -> None:
        self.teacher.restart(rows)
        self.analyst.restart(rows)

    def act(self, obs: SellerObs) -> SellerAction:
        from agents.lm.prompts import seller_prompt

        short = self.analyst.short_list(obs)
        move = self.teacher.act(obs)
        texts = [""] * obs.batch_size
        for b in np.flatnonzero(~obs.done):
            to, j, p = int(move.to[b]), int(move.product[b]), float(move.price[b])
            texts[b] = narrate(to, j, p, short.rank(b, to, j, p))
            self.records.append(
                {
                    "market": int(b),
                    "turn": int(obs.turn[b]),
                    "prompt": seller_prompt(obs, b, short.note(b)),
                    "completion": texts[b],
                }
            )
        return seller_action(texts)[0]
