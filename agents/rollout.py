"""Play policies against each other on the batched engine or the scalar reference."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from agents.base import BuyerAction, BuyerPolicy, SellerAction, SellerPolicy
from agents.env import SellerEnv, Step
from arena.dialogue import buyer_message_of, seller_message_of
from arena.engine import BatchedMarket
from arena.generator import MarketBatch, MarketInstance, stack_instances
from arena.market import Market
from arena.messages import BuyerMessage, SellerMessage
from arena.observation import SellerObs


def play_batch(
    batch: MarketBatch,
    seller: SellerPolicy,
    buyer: BuyerPolicy,
    *,
    on_step: Callable[[SellerObs, SellerAction, Step], None] | None = None,
    rewards: bool = False,
    dialogue: bool | np.ndarray = False,
    prompts: bool = False,
) -> BatchedMarket:
    """Play every market of ``batch`` to the end; returns the finished engine.

    A thin loop over ``agents.env.SellerEnv`` (the project's one game loop). The buyer
    policy decides which buyers are agents (``kinds``), so the batch the engine plays may
    differ from ``batch`` in ``is_agent`` only. ``on_step(obs, action, step)`` sees every
    turn (to collect trajectories); ``rewards`` adds the seller's rewards to each step
    (it costs one oracle solve per market).

    ``dialogue``: keep every message as text (``engine.dialogue``; each market's
    transcript is ``engine.dialogue.records(b)``); it is on anyway when either policy
    reads text; a (B,) bool mask keeps it for those markets only (when no policy reads
    text). ``prompts``: also keep what each side was shown before each message."""
    if seller.reads_text or buyer.reads_text:
        dialogue = True
    env = SellerEnv.from_batch(batch, buyer, rewards=rewards, dialogue=dialogue, prompts=prompts)
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
    disclose = buyer.disclose(instance.is_agent[None], keys, stack_instances([instance]))[0]
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
    or the message of its arrays with a canned SAY line, or, for an action no message can
    express, a note that fails to parse (the market counts it as malformed, as the engine
    does). The batched engine's dialogue writes the same (``arena.dialogue``)."""
    if a.texts is not None and a.texts[k] is not None:
        return a.texts[k]
    bad = a.malformed is not None and bool(a.malformed[k])
    return seller_message_of(a.to[k], a.product[k], a.price[k], bad)


def buyer_message(d: BuyerAction, k: int = 0) -> BuyerMessage | str:
    """Row ``k`` of a buyer action as the reference market takes it (see seller_message)."""
    if d.texts is not None and d.texts[k] is not None:
        return d.texts[k]
    bad = d.malformed is not None and bool(d.malformed[k])
    return buyer_message_of(d.decision[k], d.product[k], d.price[k], bad)
