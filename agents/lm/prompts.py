"""What a language model is shown: the rendered observation, and for chat models the rules.

A local model reads ``prompt(obs, b)``: the side's view of market ``b`` (``arena.text``)
followed by a cue line, and writes the four-part message, then its end-of-text token. A
chat model gets ``SYSTEM[side]`` as the system message and the view as the user message.

The seller's prompt includes an analyst's short list computed from public information
(``seller_prompt``; ``agents.lm.analyst``): the full view, then the few best (buyer,
product, price) offers by expected margin from the public signals, costs, stock and the
refusals so far, the best last, just above the cue. It never includes private values.
"""

from __future__ import annotations

from arena.observation import BuyerObs, SellerObs

CUE = {"seller": "Your message:", "buyer": "Your answer:"}

SYSTEM = {
    "seller": (
        "You are a seller in a market. You sell a catalog of substitutable products to "
        "buyers who each buy at most one unit; each buyer's values are private, you see a "
        "noisy signal of them. Every message you send costs one turn of a fixed budget. "
        "Profit is price minus unit cost.\n"
        "Write exactly one message in four tagged parts, each on its own line:\n"
        "THINK: your private reasoning (never shown to the buyer)\n"
        "TO: buyer <index>\n"
        "OFFER: product <index> at <price>   (or: OFFER: none)\n"
        "SAY: what you tell the buyer\n"
        "An offer is binding. Prices are plain decimals inside the price range. A message "
        "that does not follow this form, or names a buyer who has bought or left, a product "
        "out of stock or a price outside the range, wastes the turn."
    ),
    "buyer": (
        "You are a buyer in a market. You buy at most one unit; your values are private. "
        "Your surplus is your value minus the price you pay.\n"
        "Answer the seller with exactly one message in four tagged parts, each on its own "
        "line:\n"
        "THINK: your private reasoning (never shown to the seller)\n"
        "DECISION: accept | reject | counter\n"
        "OFFER: none   (a counter names its binding bid: OFFER: product <index> at <price>)\n"
        "SAY: what you tell the seller\n"
        "Accepting buys the offered product at the offered price. A counter is a binding bid: "
        "a later offer of that product at or below your bid trades at once."
    ),
}


def side_of(obs: SellerObs | BuyerObs) -> str:
    return "seller" if isinstance(obs, SellerObs) else "buyer"


def prompt(obs: SellerObs | BuyerObs, b: int) -> str:
    """The text a local model continues for market ``b`` (the view alone)."""
    return f"{obs.text(b)}\n{CUE[side_of(obs)]}\n"


def seller_prompt(obs: SellerObs, b: int, note: str) -> str:
    """A seller's prompt for market ``b``: the view, the analyst's ``note`` (when there is
    one: ``agents.lm.analyst``), the cue."""
    if not note:
        return prompt(obs, b)
    return f"{obs.text(b)}\n{note}\n{CUE['seller']}\n"


def chat_messages(obs: SellerObs | BuyerObs, b: int) -> list[dict[str, str]]:
    """The chat request's messages for market ``b``."""
    return [
        {"role": "system", "content": SYSTEM[side_of(obs)]},
        {"role": "user", "content": obs.text(b)},
    ]
