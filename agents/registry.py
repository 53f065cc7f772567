"""Policies registered by name.

An entry has a side (seller | buyer), a kind (``human``: a simulated person;
``agent``), a factory and its default parameters. The kind is its policy's own (the
``kind`` its class sets), which play reads; ``register`` and ``Entry.build`` refuse an
entry whose policy is of another side or kind (``check_entry``). Every agent-kind buyer also
exists as ``NAME+disclosed``: the same policy, which under the voluntary rule
tells the seller it is an agent (under ``mandatory`` the market tells anyway).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import numbers
import os
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agents.base import AGENT, HUMAN, BuyerPolicy, SellerPolicy, is_entry_name
from agents.population import Population
from agents.scripted.buyers import Haggler, NoisyHuman, StrategicAgent, Threshold, Truthful
from agents.scripted.sellers import (
    AssignmentMatcher,
    DescendingOffers,
    DisclosureAware,
    GreedyMatcher,
    OracleSeller,
    PostedPrice,
    PricingBandit,
    RandomTarget,
)
from arena.config import finite_float
from arena.seeding import keyed_seed
from arena.words import shown

DISCLOSED_SUFFIX = "+disclosed"
LEARNED_SUFFIX = "+learned"  # an RL buyer whose network chooses whether to disclose
VARIANT_SUFFIXES = (DISCLOSED_SUFFIX, LEARNED_SUFFIX)
SIDES = {"seller": SellerPolicy, "buyer": BuyerPolicy}  # side -> the class its policies extend


class UnknownEntry(KeyError):
    """An entry name that is not registered; the message lists the known names."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class Entry:
    name: str
    side: str  # seller | buyer
    kind: str  # human | agent
    factory: Callable[..., Any]
    params: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    disclosed: bool = False  # a disclosure variant
    reference: bool = False  # sees private information: an upper reference, not a competitor
    hosting: str = "worker"  # "actor": expensive (e.g. a language model), served from its own actor
    num_gpus: float = 0.0  # what its own actor asks of a cluster
    source: str = ""  # the checkpoint directory it is built from, if any

    @property
    def base_name(self) -> str:
        """The name without a disclosure suffix: a variant shares its base's dice."""
        for suffix in VARIANT_SUFFIXES:
            if self.name.endswith(suffix):
                return self.name.removesuffix(suffix)
        return self.name

    @property
    def all_params(self) -> dict[str, Any]:
        """Every parameter with its value for this entry (factory defaults included)."""
        params = _factory_params(self.factory).items()
        out = {k: v for k, v in params if k != "seed" and not k.startswith("_")}
        return {**out, **self.params}

    def build(self, seed: int = 0, **overrides: Any) -> SellerPolicy | BuyerPolicy:
        """The entry's policy under root seed ``seed``, its parameters replaced by
        ``overrides``. A policy of the other side, or of another kind than the entry's
        (which a factory that is not a class can only show once it has built one), is an
        error naming the entry."""
        params = {**self.params, **overrides}
        if "seed" in _factory_params(self.factory, defaults_only=False):
            params.setdefault("seed", policy_seed(seed, self.base_name))
        self.check_params(params)
        policy = self.factory(**params)
        problem = _policy_mismatch(self, type(policy), getattr(policy, "kind", None))
        if problem:
            raise ValueError(problem)
        if self.disclosed:
            policy = Disclosing(policy)
        return policy

    def check_params(self, params: dict[str, Any]) -> None:
        """Every parameter one the factory takes, of the type of its default
        (``_check_param``); a ValueError naming the entry otherwise."""
        names = set(_factory_params(self.factory, defaults_only=False))
        unknown = sorted(set(params) - names)
        if unknown:
            raise ValueError(f"{self.name}: unknown parameter(s) {', '.join(unknown)}")
        defaults = _factory_params(self.factory)
        for key, value in params.items():
            _check_param(self.name, key, value, defaults.get(key), _annotation(self.factory, key))


def _factory_params(factory: Callable[..., Any], defaults_only: bool = True) -> dict[str, Any]:
    """The keyword parameters a factory takes, with their defaults: a dataclass's init
    fields, or any other callable's signature (a torch policy class, a loader)."""
    if dataclasses.is_dataclass(factory):
        fields = [f for f in dataclasses.fields(factory) if f.init]
        return {
            f.name: f.default
            for f in fields
            if not defaults_only or f.default is not dataclasses.MISSING
        }
    out = {}
    for p in inspect.signature(factory).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.default is not p.empty or not defaults_only:
            out[p.name] = None if p.default is p.empty else p.default
    return out


def _required_params(factory: Callable[..., Any]) -> list[str]:
    """The parameters a factory takes that have no default (a dataclass field with neither
    a default nor a default factory, or a signature's parameter without one)."""
    if dataclasses.is_dataclass(factory):
        missing = dataclasses.MISSING
        return [
            f.name
            for f in dataclasses.fields(factory)
            if f.init and f.default is missing and f.default_factory is missing
        ]
    skip = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return [
        p.name
        for p in inspect.signature(factory).parameters.values()
        if p.kind not in skip and p.default is p.empty
    ]


def _annotation(factory: Callable[..., Any], key: str) -> str:
    """The annotation of a factory's parameter as text ("" without one): a string under
    ``from __future__ import annotations``, a type otherwise."""
    if dataclasses.is_dataclass(factory):
        hint = next((f.type for f in dataclasses.fields(factory) if f.name == key), "")
    else:
        try:
            p = inspect.signature(factory).parameters.get(key)
        except (TypeError, ValueError):
            return ""
        hint = "" if p is None or p.annotation is p.empty else p.annotation
    return hint if isinstance(hint, str) else getattr(hint, "__name__", str(hint))


SEED_LIMIT = 2**63  # seeds are drawn below it (``keyed_seed``) and hashed as int64 (arena.noise)


def _is_integer(x: Any) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool | np.bool_)


def _scalar_kind(default: Any, annotation: str = "") -> tuple[Callable[[Any], bool], str] | None:
    """How a value of the type of ``default`` is recognised and named in a message; None
    where the default gives no type (None, an object). An integer default takes integers
    only (a fraction would be truncated or break an index), unless the parameter is
    annotated ``float`` (``x: float = 0``)."""
    if isinstance(default, bool | np.bool_):
        return (lambda x: isinstance(x, bool | np.bool_)), "true or false"
    if _is_integer(default) and "float" not in annotation:
        return _is_integer, "an integer"
    if isinstance(default, numbers.Real):
        return (
            lambda x: isinstance(x, numbers.Real) and not isinstance(x, bool | np.bool_)
        ), "a number"
    if isinstance(default, str):
        return (lambda x: isinstance(x, str)), "a string"
    return None


_PLURAL = {
    "true or false": "flags (true or false)",
    "an integer": "integers",
    "a number": "numbers",
    "a string": "strings",
}


def _check_param(entry: str, key: str, value: Any, default: Any, annotation: str = "") -> None:
    """A parameter of the type of its default (a number where the default is a number, an
    integer where it is an integer, true or false where it is a flag, a string where it is
    a string, a list of such where it is a list or tuple of them), so that a value of the
    wrong type is an error naming the entry, not a failure deep in its play (or a string
    ``"19"`` played as the levels 1 and 9). Every number, alone or in a list, is finite, as
    in a checkpoint's parameters; a seed is an integer in [0, 2**63)."""
    if isinstance(default, list | tuple):
        # The elements' type where the default's elements share one (integers and other
        # numbers share "a number"); any elements where the default is empty or mixed.
        names = {k[1] if k else None for k in (_scalar_kind(x, annotation) for x in default)}
        if names == {"an integer", "a number"}:
            names = {"a number"}
        kind = _scalar_kind(default[0], annotation) if len(names) == 1 else None
        if kind and names == {"a number"}:
            kind = _scalar_kind(0.0)
        ok = isinstance(value, list | tuple) and (kind is None or all(kind[0](x) for x in value))
        what = "a list" + (f" of {_PLURAL[kind[1]]}" if kind else "")
    else:
        kind = _scalar_kind(default, annotation)
        ok, what = (True, "") if kind is None else (kind[0](value), kind[1])
    if not ok:
        raise ValueError(f"{entry}: parameter {key} must be {what}, got {shown(value)}")
    for x in value if isinstance(value, list | tuple) else [value]:
        if isinstance(x, np.generic):
            x = x.item()
        if isinstance(x, numbers.Real) and not isinstance(x, bool) and finite_float(x) is None:
            raise ValueError(f"{entry}: parameter {key} must be finite, got {shown(value)}")
    if key == "seed" and _is_integer(value) and not 0 <= value < SEED_LIMIT:
        raise ValueError(
            f"{entry}: parameter seed must be an integer in [0, 2**63), got {shown(value)}"
        )


def policy_seed(root: int, name: str) -> int:
    """The seed a policy named ``name`` draws from under a ``root`` seed.

    Keyed by the name, not by where the policy plays: the same entry gets the same dice
    alone or inside a population, and ``NAME+disclosed`` gets the dice of ``NAME``, so a
    comparison between them measures disclosure and nothing else.
    """
    return keyed_seed(root, name)


@dataclass
class Disclosing(BuyerPolicy):
    """Wraps an agent buyer so that each of its agents discloses under the voluntary rule."""

    inner: BuyerPolicy

    def __post_init__(self) -> None:
        self.kind = self.inner.kind

    # What the market and the checks read off a policy is the inner policy's: a wrapper
    # that kept BuyerPolicy's defaults would have a text-reading agent play without its
    # dialogue, or be held to bit-identical batches that its inner policy never promised.
    @property
    def reads_text(self) -> bool:
        return bool(getattr(self.inner, "reads_text", False))

    @property
    def batch_invariance(self) -> str:
        return getattr(self.inner, "batch_invariance", "exact")

    def reset(self, batch_size: int) -> None:
        self.inner.reset(batch_size)

    def restart(self, rows: np.ndarray) -> None:
        self.inner.restart(rows)

    def disclose(self, is_agent: np.ndarray, key: np.ndarray, market=None) -> np.ndarray:
        return np.asarray(is_agent, bool).copy()

    def act(self, obs):
        return self.inner.act(obs)


_ENTRIES: dict[str, Entry] = {}


def register(entry: Entry) -> None:
    """Add ``entry`` (and, for an agent buyer, its ``+disclosed`` twin) to the registry.
    A ValueError naming the entry if it is not one that can play (``check_entry``), its
    name ends in ``+disclosed`` (the twins' suffix), or its name or its twin's is taken."""
    check_entry(entry)
    # The registry gives every agent buyer a NAME+disclosed twin: an entry registered under
    # such a name would be replaced by one, or read as one (its dice, a study's pairs).
    # NAME+learned stays open: one's own stand-in for a learned choice is registered so.
    if entry.name.endswith(DISCLOSED_SUFFIX):
        raise ValueError(
            f"entry name {entry.name!r}: a name must not end in {DISCLOSED_SUFFIX!r}, which "
            "the registry gives an agent buyer's twin that discloses; choose another name"
        )
    if entry.name in _ENTRIES:
        raise ValueError(f"entry {entry.name!r} is registered twice")
    twin = None
    if entry.side == "buyer" and entry.kind == AGENT and not entry.disclosed:
        twin = _disclosed_twin(entry)
        # Checked before either is added: the twin must not replace another entry.
        if twin.name in _ENTRIES:
            raise ValueError(
                f"entry {entry.name!r}: its disclosed twin's name {twin.name!r} is taken by "
                "another entry; choose another name"
            )
    _ENTRIES[entry.name] = entry
    if twin is not None:
        _ENTRIES[twin.name] = twin


def check_entry(entry: Entry) -> None:
    """What registration checks, without building the policy: a name a command line and
    a spec can give (``is_entry_name``), a known side and kind, a callable factory, the
    side and kind of the policy class it builds where that shows without calling it (a
    class or a ``functools.partial`` of one: its side and kind; a function: the side of
    the class its return annotation names), and the entry's parameters
    (``Entry.check_params``: known, of their defaults' types, finite; every one without
    a default but the seed given). ``Entry.build`` checks the built policy's side and
    kind, whatever the factory."""
    name = entry.name
    if not is_entry_name(name):
        raise ValueError(
            f"entry name {shown(name)}: a name is a non-empty string without blanks or any "
            "of | # / \\ , : = and does not start with '.'"
        )
    if entry.side not in tuple(SIDES):  # a tuple: an unhashable side is an error too
        raise ValueError(
            f"entry {name!r}: side must be 'seller' or 'buyer', got {shown(entry.side)}"
        )
    if entry.kind not in (HUMAN, AGENT):
        raise ValueError(
            f"entry {name!r}: kind must be 'human' or 'agent', got {shown(entry.kind)}"
        )
    if not callable(entry.factory):
        raise ValueError(
            f"entry {name!r}: the factory must be a policy class or a function that builds "
            f"one, got {shown(entry.factory)}"
        )
    factory = entry.factory
    while isinstance(factory, functools.partial):
        factory = factory.func
    if isinstance(factory, type):  # the class it builds: its side and its kind
        cls, kind = factory, getattr(factory, "kind", None)
    else:  # a function: the class its return annotation names, perhaps a base: its side only
        cls, kind = _returned_class(factory), None
    if cls is not None:
        problem = _policy_mismatch(entry, cls, kind if isinstance(kind, str) else None)
        if problem:
            raise ValueError(problem)
    entry.check_params(entry.params)
    # A parameter without a default must be in the entry's params, or building the entry
    # fails in every match; the seed is the one that build gives.
    missing = [p for p in _required_params(entry.factory) if p != "seed" and p not in entry.params]
    if missing:
        raise ValueError(
            f"entry {name!r}: the factory's parameter(s) {', '.join(missing)} have no "
            "default; give a value in the entry's params"
        )


def _returned_class(factory: Callable[..., Any]) -> type | None:
    """The class a function's return annotation names, if it names one class."""
    try:
        hint = typing.get_type_hints(factory).get("return")
    except Exception:  # noqa: BLE001 - an annotation that does not resolve tells nothing
        return None
    return hint if isinstance(hint, type) else None


def _policy_mismatch(entry: Entry, cls: type, kind: Any) -> str | None:
    """Why a policy of class ``cls`` and kind ``kind`` (None: not known) cannot play
    ``entry``, or None. The engine reads a buyer's kind from its policy, so an entry's
    kind that its policy does not share would be listed one way and played the other."""
    base = SIDES[entry.side]
    if not issubclass(cls, base):
        other = next((s for s, b in SIDES.items() if issubclass(cls, b)), None)
        what = f"a {other} policy" if other else f"not a {base.__name__} (agents.base)"
        return f"entry {entry.name!r} is a {entry.side} entry, but {cls.__name__} is {what}"
    if getattr(cls, "sees_private", False) and not entry.reference:
        # It reads the buyers' private values: rated beside the others it would be
        # ranked as a competitor that no real seller could be.
        return (
            f"entry {entry.name!r}: {cls.__name__} reads private values (sees_private); "
            "register it with reference=True, as an upper reference rather than a competitor"
        )
    if kind is not None and kind not in (HUMAN, AGENT):
        return (
            f"entry {entry.name!r}: its policy {cls.__name__} has kind {shown(kind)}; a "
            f"policy's kind is {HUMAN!r} or {AGENT!r}"
        )
    if kind is not None and kind != entry.kind:
        return (
            f"entry {entry.name!r} is registered as kind {entry.kind!r}, but its policy "
            f"{cls.__name__} has kind {shown(kind)}: set kind = {entry.kind!r} on the class "
            f"or register the entry as {shown(kind)}"
        )
    return None


def entries(side: str | None = None) -> list[Entry]:
    return [e for e in _ENTRIES.values() if side is None or e.side == side]


def get(name: str, side: str | None = None) -> Entry:
    """The entry of a registered name or of a checkpoint directory (a path)."""
    what = f"{side} " if side else ""
    if not isinstance(name, str) or not name.strip():
        raise UnknownEntry(
            f"no {what}entry named {shown(name)}: a name is a non-empty string; "
            f"known: {_known(side)}"
        )
    entry = _ENTRIES.get(name)
    if entry is None and looks_like_path(name):
        entry = checkpoint_entry(name)
    if entry is None or (side is not None and entry.side != side):
        if entry is not None:
            raise UnknownEntry(
                f"{shown(name)} is a {entry.side}, not a {side}; {side}s: {_known(side)}"
            )
        raise UnknownEntry(f"unknown {what}entry {shown(name)}; known: {_known(side)}")
    return entry


def _known(side: str | None) -> str:
    return ", ".join(e.name for e in entries(side))


def looks_like_path(name: str) -> bool:
    """Whether a name is meant as a checkpoint directory rather than a registry name
    (never the empty name, which would be the current directory)."""
    if not name:
        return False
    if "/" in name or os.sep in name or name.startswith("."):
        return True
    try:
        return Path(name).is_dir()
    except OSError:  # e.g. too long for the filesystem: not a directory
        return False


_CHECKPOINTS: dict[str, tuple[tuple, dict[str, Entry]]] = {}
"""The entries of each checkpoint directory read in this process, with the files' stamps
(``_stamp``) they were read at: a directory written again (a new training run into the same
folder) is read again."""


def _stamp(root: str) -> tuple:
    """Size, modification time and inode of each file of a checkpoint directory (None for
    one that is missing: reading it then names the file)."""
    from agents.rl.checkpoint import CONFIG, WEIGHTS

    out = []
    for name in (CONFIG, WEIGHTS):
        try:
            st = os.stat(os.path.join(root, name))
        except OSError:
            out.append(None)
        else:
            out.append((st.st_size, st.st_mtime_ns, st.st_ino))
    return tuple(out)


def checkpoint_entry(path: str | os.PathLike) -> Entry:
    """The entry of a checkpoint directory: its name, side and kind come from its
    ``config.json`` (so moving the directory changes nothing), the policy is built from
    the bytes read here. Variants of an agent buyer: ``PATH+disclosed``, and
    ``PATH+learned`` when its network has a disclosure head. A bad checkpoint raises
    ``CheckpointError`` (a ValueError) naming the file."""
    from agents.rl.checkpoint import read_checkpoint  # torch only when needed

    text = str(path)
    suffix = next((x for x in VARIANT_SUFFIXES if text.endswith(x)), "")
    root = str(Path(text.removesuffix(suffix)).resolve()) if suffix else str(Path(text).resolve())
    stamp = _stamp(root)
    if root not in _CHECKPOINTS or _CHECKPOINTS[root][0] != stamp:
        _CHECKPOINTS[root] = (stamp, _checkpoint_variants(read_checkpoint(root), root))
    variants = _CHECKPOINTS[root][1]
    if suffix not in variants:
        raise UnknownEntry(f"{text!r}: no {suffix} variant of this checkpoint")
    return variants[suffix]


def _checkpoint_variants(data, source: str) -> dict[str, Entry]:
    """The entries of one checkpoint: the policy itself and, for an agent buyer, the
    variant that always discloses and (with a disclosure head) the one that chooses.
    Variants share the base's dice."""
    from agents.rl.checkpoint import build

    meta = data.meta()["policy"]
    if meta["side"] == "buyer":

        def factory(seed: int = 0, greedy: bool = True, disclosure: str = "never", _data=data):
            return build(_data, seed=seed, greedy=greedy, shared=True, disclosure=disclosure)
    else:

        def factory(seed: int = 0, greedy: bool = True, _data=data):
            return build(_data, seed=seed, greedy=greedy, shared=True)

    base = Entry(meta["name"], meta["side"], meta["kind"], factory, {},
                 f"Checkpoint {source}.", source=source)  # fmt: skip
    out = {"": base}
    if base.side == "buyer" and base.kind == AGENT:
        out[DISCLOSED_SUFFIX] = _disclosed_twin(base)
        if meta["net"].get("disclosure"):
            out[LEARNED_SUFFIX] = dataclasses.replace(
                base,
                name=base.name + LEARNED_SUFFIX,
                params={"disclosure": "learned"},
                description=base.description + " Chooses per market whether to disclose.",
            )
    return out


def register_checkpoint(data) -> Entry:
    """Register a checkpoint (its bytes, ``agents.rl.checkpoint.CheckpointData``) under the
    name in its config.json, with its variants, in this process: how a tournament worker
    on any node plays a checkpoint that the driver read. Registering the same policy again
    (the same ``identity``: config and weights) is a no-op; another entry of that name,
    even one with the same weights and another config, is an error."""
    meta = data.meta()
    name = meta["policy"]["name"]
    identity = data.identity
    old = _ENTRIES.get(name)
    if old is not None:
        if old.source.endswith("#" + identity) or _source_identity(old) == identity:
            return old
        raise ValueError(
            f"checkpoint {data.source} is named {name!r}, which another entry already uses "
            "(with other weights or another config.json); rename it (the name in its "
            "config.json)"
        )
    variants = _checkpoint_variants(data, f"{data.source}#{identity}")
    # Checked before any is added: a variant must not replace another entry (one's own
    # NAME+learned).
    taken = [e.name for e in variants.values() if e.name in _ENTRIES]
    if taken:
        raise ValueError(
            f"checkpoint {data.source} is named {name!r}, and its variant(s) "
            f"{', '.join(map(repr, taken))} are names another entry already uses; rename it "
            "(the name in its config.json)"
        )
    for entry in variants.values():
        _ENTRIES[entry.name] = entry
    return variants[""]


def _source_identity(entry: Entry) -> str | None:
    """The identity (``CheckpointData.identity``: config and weights) of an entry built
    from a checkpoint directory, if it is one."""
    from agents.rl.checkpoint import is_checkpoint, read_checkpoint

    if not entry.source or "#" in entry.source or not is_checkpoint(entry.source):
        return None
    return read_checkpoint(entry.source).identity


def _disclosed_twin(entry: Entry) -> Entry:
    return dataclasses.replace(
        entry,
        name=entry.name + DISCLOSED_SUFFIX,
        disclosed=True,
        description=entry.description + " Discloses that it is an agent.",
    )


def make(name: str, side: str | None = None, seed: int = 0, *, sample: bool = False, **params: Any):
    """The policy of entry ``name``. ``sample``: an entry with a sampling mode (an RL
    policy's ``greedy = False``: the stochastic policy it trains with) plays in it; the
    others play as always (they have one mode)."""
    entry = get(name, side)
    if sample and "greedy" in _factory_params(entry.factory, defaults_only=False):
        params.setdefault("greedy", False)
    return entry.build(seed, **params)


def is_population(spec: str) -> bool:
    """Whether a buyer spec names a population (``a:0.5,b:0.5``, ``human=a,agent=b``)
    rather than one entry."""
    return any(c in spec for c in ",:=")


def make_buyers(spec: str, seed: int = 0, *, sample: bool = False) -> BuyerPolicy:
    """A buyer entry name, or a population (see ``agents.population``):
    ``a:0.5,b:0.5`` by share, or ``human=a,agent=b`` by kind. ``sample`` as in ``make``,
    for every member."""
    if not isinstance(spec, str) or not spec.strip():
        raise UnknownEntry(
            f"no buyer entry or population named {shown(spec)}: give a non-empty string"
        )
    spec = spec.strip()
    if not is_population(spec):
        return make(spec, "buyer", seed, sample=sample)
    parts = [p.strip() for p in spec.split(",")]
    if not all(parts):  # "a:0.5,,b:0.5", "a:0.5,b:0.5,": a member left out by mistake?
        raise ValueError(f"population {spec!r}: an empty member between commas")
    if all("=" in p for p in parts):
        pairs = [_split(p, "=", spec) for p in parts]
        roles = dict(pairs)
        if len(pairs) != 2 or sorted(roles) != [AGENT, HUMAN]:
            raise ValueError(f"population {spec!r}: by kind needs exactly human=NAME,agent=NAME")
        for role in (HUMAN, AGENT):
            if get(roles[role], "buyer").kind != role:
                raise ValueError(
                    f"population {spec!r}: {roles[role]!r} is a {get(roles[role]).kind} entry, "
                    f"it cannot play the {role} buyers"
                )
        members = [make(roles[r], "buyer", seed, sample=sample) for r in (HUMAN, AGENT)]
        return Population(members, None, [roles[HUMAN], roles[AGENT]])
    if all(":" in p for p in parts):
        pairs = [_split(p, ":", spec) for p in parts]
        try:
            shares = [float(share) for _, share in pairs]
        except ValueError:
            raise ValueError(f"population {spec!r}: shares must be numbers") from None
        names = [name for name, _ in pairs]
        # By the entries they name: a checkpoint named by its path and by its name is one.
        if len({get(n, "buyer").name for n in names}) != len(names):
            raise ValueError(f"population {spec!r}: a member is named twice")
        return Population([make(n, "buyer", seed, sample=sample) for n in names], shares, names)
    raise ValueError(f"population {spec!r}: write NAME:SHARE,NAME:SHARE or human=NAME,agent=NAME")


def _split(part: str, sep: str, spec: str) -> tuple[str, str]:
    left, _, right = part.partition(sep)
    if not left.strip() or not right.strip():
        raise ValueError(f"population {spec!r}: cannot read {part!r}")
    return left.strip(), right.strip()


# ---------------------------------------------------------------------- scripted entries
# name, side, kind, factory, params, description
_SCRIPTED = [
    ("posted_price", "seller", AGENT, PostedPrice, {"markup": 0.5},
     "Posts cost x (1 + markup) and offers each buyer in turn its best product."),
    ("greedy_matcher", "seller", AGENT, GreedyMatcher, {},
     "Offers the (buyer, product, price) with the highest expected margin from public "
     "signals; learns from refusals; takes standing bids."),
    ("assignment_matcher", "seller", AGENT, AssignmentMatcher, {},
     "The greedy matcher's estimates and prices, its pair planned: the most valuable pair "
     "of a max-weight matching of the open buyers to the units in stock."),
    ("descending_offers", "seller", AGENT, DescendingOffers, {},
     "Goes round the buyers and concedes a step of the signal on every contact."),
    ("pricing_bandit", "seller", AGENT, PricingBandit, {},
     "Thompson sampling over price levels, learning within the episode."),
    ("disclosure_aware", "seller", AGENT, DisclosureAware, {},
     "Serves undisclosed buyers first and opens near value with buyers known to be agents."),
    ("random_target", "seller", AGENT, RandomTarget, {},
     "Baseline: a random active buyer, a random in-stock product, a posted markup."),
    ("truthful", "buyer", HUMAN, Truthful, {},
     "Accepts any offer worth at least its price; never counters."),
    ("threshold", "buyer", HUMAN, Threshold, {"margin": 0.1},
     "Accepts when the surplus is at least margin x the price range; never counters."),
    ("haggler", "buyer", HUMAN, Haggler, {},
     "Holds out for surplus early and counters with rising binding bids."),
    ("noisy_human", "buyer", HUMAN, NoisyHuman, {},
     "Logit acceptance anchored on the first price, growing impatient; counters now and then."),
    ("strategic", "buyer", AGENT, StrategicAgent, {},
     "Holds out, counters low near cost, concedes as turns and patience run out."),
]  # fmt: skip
for _name, _side, _kind, _factory, _params, _text in _SCRIPTED:
    register(Entry(_name, _side, _kind, _factory, _params, _text))
register(Entry("oracle", "seller", AGENT, OracleSeller, {},
               "REFERENCE: sees private values; offers the optimal assignment at exact values.",
               reference=True))  # fmt: skip

# ---------------------------------------------------------------------- shipped checkpoints
SHIPPED = Path(__file__).resolve().parent / "rl" / "checkpoints"
_SHIPPED = [
    ("rl_seller", "seller", AGENT,
     "PPO-trained seller (agents/rl/configs/seller.toml): one network over every "
     "(buyer, product) pair and a factorised price level that sees a max-weight plan "
     "of its matches, started from a retail specialist and trained on both default "
     "configs with a pull toward a specialist per config."),
    ("rl_buyer", "buyer", AGENT,
     "PPO-trained buyer counter-agent (agents/rl/configs/buyer.toml), trained against "
     "rl_seller and the scripted sellers."),
]  # fmt: skip


for _name, _side, _kind, _text in _SHIPPED:
    if (SHIPPED / _name / "config.json").is_file():
        # Lazily: the checkpoint is read (and torch imported) only when first built.
        _variants = {}
        for _suffix in ("", DISCLOSED_SUFFIX, LEARNED_SUFFIX):

            def _factory(seed: int = 0, greedy: bool = True, _path=SHIPPED / _name, _s=_suffix,
                         **kw):  # fmt: skip
                entry = checkpoint_entry(str(_path) + _s)
                return entry.factory(seed=seed, greedy=greedy, **{**entry.params, **kw})

            _variants[_suffix] = _factory
        _meta = json.loads((SHIPPED / _name / "config.json").read_text())["policy"]
        _ENTRIES[_name] = Entry(_name, _side, _kind, _variants[""], {}, _text,
                                source=str(SHIPPED / _name))  # fmt: skip
        if _side == "buyer" and _kind == AGENT:
            _ENTRIES[_name + DISCLOSED_SUFFIX] = _disclosed_twin(_ENTRIES[_name])
            if _meta["net"].get("disclosure"):
                _ENTRIES[_name + LEARNED_SUFFIX] = Entry(
                    _name + LEARNED_SUFFIX, _side, _kind, _variants[LEARNED_SUFFIX], {},
                    _text + " Chooses per market whether to disclose (its learned head).",
                    source=str(SHIPPED / _name),
                )  # fmt: skip

# ---------------------------------------------------------------------- shipped language model
SHIPPED_LM = Path(__file__).resolve().parent / "lm" / "checkpoints"


def _lm_seller(seed: int = 0, device: str = "cpu", threads: int = 0,
               _path: Path = SHIPPED_LM / "lm_seller"):  # fmt: skip
    """The shipped language-model seller, as its directory's policy.json says it plays
    (torch and transformers are imported only here, when it is first built)."""
    from agents.lm.policy import from_directory

    return from_directory(_path, seed=seed, device=device, threads=threads)


if (SHIPPED_LM / "lm_seller" / "policy.json").is_file():
    register(Entry(
        "lm_seller", "seller", AGENT, _lm_seller, {},
        "Language-model seller (agents/lm/configs/seller.toml): the tiny default model, "
        "warm-started on the greedy matcher, then GRPO; reads the analyst's short list.",
        hosting="actor", source=str(SHIPPED_LM / "lm_seller"),
    ))  # fmt: skip
