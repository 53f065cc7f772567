"""Training configs (TOML) for ``arena train``: the learner, its opponents, its markets.

A file::

    [train]                      # TrainConfig fields (documented below), all optional
    side = "seller"
    name = "rl_seller"
    iterations = 300

    [[opponents]]                # the pool: registry names, populations, checkpoint dirs
    name = "truthful"
    weight = 1.0

    [family]                     # the config family (see ConfigFamily)
    configs = ["retail", "wholesale"]
    disclosure = ["hidden", "mandatory"]
    agent_share = [0.0, 1.0]

    [family.jitter]              # a uniform offset per batch, per field
    value_correlation = [-0.15, 0.15]
    buyers = [-2, 2]

    [family.config_jitter.retail] # optional: other ranges for one base config's batches
    buyers = [-2, 6]

    [markets.retail]             # the base configs (MarketConfig schema)
    buyers = 8
    ...

Checkpoint paths in ``[[opponents]]``, ``train.init`` and ``train.teachers`` are relative
to the file. Every ``[[opponents]]`` name is built when the file is read (an unknown name
or a missing checkpoint is an error naming the file and the table, before a run writes
anything), and a buyer population split by kind must meet both kinds in some market the
family can draw (``ConfigFamily.kind_ends``).

A file may start from another one and name only what differs::

    extends = "../seller.toml"   # relative to this file
    [train]
    film = true                  # [train] keys override the other file's one by one

``[train]`` and ``[family]`` are merged key by key (``[family.jitter]`` and each
``[family.config_jitter.NAME]`` field by field: a file that names ``turns = [-4, 2]``
there keeps the other file's configs, rules, price scale and other jitter ranges), and
each ``[markets.NAME]`` field by field (a new NAME adds a config); ``[[opponents]]``,
where given, replaces the other file's list. Paths taken over from the other file keep
pointing where they pointed there.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from agents.base import is_entry_name
from agents.env import check_kinds, split_rows
from arena import limits
from arena.config import DISCLOSURE_RULES, MarketConfig, finite_float, read_toml
from arena.rewards import VIOLATION_PENALTY
from arena.words import shown

SIDES = ("seller", "buyer")
# Options that one side's trainer reads and the other's never does.
SELLER_ONLY = (
    "steps",
    "gamma",
    "gae_lambda",
    "penalty",
    "film",
    "pooled",
    "prior_feature",
    "plan_feature",
    "signal_prior",
    "assignment",
    "within_plan",
    "imitate",
    "imitation_iterations",
    "imitation_epochs",
    "imitation_lr",
    "imitation_smoothing",
    "imitation_spread",
    "imitation_patience",
    "imitation_spare",
    "expert_coef",
    "expert_configs",
    "expert_opponents",
    "expert_pull",
    "expert_spare",
    "ref_coef",
    "teachers",
    "teacher_coef",
    "teacher_coefs",
)
BUYER_ONLY = ("learned_disclosure", "bid_to_offer", "team_return")
_INT_FIELDS = ("buyers", "products", "turns", "patience")
_FLOAT_FIELDS = (
    "value_correlation",
    "quality_spread",
    "wealth_spread",
    "cost_level",
    "signal_noise",
)
MAX_THREADS = 256
"""``train.threads`` at most: torch aborts on a count far past what a machine runs."""
MAX_HIDDEN = 4096
"""``train.hidden`` at most (the shipped networks are 48 wide)."""
MAX_SEED = 2**64 - 1
"""``train.seed`` at most: torch's generators take 64-bit seeds."""
MAX_STEPS = 1_000_000
"""``train.steps`` at most (as many turns as a market may have)."""
MAX_MINIBATCHES = 1_000_000
"""``train.minibatches`` at most."""
TRAIN_MEMORY = 8 << 30
"""Bytes a run's batch may need (``TrainConfig.market_bytes`` each): a run larger is
refused when its config is read, not killed for memory once it has started."""
STEP_BYTES_PER_PAIR = 256
"""Per market, (buyer, product) pair and rollout step: the features a rollout keeps."""
ACTIVATION_BYTES_PER_WIDTH = 32
"""Per market, pair, step and unit of ``train.hidden``, over ``train.minibatches``: the
activations an update keeps for its backward pass (measured: a seller run of 512
markets of 16 buyers x 8 products and 20 turns peaks at about 256 + 32 x hidden / 2
bytes per market, pair and step)."""
EVAL_CHUNK = 1024
"""Markets an evaluation plays at once (``agents.evaluate.play_markets``)."""


@dataclass(frozen=True)
class Opponent:
    name: str
    """A registry name, a population (``a:0.5,b:0.5`` or ``human=a,agent=b``) or a
    checkpoint directory."""
    weight: float = 1.0
    """Share of every batch's rows this opponent plays."""


@dataclass(frozen=True)
class ConfigFamily:
    """The markets a learner trains on. Each batch draws one base config (uniformly),
    adds to each jittered field a uniform offset from its range (whole numbers for
    buyers, products, turns and patience; results kept valid: at least 1 buyer, product
    and turn, correlation in [0, 1], spreads and noise >= 0, cost level in [0, 0.95]),
    scales the price range by a log-uniform factor from ``price_scale``, and draws the
    disclosure rule (uniformly from ``disclosure``) and the agent share (uniform in
    ``agent_share``)."""

    configs: tuple[tuple[str, MarketConfig], ...]
    """Named base configs."""
    disclosure: tuple[str, ...] = ("hidden",)
    """Rules drawn per batch (``mandatory`` teaches the seller what the flag means)."""
    agent_share: tuple[float, float] | None = None
    """Range of the agent share per batch; None keeps each base config's."""
    jitter: tuple[tuple[str, tuple[float, float]], ...] = ()
    """(field, (low, high)) offsets added per batch."""
    price_scale: tuple[float, float] = (1.0, 1.0)
    """Range of the factor that multiplies the price range (log-uniform)."""
    config_jitter: tuple[tuple[str, tuple[tuple[str, tuple[float, float]], ...]], ...] = ()
    """(base config, ((field, (low, high)), ...)): ranges that replace ``jitter``'s for
    that config's batches, field by field (a field ``jitter`` lacks is added after its
    fields), so that one config can vary more than another: the retail specialist sees
    retail markets as large as wholesale's without wholesale growing larger still."""

    def __post_init__(self) -> None:
        if not self.configs:
            raise ValueError("family: needs at least one base config")
        if not self.disclosure:  # each batch draws one
            raise ValueError("family.disclosure: needs at least one rule")
        for rule in self.disclosure:
            if rule not in DISCLOSURE_RULES:
                raise ValueError(f"family.disclosure: unknown rule {rule!r}")
        _check_jitter(self.jitter, "family.jitter")
        names = [name for name, _ in self.configs]
        for config, jitter in self.config_jitter:
            if config not in names:
                raise ValueError(
                    f"family.config_jitter: {config!r} is not in family.configs ({names})"
                )
            _check_jitter(jitter, f"family.config_jitter.{config}")
        lo, hi = self.price_scale
        if not 0 < lo <= hi:
            raise ValueError(f"family.price_scale: need 0 < low <= high, got {self.price_scale}")
        if self.agent_share is not None:
            a, b = self.agent_share
            if not 0.0 <= a <= b <= 1.0:
                raise ValueError(
                    f"family.agent_share: need 0 <= low <= high <= 1, got {self.agent_share}"
                )
        self.extremes()

    def sample(self, rng: np.random.Generator) -> MarketConfig:
        return self.sample_named(rng)[1]

    def jitter_for(self, config: str) -> tuple[tuple[str, tuple[float, float]], ...]:
        """The jitter ranges of ``config``'s batches: ``jitter`` with ``config_jitter``'s
        ranges for that config in place (in ``jitter``'s order, so a config without any
        draws exactly as before), then the fields only ``config_jitter`` names."""
        own = dict(dict(self.config_jitter).get(config, ()))
        ranges = dict(self.jitter)
        return tuple((k, own.get(k, v)) for k, v in self.jitter) + tuple(
            (k, v) for k, v in own.items() if k not in ranges
        )

    def sample_named(self, rng: np.random.Generator) -> tuple[str, MarketConfig]:
        """``sample``, with the name of the base config drawn (the same draws)."""
        drawn, base = self.configs[int(rng.integers(len(self.configs)))]
        offsets = {name: rng.uniform(a, b) for name, (a, b) in self.jitter_for(drawn)}
        lo, hi = self.price_scale
        scale = math.exp(rng.uniform(math.log(lo), math.log(hi)))
        disclosure = self.disclosure[int(rng.integers(len(self.disclosure)))]
        share = None if self.agent_share is None else float(rng.uniform(*self.agent_share))
        return drawn, _jittered(base, offsets, scale, disclosure, share)

    def extremes(self) -> tuple[tuple[str, MarketConfig], ...]:
        """Each base config and its markets at the low and at the high ends of its jitter
        and of ``price_scale`` (labelled ``NAME``, ``NAME (low ends)``, ``NAME (high
        ends)``). Every field's bounds hold for every batch once they hold at both ends,
        so a family whose batches could draw an invalid market is a ValueError here, when
        the config is read, not after training started."""
        out = []
        for name, base in self.configs:
            out.append((name, base))
            jitter = self.jitter_for(name)
            for k, end in enumerate(("low", "high")):
                offsets = {field: bounds[k] for field, bounds in jitter}
                share = None if self.agent_share is None else self.agent_share[k]
                try:
                    market = _jittered(base, offsets, self.price_scale[k], "hidden", share)
                except (TypeError, ValueError) as err:
                    raise ValueError(
                        f"family: a {name} batch at the {end} ends of its jitter and "
                        f"price_scale is not a valid market ({err})"
                    ) from None
                out.append((f"{name} ({end} ends)", market))
        return tuple(out)

    def kind_ends(self) -> tuple[MarketConfig, ...]:
        """Per base config, its markets with the most agent and with the most human buyers
        that a batch can draw: the most buyers (the high end of a ``buyers`` jitter) at the
        highest and at the lowest agent share. A market's agents, round(share x buyers),
        grow with both; its humans grow with the buyers and fall with the share: a kind
        none of these markets has, no batch has (``agents.env.check_kinds``)."""
        out = []
        for name, base in self.configs:
            high = dict(self.jitter_for(name)).get("buyers", (0.0, 0.0))[1]
            buyers = max(int(round(base.buyers + high)), 1)
            shares = (base.agent_share,) if self.agent_share is None else self.agent_share
            out += [dataclasses.replace(base, buyers=buyers, agent_share=s) for s in shares]
        return tuple(out)


def _jittered(
    base: MarketConfig,
    offsets: dict[str, float],
    scale: float,
    disclosure: str,
    share: float | None,
) -> MarketConfig:
    """``base`` with each field moved by its offset (kept valid as ``ConfigFamily`` says),
    its price range scaled, and the rule and agent share given."""
    changes: dict[str, Any] = {}
    for name, offset in offsets.items():
        x = getattr(base, name) + offset
        if name in _INT_FIELDS:
            changes[name] = max(int(round(x)), 0 if name == "patience" else 1)
        elif name == "value_correlation":
            changes[name] = float(np.clip(x, 0.0, 1.0))
        elif name == "cost_level":
            changes[name] = float(np.clip(x, 0.0, 0.95))
        else:
            changes[name] = max(float(x), 0.0)
    if "products" in changes and isinstance(base.inventory, tuple):
        changes["inventory"] = max(base.inventory)
    changes["price_range"] = (base.lo * scale, base.hi * scale)
    changes["disclosure"] = disclosure
    if share is not None:
        changes["agent_share"] = share
    return dataclasses.replace(base, **changes)


def _check_jitter(jitter: tuple[tuple[str, tuple[float, float]], ...], where: str) -> None:
    for name, (a, b) in jitter:
        if name not in _INT_FIELDS + _FLOAT_FIELDS:
            known = ", ".join(_INT_FIELDS + _FLOAT_FIELDS)
            raise ValueError(f"{where}: cannot jitter {name!r}; fields: {known}")
        if not a <= b:
            raise ValueError(f"{where}.{name}: need low <= high, got [{a}, {b}]")


@dataclass(frozen=True)
class TrainConfig:
    """Everything a training run depends on (with the seed, it fixes the run)."""

    side: str = "seller"
    """seller | buyer: which side learns."""
    name: str = "rl_seller"
    """The entry name the checkpoint plays under (and draws its dice from)."""
    seed: int = 0
    """Root seed of markets, sampling and minibatch order."""
    iterations: int = 300
    """PPO iterations (one rollout and one update each)."""
    batch_size: int = 2048
    """Markets played side by side (B)."""
    steps: int = 0
    """Seller turns per rollout (rows restart as their markets end); 0: the batch's T.
    The buyer side plays whole episodes."""
    lr: float = 3e-4
    """Adam step size at the start, annealed linearly toward ``lr_end`` (iteration i of
    n runs at ``lr + i/n (lr_end - lr)``, so the last at (n-1)/n of the way)."""
    lr_end: float = 3e-5
    gamma: float = 1.0
    """Seller side: discount per turn (1: every turn of a market counts alike). The buyer
    side's returns are undiscounted: a buyer's surplus from then on."""
    gae_lambda: float = 0.95
    """GAE lambda (seller); the buyer side uses whole-episode returns."""
    epochs: int = 3
    """Passes over each rollout."""
    minibatches: int = 4
    clip: float = 0.2
    """PPO ratio clip."""
    ent_coef: float = 0.01
    """Entropy bonus at the start, annealed linearly toward ``ent_end`` (as ``lr``)."""
    ent_end: float = 0.001
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    penalty: float = VIOLATION_PENALTY
    """Seller reward's cost per violation (in units of W*_T)."""
    hidden: int = 48
    """Width of the network."""
    film: bool = False
    """Seller side: a per-market gate on the network's second layer
    (``agents.rl.nets.SellerNetConfig.film``)."""
    pooled: bool = False
    """Seller side: the network also sees the answers of the market's buyers pooled
    (``agents.rl.features.SellerFeatures.POOLED``); a ``train.init`` checkpoint and
    every teacher must see the same features."""
    prior_feature: bool = False
    """Seller side: the network also sees the factor ``calibrate_signals`` shrinks the
    market's signals by (``agents.rl.features.SellerFeatures.PRIOR``); a ``train.init``
    checkpoint and every teacher must see the same features."""
    plan_feature: bool = False
    """Seller side: the network also sees which pairs its planned matching holds
    (``agents.rl.features.SellerFeatures.PLAN``); a ``train.init`` checkpoint and every
    teacher must see the same features."""
    signal_prior: float | None = None
    """Seller side: read the signals through ``agents.rl.features.calibrate_signals`` with
    this prior spread of tastes (a fraction of the range width; 0: the raw signals). Unset:
    a ``train.init`` checkpoint's own (0 for a fresh network); set, it replaces that
    checkpoint's. The trained checkpoint records it."""
    assignment: bool | None = None
    """Seller side: play with ``RLSeller.assignment`` (the expert's pick is a max-weight
    assignment's pair). Unset: a ``train.init`` checkpoint's own (off for a fresh
    network); set, it replaces that checkpoint's. The trained checkpoint records it."""
    within_plan: bool | None = None
    """Seller side: play with ``RLSeller.within_plan`` (the pair is chosen among those of
    the market's max-weight matching). Unset and set as ``assignment``."""
    imitate: str = ""
    """Warm start: a registry seller to imitate before PPO ("": none)."""
    imitation_iterations: int = 0
    """Batches of the teacher's play to imitate."""
    imitation_epochs: int = 8
    """Passes over each batch of the teacher's play."""
    imitation_lr: float = 1e-3
    """Adam step size of the warm start."""
    imitation_smoothing: float = 0.1
    """Label smoothing of the warm start (keeps the policy from collapsing on the
    teacher's move, so that PPO can explore from it)."""
    imitation_spread: float = 0.2
    """Share of the warm start's price target moved from the expert's price to the levels
    around it (where the expert's own move was the teacher's), so exploration starts
    close to the expert."""
    imitation_patience: float = 0.0
    """The teacher's ``patience`` (``GreedyMatcher``: extra asked, as a fraction of the
    range width, while turns are to spare); 0 leaves the teacher as registered."""
    imitation_spare: float = 0.0
    """The teacher's ``spare`` (``GreedyMatcher``: the turns to spare, as a fraction of the
    open buyers, that patience needs); 0 leaves the teacher as registered."""
    expert_coef: float = 0.0
    """Seller side: weight of the expert's move's negative log-likelihood in the loss (a
    pull toward the greedy matcher's play wherever departing has not proved better)."""
    expert_configs: tuple[str, ...] = ()
    """The base configs (of ``[family]``) whose batches get the expert pull; empty: every
    batch. A pull on retail-like batches alone asks the seller to keep the expert's pair
    there and leaves it free to depart where the signals mislead the expert."""
    expert_opponents: tuple[str, ...] = ()
    """The ``[[opponents]]`` (by name) whose rows get the expert pull; empty: every row.
    A pull on the rows of buyers who take any price up to their value (truthful, noisy
    humans) asks the seller to keep the expert's pair until the answers say otherwise,
    and leaves it free to depart against buyers who hold out. The loss reads which
    opponent plays a row (training knows it; the policy sees only the answers), and a
    pulled row is pulled as hard as with the option unset."""
    expert_pull: str = "move"
    """What ``expert_coef`` pulls toward: "move" (the expert's pair and its price level),
    "pair" (the pair alone, prices left to the learner and its warm start) or "scarce"
    (the pair, and the price level only on the turns when turns are scarce: see
    ``expert_spare``)."""
    expert_spare: float = 0.0
    """With ``expert_pull = "scarce"``: turns are scarce when the turns left exceed the
    sales still possible (the active buyers, or the units in stock where fewer) by at
    most this fraction of them (``GreedyMatcher.spare`` where stock outlasts the
    buyers). 0.3 counts `large` (16 buyers, 16 units, 20 turns) as scarce from its start;
    retail (8 buyers, 8 units, 12 turns) and 16 buyers with 8 units and 20 turns as not.
    There the price pull asks the learner to price as the expert does, when a refused
    offer costs a turn that no sale can spare."""
    ref_coef: float = 0.0
    """Seller side: weight of the KL divergence from the policy to its warm start (the
    network as the imitation left it, frozen) in the loss, so that departures from the
    warm start must pay for themselves in advantage (0: no such term). On the shipped
    family 0.05 held retail near the warm start but wholesale too (README)."""
    teachers: tuple[tuple[str, str], ...] = ()
    """Seller side: a frozen seller checkpoint per base config of ``[family]``, written
    ``teachers = { retail = "DIR", wholesale = "DIR" }`` (paths relative to the file).
    On a batch drawn from a named config the loss adds ``teacher_coef`` times the KL
    divergence from the policy to that config's teacher, on the policy's own states
    (on-policy distillation): one network learns the play of specialists, each trained
    on its own configs. Teachers must see the same features as the learner."""
    teacher_coef: float = 0.0
    """Weight of the KL divergence to the batch's teacher (``teachers``)."""
    teacher_coefs: tuple[tuple[str, float], ...] = ()
    """Seller side: per-teacher weights instead of ``teacher_coef``, written
    ``teacher_coefs = { wholesale = 0.05 }`` (teachers not named keep ``teacher_coef``)."""
    team_return: bool = False
    """Buyer side, a study option that the shipped buyers never use: every decision's
    return is the mean, over its market's buyers, of their surplus from then on (a pooled
    reward: buyers paid so learn to act as one team, where buyers paid their own surplus
    are independent learners). It measures what coordination among buyers would be worth
    (docs/rl_experiments.md, "What limits the buyer")."""
    learned_disclosure: bool = False
    """Buyer side: also learn, per market, whether to disclose under the voluntary rule
    (a disclosure head, trained on markets of the voluntary rule)."""
    bid_to_offer: bool = False
    """Buyer side: a counter on the product on offer bids a share of the way from cost to
    the lesser of the buyer's value and the price offered, not to its value
    (``agents.rl.policies.RLBuyer``). The trained checkpoint records it."""
    target_kl: float = 0.02
    """Stop an update's epochs once the approximate KL to the rollout policy exceeds
    this (0: never)."""
    init: str = ""
    """A checkpoint to start from ("": fresh weights)."""
    eval_every: int = 25
    """Evaluate against every opponent every this many iterations (0: only at the end)."""
    eval_markets: int = 500
    """Markets per (opponent, base config) in each evaluation."""
    threads: int = 2
    """torch threads."""
    checkpoint_every: int = 25
    """Save the checkpoint and the trainer state every this many iterations (0: only at
    the start and the end)."""
    opponents: tuple[Opponent, ...] = ()
    family: ConfigFamily | None = None
    source: str = field(default="", compare=False)
    """The file it was read from (relative paths resolve against its folder)."""

    def __post_init__(self) -> None:
        # Switches and texts as their types, before anything reads them: a TOML string
        # "false" is true, and a number where a path belongs fails deep inside training.
        for f in fields(self):
            x = getattr(self, f.name)
            if f.type in ("bool", "bool | None") and not (
                isinstance(x, bool) or (x is None and f.type == "bool | None")
            ):
                raise ValueError(f"train.{f.name}: expected true or false, got {shown(x)}")
            if f.type == "str" and not isinstance(x, str):
                raise ValueError(f"train.{f.name}: expected a text, got {shown(x)}")
        if self.side not in SIDES:
            raise ValueError(f"train.side: expected seller or buyer, got {self.side!r}")
        if not is_entry_name(self.name):
            # The checkpoint plays under this name: one no spec or path could read is
            # refused now, not when the run is saved.
            raise ValueError(
                f"train.name: expected a plain name (no blanks, none of | # / \\ , : =, "
                f"not starting with a dot), got {self.name!r}"
            )
        for name in (
            "iterations",
            "batch_size",
            "epochs",
            "minibatches",
            "hidden",
            "threads",
            "imitation_epochs",
            "eval_markets",
        ):
            x = getattr(self, name)
            if isinstance(x, bool) or not isinstance(x, int) or x < 1:
                raise ValueError(f"train.{name}: expected a positive integer, got {shown(x)}")
        for name in ("steps", "imitation_iterations", "eval_every", "checkpoint_every", "seed"):
            x = getattr(self, name)
            if isinstance(x, bool) or not isinstance(x, int) or x < 0:
                raise ValueError(f"train.{name}: expected an integer >= 0, got {shown(x)}")
        for name, most in (
            ("threads", MAX_THREADS),
            ("hidden", MAX_HIDDEN),
            ("eval_markets", limits.MAX_MARKETS_PER_MATCH),
            ("seed", MAX_SEED),
            ("steps", MAX_STEPS),
            ("minibatches", MAX_MINIBATCHES),
        ):
            if getattr(self, name) > most:
                raise ValueError(
                    f"train.{name}: at most {most:,}, got {shown(getattr(self, name))}"
                )
        for name in ("lr", "lr_end", "clip", "vf_coef", "max_grad_norm", "imitation_lr"):
            _check_number(
                f"train.{name}", getattr(self, name), lambda x: x > 0, "a positive number"
            )
        for name in ("gamma", "gae_lambda", "imitation_smoothing", "imitation_spread"):
            _check_number(
                f"train.{name}", getattr(self, name), lambda x: 0 <= x <= 1, "a number in [0, 1]"
            )
        for name in (
            "ent_coef",
            "ent_end",
            "penalty",
            "target_kl",
            "expert_coef",
            "ref_coef",
            "teacher_coef",
            "imitation_patience",
            "imitation_spare",
            "expert_spare",
        ):
            _check_number(f"train.{name}", getattr(self, name), lambda x: x >= 0, "a number >= 0")
        if self.signal_prior is not None:
            _check_number(
                "train.signal_prior", self.signal_prior, lambda x: x >= 0, "a number >= 0"
            )
        if self.batch_size % self.minibatches and self.side == "seller":
            raise ValueError("train.batch_size must be a multiple of train.minibatches")
        if not self.opponents:
            raise ValueError("no [[opponents]]: the learner needs someone to play")
        if self.family is None:
            raise ValueError("no [family]: the learner needs markets")
        self._check_memory()
        self._check_opponents()
        self._check_side_options()
        if self.imitation_iterations and not self.imitate:
            raise ValueError(
                "train.imitation_iterations: needs train.imitate (a seller to imitate)"
            )
        if self.imitate and not self.imitation_iterations:  # else no warm start, no word
            raise ValueError("train.imitate: needs train.imitation_iterations > 0")
        if self.expert_pull not in ("move", "pair", "scarce"):
            raise ValueError(
                f"train.expert_pull: expected 'move', 'pair' or 'scarce', got {self.expert_pull!r}"
            )
        if self.expert_spare and self.expert_pull != "scarce":
            raise ValueError("train.expert_spare: needs train.expert_pull = 'scarce'")
        if self.expert_pull != "move" and not self.expert_coef:
            raise ValueError(
                f"train.expert_pull = {self.expert_pull!r}: needs train.expert_coef > 0"
            )
        names = [name for name, _ in self.family.configs]
        self._check_expert_rows("expert_configs", names, "is not in family.configs")
        playing = [o.name for o in self.opponents]
        self._check_expert_rows("expert_opponents", playing, "is not among the [[opponents]]")
        self._check_teachers(names)
        if self.ref_coef and not (self.imitate and self.imitation_iterations):
            raise ValueError("train.ref_coef: needs a warm start (imitate, imitation_iterations)")

    def _check_opponents(self) -> None:
        """Weights every batch can split its rows by (``agents.env.split_rows``, as the
        environments will): numbers >= 0 with a positive sum, each positive one a row."""
        for k, opponent in enumerate(self.opponents):
            where = f"opponents[{k}].weight ({opponent.name})"
            _check_number(where, opponent.weight, lambda x: x >= 0, "a number >= 0")
        weights = [float(o.weight) for o in self.opponents]
        try:
            split_rows(self.batch_size, weights, [o.name for o in self.opponents])
        except ValueError as err:
            raise ValueError(f"[[opponents]] weight: {err}") from None

    def _check_memory(self) -> None:
        """Refuse a run too large for memory when its config is read: every market of the
        family, at either end of its jitter (``ConfigFamily.extremes``), must fit a unit
        of play, as ``arena play`` and tournaments require (``arena.limits``); the
        batch (its rollout and update) and an evaluation's markets must fit
        ``TRAIN_MEMORY``."""
        budget = limits.size_text(TRAIN_MEMORY)
        for label, market in self.family.extremes():
            where = f"markets.{label}"
            limits.unit_markets([(where, market)], 0)
            size = f"{market.buyers:,} buyers x {market.products:,} products"
            steps = (self.steps or market.turns) if self.side == "seller" else market.turns
            per_market = self.market_bytes(market)
            if self.batch_size * per_market > TRAIN_MEMORY:
                fit = TRAIN_MEMORY // per_market
                raise ValueError(
                    f"train.batch_size: {_count(self.batch_size)} markets of {where} ({size}, "
                    f"{steps:,} steps a rollout) need about "
                    f"{limits.size_text(self.batch_size * per_market)}, "
                    f"over the {budget} a training run may use; "
                    + (f"at most {fit:,} fit" if fit else "lower the markets' size or steps")
                )
            at_once = min(self.eval_markets, EVAL_CHUNK)
            if at_once * limits.market_bytes(market) > TRAIN_MEMORY:
                fit = TRAIN_MEMORY // limits.market_bytes(market)
                raise ValueError(
                    f"train.eval_markets: an evaluation plays {at_once:,} markets of {where} "
                    f"({size}) at once, about "
                    f"{limits.size_text(at_once * limits.market_bytes(market))}, over "
                    f"the {budget} a training run may use; at most {fit:,} fit"
                )

    def starting_from(self, init: str) -> TrainConfig:
        """This run started from the checkpoint ``init`` instead of its warm start: no
        ``imitate`` and no imitation iterations (a warm start that would change nothing is
        refused). ``init`` "": fresh weights and the run's own warm start, if it has one."""
        if not init:
            return dataclasses.replace(self, init="")
        return dataclasses.replace(self, init=init, imitate="", imitation_iterations=0)

    def market_bytes(self, market: MarketConfig) -> int:
        """What one market of ``market`` adds to a batch's memory: its play
        (``arena.limits.market_bytes``) and, for every step of its rollout, the
        features kept and the update's activations."""
        steps = (self.steps or market.turns) if self.side == "seller" else market.turns
        pairs = market.buyers * market.products
        width = STEP_BYTES_PER_PAIR * self.minibatches + ACTIVATION_BYTES_PER_WIDTH * self.hidden
        return limits.market_bytes(market) + steps * pairs * width // self.minibatches

    def _check_side_options(self) -> None:
        """An option of one side set on the other side's run is an error, not a line the
        trainer would silently ignore."""
        other = BUYER_ONLY if self.side == "seller" else SELLER_ONLY
        defaults = {f.name: f.default for f in fields(self)}
        for name in other:
            value, default = getattr(self, name), defaults[name]
            if bool(value) if isinstance(default, tuple) else value != default:
                owner = "buyer" if self.side == "seller" else "seller"
                raise ValueError(f"train.{name}: a {owner}-side option")

    def _check_expert_rows(self, field: str, allowed: list[str], missing: str) -> None:
        """Check one of the lists that keep the expert pull to some rows (base configs,
        opponents): a list of names from ``allowed``, and only with a pull to keep."""
        given = getattr(self, field)
        if isinstance(given, str):
            raise ValueError(f"train.{field}: write a list of names, as [{given!r}]")
        if not isinstance(given, list | tuple) or not all(isinstance(x, str) for x in given):
            raise ValueError(f"train.{field}: write a list of names, got {shown(given)}")
        object.__setattr__(self, field, tuple(str(x) for x in given))
        unknown = [x for x in getattr(self, field) if x not in allowed]
        if unknown:
            raise ValueError(f"train.{field}: {unknown[0]!r} {missing} ({allowed})")
        if given and not self.expert_coef:
            raise ValueError(f"train.{field}: needs train.expert_coef > 0")

    def _check_teachers(self, names: list[str]) -> None:
        pairs = _table(self.teachers, 'train.teachers: write teachers = { CONFIG = "DIR", ... }')
        for name, path in pairs:
            if not isinstance(path, str) or not path:
                raise ValueError(f"train.teachers.{name}: expected a checkpoint directory")
            if name not in names:
                raise ValueError(f"train.teachers: {name!r} is not in family.configs ({names})")
        object.__setattr__(self, "teachers", pairs)
        if pairs and self.side != "seller":
            raise ValueError("train.teachers: a seller-side option")
        if bool(pairs) != bool(self.teacher_coef):
            raise ValueError("train.teachers and train.teacher_coef > 0 go together")
        if pairs and self.ref_coef:
            raise ValueError("train.teachers: not together with train.ref_coef")
        coefs = _table(
            self.teacher_coefs, "train.teacher_coefs: write teacher_coefs = { CONFIG = 0.1, ... }"
        )
        for name, coef in coefs:
            if name not in dict(pairs):
                raise ValueError(f"train.teacher_coefs: {name!r} has no teacher (train.teachers)")
            _check_number(f"train.teacher_coefs.{name}", coef, lambda x: x >= 0, "a number >= 0")
        object.__setattr__(self, "teacher_coefs", tuple((k, float(v)) for k, v in coefs))

    def teacher_weight(self, config: str) -> float:
        """The weight of the KL divergence to ``config``'s teacher."""
        return dict(self.teacher_coefs).get(config, self.teacher_coef)

    def opponent_policies(self, seed: int) -> list:
        """The ``[[opponents]]`` as policies of the side the learner plays against (buyers
        for a seller: entries or populations; sellers for a buyer), opponent k with dice
        ``seed * 1000 + k``; checkpoint paths relative to the file (``resolve``). A name
        that builds no policy is a ValueError naming the opponent: ``[[opponents]] N
        (name = "as written"): ...``, a path with the folder it was looked for in."""
        from agents import registry

        side = "buyer" if self.side == "seller" else "seller"
        out = []
        for k, opp in enumerate(self.opponents):
            name = self.resolve(opp.name)
            if self.source and name == opp.name and registry.looks_like_path(name):
                folder = name
                for suffix in registry.VARIANT_SUFFIXES:
                    folder = folder.removesuffix(suffix)
                if not os.path.exists(folder):  # not beside the file, nor from here either:
                    here = os.path.dirname(os.path.abspath(self.source))
                    name = os.path.join(here, name)  # the error names where the file says
            s = seed * 1000 + k
            try:
                out.append(
                    registry.make_buyers(name, seed=s)
                    if side == "buyer"
                    else registry.make(name, "seller", seed=s)
                )
            except (KeyError, ValueError) as err:  # registry.UnknownEntry is a KeyError
                raise ValueError(f"{self.opponent_label(k)}: {err}") from None
        return out

    def opponent_label(self, k: int) -> str:
        """Opponent k (from 0) as a message names it: ``[[opponents]] N (name = "...")``,
        N counting the tables from 1, the name as the file writes it."""
        return f"[[opponents]] {k + 1} (name = {json.dumps(self.opponents[k].name)})"

    def check_opponents_read(self) -> None:
        """What ``load_train_config`` checks of the ``[[opponents]]`` once the file is
        read, before a run writes anything: every name builds a policy
        (``opponent_policies``), and a buyer population split by kind meets both kinds in
        some market the family can draw (``ConfigFamily.kind_ends``): a family whose
        agent share ranges over [0, 1] passes, one whose markets never have an agent
        buyer does not."""
        ends = self.family.kind_ends()
        for k, policy in enumerate(self.opponent_policies(0)):
            try:
                check_kinds(policy, ends, "the population", "[family] or [markets.NAME]")
            except ValueError as err:
                raise ValueError(f"{self.opponent_label(k)}: {err}") from None

    def check_imitate_read(self) -> None:
        """What ``load_train_config`` checks of ``train.imitate`` once the file is read: a
        seller entry the registry knows, so that a buyer's name or a typo is an error
        naming the file and the key before a run writes anything, not the registry's bare
        line once the warm start begins (``agents.rl.ppo.imitation_teacher`` builds it)."""
        if not self.imitate or self.side != "seller":  # a buyer's: _check_side_options
            return
        from agents import registry

        try:
            registry.get(self.imitate, "seller")
        except (KeyError, ValueError) as err:  # registry.UnknownEntry is a KeyError
            raise ValueError(f"train.imitate: {err}") from None

    def resolve(self, path: str) -> str:
        """A path from the file, relative to the file's folder (registry names pass)."""
        if not self.source or not path:
            return path
        candidate = Path(self.source).parent / path
        return str(candidate) if candidate.exists() else path

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out.pop("source")
        # Fields newer than the first records are left out at their defaults, so that
        # those records still read as they were written.
        for newer in (
            "pooled",
            "prior_feature",
            "plan_feature",
            "imitation_spare",
            "expert_opponents",
            "expert_spare",
            "bid_to_offer",
        ):
            if not out[newer]:
                out.pop(newer)
        if self.teacher_coefs:
            out["teacher_coefs"] = dict(self.teacher_coefs)
        else:
            out.pop("teacher_coefs")
        for unset in ("signal_prior", "assignment", "within_plan"):
            if out[unset] is None:
                out.pop(unset)
        fam = self.family
        out["family"] = {
            "configs": {name: cfg.to_dict() for name, cfg in fam.configs},
            "disclosure": list(fam.disclosure),
            "agent_share": None if fam.agent_share is None else list(fam.agent_share),
            "jitter": {k: list(v) for k, v in fam.jitter},
            "price_scale": list(fam.price_scale),
        }
        if fam.config_jitter:  # recorded only where set, as the shipped records read
            out["family"]["config_jitter"] = {
                config: {k: list(v) for k, v in jitter} for config, jitter in fam.config_jitter
            }
        out["opponents"] = [dataclasses.asdict(o) for o in self.opponents]
        out["teachers"] = dict(self.teachers)
        return out


def _table(value, usage: str) -> tuple[tuple[str, Any], ...]:
    """A TOML table ``{ CONFIG = value, ... }`` (or its pairs) as sorted (name, value)
    pairs; anything else is a ValueError that says how to write it."""
    items = value.items() if isinstance(value, dict) else value
    try:
        return tuple(sorted((str(k), v) for k, v in items))
    except (TypeError, ValueError):
        raise ValueError(usage) from None


def load_train_config(path: str, **overrides: Any) -> TrainConfig:
    """Read a training config file; every problem is one ValueError naming the file."""
    data = _read(str(path))
    try:
        return _from_dict(data, path, overrides)
    except (TypeError, ValueError, OverflowError) as err:
        raise ValueError(f"{path}: {err}") from None


def _read(path: str, chain: tuple[str, ...] = ()) -> dict:
    """The file's tables, merged over those of the file it ``extends`` (module docstring)."""
    data = read_toml(path, "training config")
    base = data.pop("extends", None)
    if base is None:
        return data
    if not isinstance(base, str) or not base:
        raise ValueError(f"{path}: extends: write the path of another training config")
    here = os.path.dirname(path)
    base_path = os.path.normpath(os.path.join(here, base))
    chain = (*chain, os.path.realpath(path))
    if os.path.realpath(base_path) in chain:
        raise ValueError(f"{path}: extends {base!r}, which extends it back")
    parent = _read(base_path, chain)
    for name, tables in ((path, data), (base_path, parent)):
        if not isinstance(tables.get("train", {}), dict):
            raise ValueError(f"{name}: [train] must be a table")
    there = os.path.dirname(base_path)

    def moved(name: str) -> str:  # a path relative to the other file, made relative to this
        candidate = os.path.join(there, name)
        return os.path.relpath(candidate, here or ".") if os.path.exists(candidate) else name

    for row in parent.get("opponents", []):
        if isinstance(row, dict) and isinstance(row.get("name"), str):
            row["name"] = moved(row["name"])
    train = dict(parent.get("train", {}))
    if isinstance(train.get("init"), str) and train["init"]:
        train["init"] = moved(train["init"])
    if isinstance(train.get("teachers"), dict):
        train["teachers"] = {
            k: moved(v) if isinstance(v, str) and v else v for k, v in train["teachers"].items()
        }
    merged = {**parent, **data, "train": {**train, **data.get("train", {})}}
    family, over = parent.get("family"), data.get("family")
    if isinstance(family, dict) and isinstance(over, dict):
        merged["family"] = {**family, **over}
        if isinstance(family.get("jitter"), dict) and isinstance(over.get("jitter"), dict):
            merged["family"]["jitter"] = {**family["jitter"], **over["jitter"]}
        mine, theirs = family.get("config_jitter"), over.get("config_jitter")
        if isinstance(mine, dict) and isinstance(theirs, dict):
            both = {**mine, **theirs}
            for name, fields in theirs.items():
                if isinstance(fields, dict) and isinstance(mine.get(name), dict):
                    both[name] = {**mine[name], **fields}
            merged["family"]["config_jitter"] = both
    markets, over = parent.get("markets"), data.get("markets")
    if isinstance(markets, dict) and isinstance(over, dict):
        merged["markets"] = {**markets, **over}
        for name, fields in over.items():
            if isinstance(fields, dict) and isinstance(markets.get(name), dict):
                merged["markets"][name] = {**markets[name], **fields}
    return merged


def _jitter_table(table, where: str) -> tuple[tuple[str, tuple[float, float]], ...]:
    """A TOML table ``FIELD = [low, high]`` as (field, (low, high)) pairs, in its order."""
    if not isinstance(table, dict):
        raise ValueError(f"{where}: write FIELD = [low, high]")
    return tuple((k, _pair(v, f"{where}.{k}", "FIELD = [low, high]")) for k, v in table.items())


def _pair(value, where: str, usage: str = "[low, high]") -> tuple[float, float]:
    """``[low, high]`` of finite numbers as floats; anything else is a ValueError naming
    ``where`` (an integer too large for a float included)."""
    if not (
        isinstance(value, list | tuple)
        and len(value) == 2
        and all(finite_float(x) is not None for x in value)
    ):
        got = (
            "[" + ", ".join(map(shown, value)) + "]"
            if isinstance(value, list | tuple)
            else shown(value)
        )
        raise ValueError(f"{where}: write {usage} (finite numbers), got {got}")
    return float(value[0]), float(value[1])


def _names(value, where: str) -> tuple[str, ...]:
    """A TOML list of texts as a tuple (a lone text is not read letter by letter)."""
    if not (isinstance(value, list) and all(isinstance(x, str) for x in value)):
        raise ValueError(f'{where}: write a list of names, as ["hidden"], got {shown(value)}')
    return tuple(value)


def _is_number(x) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _check_number(where: str, x, ok, expected: str) -> None:
    """A finite number ``x`` for which ``ok(x)`` holds; else a ValueError naming ``where``
    and what it takes (``expected``)."""
    if _is_number(x) and finite_float(x) is None:
        raise ValueError(f"{where}: expected a finite number, got {shown(x)}")
    if not (_is_number(x) and ok(x)):
        raise ValueError(f"{where}: expected {expected}, got {shown(x)}")


def _count(n: int) -> str:
    """A count for a message (a huge one by its number of digits)."""
    return f"{n:,}" if n.bit_length() <= 96 else shown(n)


def _from_dict(data: dict, path: str, overrides: dict[str, Any]) -> TrainConfig:
    unknown = sorted(set(data) - {"train", "opponents", "family", "markets"})
    if unknown:
        raise ValueError(f"unknown table(s) {', '.join(unknown)}")
    train = dict(data.get("train", {}))
    known = {f.name for f in dataclasses.fields(TrainConfig)} - {"opponents", "family", "source"}
    bad = sorted(set(train) - known)
    if bad:
        raise ValueError(
            f"unknown [train] field(s) {', '.join(bad)}; known: {', '.join(sorted(known))}"
        )
    train.update({k: v for k, v in overrides.items() if v is not None})
    markets = data.get("markets", {})
    if not isinstance(markets, dict):
        raise ValueError("[markets] must hold tables [markets.NAME]")
    configs = {}
    for name, table in markets.items():
        try:
            configs[name] = MarketConfig.from_dict(table)
        except (TypeError, ValueError, OverflowError) as err:
            raise ValueError(f"markets.{name}: {err}") from None
    fam = data.get("family")
    if not isinstance(fam, dict):
        raise ValueError("no [family] table")
    fields = {"configs", "disclosure", "agent_share", "jitter", "config_jitter", "price_scale"}
    bad = sorted(set(fam) - fields)
    if bad:
        raise ValueError(f"unknown [family] field(s) {', '.join(bad)}")
    names = fam.get("configs", list(configs))
    missing = [n for n in names if n not in configs]
    if missing or not names:
        raise ValueError(f"family.configs: no [markets.{(missing or ['NAME'])[0]}] table")
    jitter = _jitter_table(fam.get("jitter", {}), "family.jitter")
    per_config = fam.get("config_jitter", {})
    if not isinstance(per_config, dict):
        raise ValueError("family.config_jitter: write [family.config_jitter.NAME] tables")
    config_jitter = tuple(
        (str(name), _jitter_table(table, f"family.config_jitter.{name}"))
        for name, table in per_config.items()
    )
    share = fam.get("agent_share")
    family = ConfigFamily(
        configs=tuple((n, configs[n]) for n in names),
        disclosure=_names(fam.get("disclosure", ["hidden"]), "family.disclosure"),
        agent_share=None if share is None else _pair(share, "family.agent_share"),
        jitter=jitter,
        price_scale=_pair(fam.get("price_scale", [1.0, 1.0]), "family.price_scale"),
        config_jitter=config_jitter,
    )
    opponents = []
    for k, row in enumerate(data.get("opponents", [])):
        if not isinstance(row, dict) or "name" not in row or set(row) - {"name", "weight"}:
            raise ValueError(f"opponents[{k}]: write name = ..., weight = ...")
        weight = row.get("weight", 1.0)
        _check_number(f"opponents[{k}].weight", weight, lambda x: x >= 0, "a number >= 0")
        opponents.append(Opponent(str(row["name"]), float(weight)))
    cfg = TrainConfig(**train, opponents=tuple(opponents), family=family, source=str(path))
    cfg.check_opponents_read()
    cfg.check_imitate_read()
    return cfg
