"""Play policies against each other on the batched engine or the scalar reference."""

from __future__ import annotations

import dataclasses

import numpy as np

from agents.base import BuyerPolicy, SellerPolicy
from arena.engine import BatchedMarket
from arena.generator import MarketBatch, MarketInstance, stack_instances
from arena.market import Market
from arena.messages import BuyerMessage, Decision, Offer, SellerMessage
from arena.observation import ACCEPT, COUNTER, REJECT


def play_batch(batch: MarketBatch, seller: SellerPolicy, buyer: BuyerPolicy) -> BatchedMarket:
    """Play every market of ``batch`` to the end; returns the finished engine.

    The buyer policy decides which buyers are agents (``kinds``), so the batch the
    engine plays may differ from ``batch`` in ``is_agent`` only."""
    batch = with_buyer_kinds(batch, buyer)
    disclose = buyer.disclose(batch.is_agent, batch.keys)
    engine = BatchedMarket(batch, disclose)
    seller.reset(batch.size)
    if seller.sees_private:
        seller.reveal(batch)
    buyer.reset(batch.size)
    while not engine.all_done:
        a = seller.act(engine.seller_observation())
        prompt = engine.offer(a.to, a.product, a.price, a.malformed)
        if prompt is not None:
            d = buyer.act(prompt)
            engine.answer(d.decision, d.product, d.price, d.malformed)
    return engine


def with_buyer_kinds(batch: MarketBatch, buyer: BuyerPolicy) -> MarketBatch:
    """The batch with ``is_agent`` as the buyer policy plays it."""
    kinds = np.asarray(buyer.kinds(batch.is_agent, batch.keys), bool)
    if np.array_equal(kinds, batch.is_agent):
        return batch
    kinds.flags.writeable = False
    return dataclasses.replace(batch, is_agent=kinds)


def play_reference(instance: MarketInstance, seller: SellerPolicy, buyer: BuyerPolicy) -> Market:
    """Play one market on the scalar reference, the policies deciding a batch of one."""
    keys = np.array([instance.key], np.uint64)
    kinds = buyer.kinds(instance.is_agent[None], keys)[0]
    kinds.flags.writeable = False
    instance = dataclasses.replace(instance, is_agent=kinds)
    disclose = buyer.disclose(instance.is_agent[None], keys)[0]
    market = Market(instance, disclose=disclose)
    seller.reset(1)
    if seller.sees_private:
        seller.reveal(stack_instances([instance]))
    buyer.reset(1)
    while not market.done:
        a = seller.act(market.seller_observation())
        who = market.offer(_seller_message(a))
        if who is not None:
            market.answer(_buyer_message(buyer.act(market.buyer_observation())))
    return market


def _seller_message(a) -> SellerMessage | str:
    if a.texts is not None:
        return a.texts[0]
    if a.malformed is not None and a.malformed[0]:
        return ""
    to, product, price = int(a.to[0]), int(a.product[0]), float(a.price[0])
    try:
        return SellerMessage(to=to, offer=None if product == -1 else Offer(product, price))
    except ValueError:
        # Negative indices or prices have no message form; as text they fail to parse,
        # which the market counts as a violation like the engine does.
        return f"TO: buyer {to}\nOFFER: product {product} at {price}"


def _buyer_message(d) -> BuyerMessage | str:
    if d.texts is not None:
        return d.texts[0]
    code = int(d.decision[0])
    if (d.malformed is not None and d.malformed[0]) or code not in (REJECT, ACCEPT, COUNTER):
        return ""
    decision = (Decision.REJECT, Decision.ACCEPT, Decision.COUNTER)[code]
    if decision is not Decision.COUNTER:
        return BuyerMessage(decision)
    try:
        return BuyerMessage(decision, Offer(int(d.product[0]), float(d.price[0])))
    except ValueError:
        return f"DECISION: counter\nOFFER: product {int(d.product[0])} at {float(d.price[0])}"
