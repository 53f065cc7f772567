"""Play policies against each other on the batched engine or the scalar reference."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from agents.base import BuyerAction, BuyerPolicy, SellerAction, SellerPolicy
from agents.env import SellerEnv, Step
from arena.engine import BatchedMarket
from arena.generator import MarketBatch, MarketInstance, stack_instances
from arena.market import Market
from arena.messages import BuyerMessage, Decision, Offer, SellerMessage
from arena.observation import SellerObs


def play_batch(
    batch: MarketBatch,
    seller: SellerPolicy,
    buyer: BuyerPolicy,
    *,
    on_step: Callable[[SellerObs, SellerAction, Step], None] | None = None,
    rewards: bool = False,
) -> BatchedMarket:
    """Play every market of ``batch`` to the end; returns the finished engine.

    A thin loop over ``agents.env.SellerEnv`` (the project's one game loop). The buyer
    policy decides which buyers are agents (``kinds``), so the batch the engine plays may
    differ from ``batch`` in ``is_agent`` only. ``on_step(obs, action, step)`` sees every
    turn (to collect trajectories); ``rewards`` adds the seller's rewards to each step
    (it costs one oracle solve per market)."""
    env = SellerEnv.from_batch(batch, buyer, rewards=rewards)
    obs = env.reset()
    seller.reset(batch.size)
    if seller.sees_private:
        seller.reveal(env.batch)
    while not env.engine.all_done:
        action = seller.act(obs)
        step = env.step(action)
        if on_step is not None:
            on_step(obs, action, step)
        obs = step.obs
    return env.engine


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
        who = market.offer(seller_message(a))
        if who is not None:
            market.answer(buyer_message(buyer.act(market.buyer_observation())))
    return market


def seller_message(a: SellerAction, k: int = 0) -> SellerMessage | str:
    """Row ``k`` of a seller action as the reference market takes it: the agent's own text,
    a message, or, for an action no message can express, a note that fails to parse (the
    market counts it as malformed, as the engine does)."""
    if a.texts is not None:
        return a.texts[k]
    if a.malformed is not None and a.malformed[k]:
        return ""
    try:
        to, product, price = _whole(a.to[k]), _whole(a.product[k]), float(a.price[k])
        return SellerMessage(to=to, offer=None if product == -1 else Offer(product, price))
    except (TypeError, ValueError, OverflowError):
        return f"(no message form: to={a.to[k]!r}, product={a.product[k]!r}, price={a.price[k]!r})"


def buyer_message(d: BuyerAction, k: int = 0) -> BuyerMessage | str:
    """Row ``k`` of a buyer action as the reference market takes it (see seller_message)."""
    if d.texts is not None:
        return d.texts[k]
    if d.malformed is not None and d.malformed[k]:
        return ""
    try:
        code = _whole(d.decision[k])
        decision = (Decision.REJECT, Decision.ACCEPT, Decision.COUNTER)[code] if code >= 0 else None
        if decision is None:
            raise ValueError(code)
        if decision is not Decision.COUNTER:
            return BuyerMessage(decision)
        return BuyerMessage(decision, Offer(_whole(d.product[k]), float(d.price[k])))
    except (TypeError, ValueError, OverflowError, IndexError):
        return (
            f"(no message form: decision={d.decision[k]!r}, product={d.product[k]!r}, "
            f"price={d.price[k]!r})"
        )


def _whole(x) -> int:
    """An exact integer, or ValueError (1.5, nan and 'x' are not buyer or product numbers)."""
    f = float(x)
    if not f.is_integer():
        raise ValueError(x)
    return int(f)
