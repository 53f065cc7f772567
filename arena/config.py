"""Market configuration: the public schema of every TOML ``[market]`` table.

A ``MarketConfig`` is a frozen dataclass, validated on construction; a bad field
raises one ``ValueError`` naming the field and its allowed range. The formula
that turns a config and a seed into valuations lives in ``arena.generator`` and
is documented there.
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import asdict, dataclass, fields
from typing import Any

from arena.protocol import PRICE_LIMIT
from arena.words import shown

DISCLOSURE_RULES = ("hidden", "mandatory", "voluntary")
# The narrowest range that still leaves a hundred price levels in whole cents.
MIN_WIDTH = 1.0


@dataclass(frozen=True)
class MarketConfig:
    """One market structure. Field names are the TOML schema.

    Units: every "spread" and the signal noise are fractions of the price-range
    width ``hi - lo``, so a config keeps its meaning when the price range moves.
    """

    buyers: int = 8
    """N, the number of independent buyers (each buys at most one unit)."""
    products: int = 4
    """M, the number of substitutable products in the catalog."""
    inventory: int | tuple[int, ...] = 2
    """Units in stock per product: one int for every product, or one per product (each >= 1)."""
    turns: int = 12
    """T, the seller's total budget of messages over all buyers."""
    price_range: tuple[float, float] = (0.0, 100.0)
    """[lo, hi]: every valuation and every valid price lies in this range; 0 <= lo,
    hi - lo >= 1 (prices are quoted in cents) and hi < 1e12 (``arena.protocol.PRICE_LIMIT``:
    no message states a price at or above it)."""
    value_correlation: float = 0.5
    """rho in [0, 1]: correlation of one buyer's tastes across products (before clipping)."""
    quality_spread: float = 0.1
    """Std of the product quality shifts q_j (spread between products)."""
    wealth_spread: float = 0.2
    """Std of a buyer's taste around a product's mean value (spread between buyers)."""
    cost_level: float = 0.4
    """Unit cost as a fraction of the way from lo to the product's mean value, in [0, 1)."""
    signal_noise: float = 0.1
    """Std of the noise on the public profile (0: the seller sees the values exactly)."""
    patience: int = 0
    """A buyer leaves after this many valid seller messages without a trade; 0: never."""
    agent_share: float = 0.0
    """Fraction of buyers (rounded to a whole count) that are agents rather than humans."""
    disclosure: str = "hidden"
    """hidden | mandatory | voluntary: what the seller is told about agent buyers."""

    def __post_init__(self) -> None:
        _int_in("buyers", self.buyers, 1, 10_000)
        _int_in("products", self.products, 1, 1_000)
        _int_in("turns", self.turns, 1, 1_000_000)
        _int_in("patience", self.patience, 0, 1_000_000)
        inv = self.inventory
        if isinstance(inv, list | tuple):
            if len(inv) != self.products:
                raise ValueError(
                    f"inventory: expected one count per product ({self.products}), got {len(inv)}"
                )
            for k in inv:
                _int_in("inventory", k, 1, 1_000_000)
            object.__setattr__(self, "inventory", tuple(int(k) for k in inv))
        else:
            _int_in("inventory", inv, 1, 1_000_000)
        pr = self.price_range
        if not isinstance(pr, list | tuple) or len(pr) != 2:
            raise ValueError(f"price_range: expected [lo, hi], got {pr!r}")
        need = f"0 <= lo < hi < {PRICE_LIMIT:.0e}"
        lo, hi = (_finite("price_range", x, need) for x in pr)
        if not 0 <= lo < hi < PRICE_LIMIT:
            raise ValueError(f"price_range: need {need}, got [{lo}, {hi}]")
        if hi - lo < MIN_WIDTH:
            # Offers are quoted in cents; a narrower range leaves too few price levels.
            raise ValueError(f"price_range: need hi - lo >= {MIN_WIDTH}, got [{lo}, {hi}]")
        object.__setattr__(self, "price_range", (lo, hi))
        for name, lo_, hi_, open_ in (
            ("value_correlation", 0.0, 1.0, False),
            ("quality_spread", 0.0, 10.0, False),
            ("wealth_spread", 0.0, 10.0, False),
            ("cost_level", 0.0, 1.0, True),
            ("signal_noise", 0.0, 1e6, False),
            ("agent_share", 0.0, 1.0, False),
        ):
            _float_in(name, getattr(self, name), lo_, hi_, hi_open=open_)
            # Stored as float, so that 0 and 0.0 give one config (and one spec on resume).
            object.__setattr__(self, name, float(getattr(self, name)))
        if self.disclosure not in DISCLOSURE_RULES:
            rules = ", ".join(DISCLOSURE_RULES)
            raise ValueError(f"disclosure: expected one of {rules}, got {self.disclosure!r}")

    # Derived values are properties, never fields filled in later.
    @property
    def inventory_per_product(self) -> tuple[int, ...]:
        inv = self.inventory
        return inv if isinstance(inv, tuple) else (int(inv),) * self.products

    @property
    def lo(self) -> float:
        return self.price_range[0]

    @property
    def hi(self) -> float:
        return self.price_range[1]

    @property
    def width(self) -> float:
        return self.price_range[1] - self.price_range[0]

    @property
    def num_agents(self) -> int:
        return int(math.floor(self.agent_share * self.buyers + 0.5))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MarketConfig:
        """Build from a TOML table; unknown keys are an error, not silently dropped."""
        if not isinstance(data, dict):
            raise ValueError(f"market config must be a table, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"unknown market field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["price_range"] = list(self.price_range)
        if isinstance(self.inventory, tuple):
            out["inventory"] = list(self.inventory)
        return out


def finite_float(x: Any) -> float | None:
    """``x`` as a finite float; None for a non-number (a bool included), inf, NaN or an
    integer too large for a float."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    try:
        value = float(x)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def _int_in(name: str, value: Any, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}: expected an integer in [{lo}, {hi}], got {value!r}")
    if not lo <= value <= hi:
        raise ValueError(f"{name}: expected an integer in [{lo}, {hi}], got {shown(value)}")


def _finite(name: str, value: Any, bounds: str = "a finite number") -> float:
    """``value`` as a float; an integer too large for one is refused with ``bounds``, what
    the field takes."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name}: expected a number, got {value!r}")
    try:
        x = float(value)
    except OverflowError:
        raise ValueError(f"{name}: expected {bounds}, got {shown(value)}") from None
    if not math.isfinite(x):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    return x


def _float_in(name: str, value: Any, lo: float, hi: float, hi_open: bool = False) -> None:
    bounds = f"a number in [{lo}, {hi}{')' if hi_open else ']'}"
    x = _finite(name, value, bounds)
    ok = lo <= x < hi if hi_open else lo <= x <= hi
    if not ok:
        raise ValueError(f"{name}: expected {bounds}, got {shown(value)}")


# A field list for docs and the CLI, kept next to the class it describes.
CONFIG_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(MarketConfig))


def read_toml(path: str, what: str) -> dict[str, Any]:
    """A TOML file as a dict; an unreadable or malformed file is one ValueError that names
    the file, what it was meant to be, and the problem."""
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as err:
        raise ValueError(f"{path}: cannot read {what} ({err.strerror})") from None
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{path}: not UTF-8 text (byte 0x{err.object[err.start]:02x} at position "
            f"{err.start}); save the {what} as UTF-8"
        ) from None
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{path}: not valid TOML ({err})") from None
    except ValueError as err:  # an integer past Python's 4300-digit limit on conversion
        raise ValueError(f"{path}: cannot read {what} ({str(err).split(';')[0]})") from None


def load_market_file(path: str) -> MarketConfig:
    """Read a market config: the ``[market]`` table of a TOML file, or with ``FILE:NAME``
    the ``[configs.NAME]`` table of a tournament spec (``tournaments/specs/default.toml:retail``;
    a path that names a file is a file, colons and all). Errors name the file and the
    problem."""
    file, name = path, None
    if ":" in path and not os.path.isfile(path):
        file, _, name = path.rpartition(":")
    data = read_toml(file, "market file")
    if name is None:
        if "market" not in data:
            raise ValueError(f"{path}: no [market] table (or name a spec's config: FILE:NAME)")
        table = data["market"]
    else:
        tables = data.get("configs", data.get("markets", {}))  # [markets.NAME]: older specs
        if not isinstance(tables, dict) or name not in tables:
            known = ", ".join(sorted(tables)) if isinstance(tables, dict) else ""
            raise ValueError(
                f"{file}: no [configs.{name}] table" + (f"; it has {known}" if known else "")
            )
        table = tables[name]
    try:
        return MarketConfig.from_dict(table)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path}: {err}") from None
