"""Market instances drawn from a config, a root seed and an index.

An instance depends only on ``(config, seed, index)``: its random stream is
``SeedSequence(seed, spawn_key=(index,))``, the same stream that
``SeedSequence(seed).spawn(index + 1)[index]`` gives. Every pairing of a
tournament therefore meets the same markets (common random numbers), and the
draws are made in a fixed order with shapes that depend only on N and M, so
configs that differ in anything else (costs, disclosure, noise scale, patience)
share the same underlying normals.

Valuation model (all spreads in units of the range width ``w = hi - lo``)::

    q_j        = quality_spread * g_j                       product quality, g_j ~ N(0, 1)
    m_j        = 0.5 + q_j                                  product mean value (fraction of range)
    t_ij       = wealth_spread * (sqrt(rho) z_i + sqrt(1 - rho) e_ij)   buyer taste
    values_ij  = lo + w * clip(m_j + t_ij, 0, 1)
    costs_j    = lo + w * cost_level * clip(m_j, 0, 1)
    signal_ij  = values_ij + signal_noise * w * n_ij        the public profile
    is_agent   = exactly floor(agent_share * N + 1/2) buyers, at random positions

with z_i, e_ij, n_ij ~ N(0, 1) independent and rho = value_correlation: before
clipping, one buyer's values across products have correlation exactly rho, the
spread between buyers is wealth_spread, and the spread between products is
quality_spread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from arena.config import MarketConfig
from arena.noise import hash64, normal, uniform


@dataclass(frozen=True, eq=False)
class MarketInstance:
    """One drawn market. Arrays are read-only; private: ``values`` and ``is_agent``."""

    config: MarketConfig
    seed: int
    index: int
    values: np.ndarray  # (N, M) private valuations
    costs: np.ndarray  # (M,) unit costs, public
    inventory: np.ndarray  # (M,) units in stock at the start, public
    signals: np.ndarray  # (N, M) public noisy profile of the values
    is_agent: np.ndarray  # (N,) bool, private unless disclosed
    key: int = 0  # a 64-bit key of this market for policies' counter-based noise

    @property
    def num_buyers(self) -> int:
        return self.values.shape[0]

    @property
    def num_products(self) -> int:
        return self.values.shape[1]


@dataclass(frozen=True, eq=False)
class MarketBatch:
    """B instances of one config, stacked on a leading batch axis."""

    config: MarketConfig
    seed: int
    indices: np.ndarray  # (B,)
    values: np.ndarray  # (B, N, M)
    costs: np.ndarray  # (B, M)
    inventory: np.ndarray  # (B, M)
    signals: np.ndarray  # (B, N, M)
    is_agent: np.ndarray  # (B, N)
    keys: np.ndarray  # (B,) uint64 market keys

    @property
    def size(self) -> int:
        return self.values.shape[0]

    def instance(self, b: int) -> MarketInstance:
        """The b-th market as a scalar instance (for the reference market and for oracles)."""
        return MarketInstance(
            config=self.config,
            seed=self.seed,
            index=int(self.indices[b]),
            values=self.values[b],
            costs=self.costs[b],
            inventory=self.inventory[b],
            signals=self.signals[b],
            is_agent=self.is_agent[b],
            key=int(self.keys[b]),
        )


MAX_INDEX = 2**63 - 1
"""The largest market index: batches hold indices as int64 (and the keyed draws of
``generate_keyed_batch`` read them so), as does a run's store."""


def market_seed(seed: int, index: int) -> np.random.SeedSequence:
    """The seed sequence of market ``index`` under root ``seed``."""
    if seed < 0 or index < 0:
        raise ValueError(f"seed and index must be >= 0, got seed={seed}, index={index}")
    if index > MAX_INDEX:
        raise ValueError(f"index must be <= {MAX_INDEX} (2**63 - 1), got a larger one")
    return np.random.SeedSequence(seed, spawn_key=(index,))


def generate(config: MarketConfig, seed: int, index: int) -> MarketInstance:
    """Draw market ``index`` of ``config`` under root ``seed`` (see the module docstring)."""
    ss = market_seed(seed, index)
    rng = np.random.default_rng(ss)
    n, m = config.buyers, config.products
    g = rng.standard_normal(m)
    z = rng.standard_normal(n)
    e = rng.standard_normal((n, m))
    noise = rng.standard_normal((n, m))
    order = rng.permutation(n)

    values, costs, signals = _valuation(config, g[None], z[None], e[None], noise[None])
    values, costs, signals = values[0], costs[0], signals[0]
    is_agent = np.zeros(n, dtype=bool)
    is_agent[order[: config.num_agents]] = True
    inventory = np.asarray(config.inventory_per_product, dtype=np.int64)
    for a in (values, costs, signals, is_agent, inventory):
        a.flags.writeable = False
    # A separate child key, so that policies' noise is independent of the draws above.
    key = int(ss.spawn(1)[0].generate_state(1, np.uint64)[0])
    return MarketInstance(config, seed, index, values, costs, inventory, signals, is_agent, key)


def _valuation(
    config: MarketConfig, g: np.ndarray, z: np.ndarray, e: np.ndarray, noise: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The valuation model of the module docstring on standard normals with a batch axis:
    g (B, M), z (B, N), e and noise (B, N, M) -> values, costs (B, M), signals."""
    lo, w = config.lo, config.width
    rho = config.value_correlation
    mean = 0.5 + config.quality_spread * g  # (B, M)
    taste = config.wealth_spread * (np.sqrt(rho) * z[:, :, None] + np.sqrt(1.0 - rho) * e)
    values = lo + w * np.clip(mean[:, None, :] + taste, 0.0, 1.0)
    costs = lo + w * config.cost_level * np.clip(mean, 0.0, 1.0)
    signals = values + config.signal_noise * w * noise
    return values, costs, signals


def generate_batch(config: MarketConfig, seed: int, indices: Sequence[int] | int) -> MarketBatch:
    """Markets ``indices`` (or ``range(indices)``), each exactly as ``generate`` draws it."""
    if isinstance(indices, int | np.integer) and not isinstance(indices, bool):
        indices = range(int(indices))
    idx = np.asarray(indices, dtype=np.int64)
    if idx.ndim != 1 or idx.size == 0:
        raise ValueError("indices must be a non-empty 1-d sequence of market indices")
    return stack_instances([generate(config, seed, int(i)) for i in idx])


_KEYED_STREAM = 0x7EA1  # keeps keyed training draws apart from every policy's noise


def generate_keyed_batch(config: MarketConfig, seed: int, indices: Sequence[int]) -> MarketBatch:
    """Markets ``indices`` of the same valuation model, drawn from counter-based normals
    keyed by (seed, index) (``arena.noise``) instead of one generator per market.

    About a hundred times faster than ``generate_batch`` and, like it, a pure function of
    (config, seed, index), but a different stream: these are not the markets that
    ``generate`` draws. Trainers use them (fresh markets on every row reset); tournaments
    and evaluations use ``generate_batch``, whose markets every run shares."""
    idx = np.asarray(indices, dtype=np.int64)
    if idx.ndim != 1 or idx.size == 0 or (idx < 0).any() or seed < 0:
        raise ValueError("indices must be a non-empty 1-d sequence of indices >= 0, seed >= 0")
    n, m = config.buyers, config.products
    base = hash64(np.uint64(seed), idx, _KEYED_STREAM)[:, None]  # (B, 1)

    def draws(stream: int, k: int) -> np.ndarray:
        return normal(base, stream, np.arange(k)[None, :])  # (B, k)

    g = draws(1, m)
    z = draws(2, n)
    e = draws(3, n * m).reshape(-1, n, m)
    noise = draws(4, n * m).reshape(-1, n, m)
    values, costs, signals = _valuation(config, g, z, e, noise)
    # Exactly num_agents agents per market, at the positions of the smallest keyed uniforms.
    rank = np.argsort(np.argsort(uniform(base, 5, np.arange(n)[None, :]), axis=1), axis=1)
    is_agent = rank < config.num_agents
    inventory = np.broadcast_to(np.asarray(config.inventory_per_product, np.int64), (idx.size, m))
    arrays = {
        "values": values,
        "costs": costs,
        "inventory": np.ascontiguousarray(inventory),
        "signals": signals,
        "is_agent": is_agent,
        "keys": hash64(base[:, 0], 6),
        "indices": idx.copy(),
    }
    for a in arrays.values():
        a.flags.writeable = False
    return MarketBatch(config=config, seed=int(seed), **arrays)


def replace_rows(batch: MarketBatch, rows: np.ndarray, new: MarketBatch) -> MarketBatch:
    """``batch`` with the markets of ``new`` (one per True entry of ``rows``, in order) put
    in the rows marked (a (B,) bool mask). Read-only like every batch."""
    rows = np.asarray(rows, bool)
    if new.config != batch.config or new.size != int(rows.sum()):
        raise ValueError("replace_rows: need one market of the same config per marked row")
    arrays = {}
    for name in ("values", "costs", "inventory", "signals", "is_agent", "keys", "indices"):
        a = getattr(batch, name).copy()
        a[rows] = getattr(new, name)
        a.flags.writeable = False
        arrays[name] = a
    return MarketBatch(config=batch.config, seed=batch.seed, **arrays)


def instance_from_arrays(
    config: MarketConfig,
    values: np.ndarray,
    costs: np.ndarray,
    inventory: np.ndarray | None = None,
    signals: np.ndarray | None = None,
    is_agent: np.ndarray | None = None,
) -> MarketInstance:
    """A hand-made instance (for tests, tutorials and replaying recorded markets).

    Shapes must match the config's N and M; missing signals equal the values and
    missing inventory is the config's.
    """
    values = np.array(values, dtype=float)
    n, m = config.buyers, config.products
    if values.shape != (n, m):
        raise ValueError(f"values: expected shape ({n}, {m}), got {values.shape}")
    costs = np.array(costs, dtype=float)
    if costs.shape != (m,):
        raise ValueError(f"costs: expected shape ({m},), got {costs.shape}")
    inv = np.array(config.inventory_per_product if inventory is None else inventory, np.int64)
    if inv.shape != (m,):
        raise ValueError(f"inventory: expected shape ({m},), got {inv.shape}")
    sig = values.copy() if signals is None else np.array(signals, dtype=float)
    agent = np.zeros(n, bool) if is_agent is None else np.array(is_agent, dtype=bool)
    for a in (values, costs, inv, sig, agent):
        a.flags.writeable = False
    return MarketInstance(config, 0, 0, values, costs, inv, sig, agent)


def stack_instances(instances: Sequence[MarketInstance]) -> MarketBatch:
    """Stack instances of one config into a batch."""
    if not instances:
        raise ValueError("need at least one instance")
    cfg = instances[0].config
    if any(x.config != cfg for x in instances):
        raise ValueError("all instances of a batch must share one config")
    arrays = {
        "values": np.stack([x.values for x in instances]),
        "costs": np.stack([x.costs for x in instances]),
        "inventory": np.stack([x.inventory for x in instances]),
        "signals": np.stack([x.signals for x in instances]),
        "is_agent": np.stack([x.is_agent for x in instances]),
        "keys": np.array([x.key for x in instances], np.uint64),
        "indices": np.array([x.index for x in instances], np.int64),
    }
    # Batches are shared by every pairing that meets these markets: keep them read-only.
    for a in arrays.values():
        a.flags.writeable = False
    return MarketBatch(config=cfg, seed=instances[0].seed, **arrays)
