"""Full-information ground truth for one market instance.

A market has ``N`` buyers (rows) and ``M`` products: ``values[i, j]`` is buyer
``i``'s value for one unit of product ``j``, ``costs[j]`` the unit cost and
``inventory[j]`` the number of units on offer. Each buyer buys at most one
unit. The surplus of a pair is ``max(values[i, j] - costs[j], 0)``; a pair with
no positive surplus is never traded here.

Everything in this module is exact combinatorics (a max-weight assignment) or a
small linear program, so metrics and rewards that use it are verifiable:

- ``optimal_welfare`` / ``optimal_assignment``: the best total surplus, with an
  optional cap on the number of trades.
- ``welfare_bound``: W*_T, the same optimum when a market of ``T`` turns can
  close at most ``T`` deals; this is the full-information bound metrics divide by
  (the value is ``w_star`` in metrics, rewards and stored rows; W* without the turn
  limit is ``w_star_unlimited``).
- ``walrasian_prices``: the lowest and highest competitive (Walrasian) prices of
  the Shapley-Shubik assignment game with multi-unit supply.
- ``vcg_payments``: the VCG payment of each buyer. They add up to the revenue at
  the lowest Walrasian prices (Leonard 1983).

Revenue benchmarks for a seller therefore order as
VCG (= lowest Walrasian) <= highest Walrasian <= W* (and W*_T <= W*).
"""

from __future__ import annotations

import operator

import numpy as np

__all__ = [
    "optimal_assignment",
    "optimal_welfare",
    "optimal_welfare_batch",
    "vcg_payments",
    "walrasian_prices",
    "welfare_bound",
]


# ---------------------------------------------------------------------------
# Input checks
# ---------------------------------------------------------------------------


def _as_inventory(inventory: object, shape: tuple[int, ...]) -> np.ndarray:
    inv = np.asarray(inventory)
    if inv.shape != shape:
        raise ValueError(f"inventory must have shape {shape}, got {inv.shape}")
    if inv.dtype.kind in "iu":
        out = inv.astype(np.int64, copy=False)
    elif inv.dtype.kind == "f":
        # Whole floats (2.0) are accepted because configs often arrive as floats.
        if not np.isfinite(inv).all() or (inv != np.floor(inv)).any():
            raise ValueError("inventory must hold whole numbers of units")
        out = inv.astype(np.int64)
    else:
        raise ValueError(f"inventory must be integers, got dtype {inv.dtype}")
    if (out < 0).any():
        raise ValueError("inventory must be non-negative")
    return out


def _check_market(
    values: object, costs: object, inventory: object
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2:
        raise ValueError(f"values must be a 2-D (buyers, products) array, got shape {v.shape}")
    c = np.asarray(costs, dtype=np.float64)
    if c.shape != (v.shape[1],):
        raise ValueError(f"costs must have shape ({v.shape[1]},), got {c.shape}")
    if not np.isfinite(v).all():
        raise ValueError("values must be finite (no nan or inf)")
    if not np.isfinite(c).all():
        raise ValueError("costs must be finite (no nan or inf)")
    return v, c, _as_inventory(inventory, (v.shape[1],))


def _check_max_trades(max_trades: object) -> int | None:
    if max_trades is None:
        return None
    if isinstance(max_trades, bool):
        raise ValueError("max_trades must be a non-negative int or None, got a bool")
    try:
        k = operator.index(max_trades)
    except TypeError:
        raise ValueError(
            f"max_trades must be a non-negative int or None, got {max_trades!r}"
        ) from None
    if k < 0:
        raise ValueError(f"max_trades must be non-negative, got {k}")
    return k


# ---------------------------------------------------------------------------
# Core solver (inputs already checked)
# ---------------------------------------------------------------------------


def _unit_weights(
    surplus: np.ndarray, inventory: np.ndarray, max_trades: int | None, smax: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray]:
    """The assignment matrix of markets with clipped surplus (..., N, M) that share one
    inventory and one cap, and the product of each unit column. ``smax`` (...,) is each
    market's largest surplus."""
    n = surplus.shape[-2]
    # A buyer takes one unit, so more than N copies of a product can never all be used.
    unit_product = np.repeat(np.arange(surplus.shape[-1]), np.minimum(inventory, n))
    weights = surplus[..., unit_product]
    if max_trades is not None and max_trades < min(n, unit_product.size):
        # N - k dummy columns worth more than any single pair: with at least N columns
        # every buyer is matched, and swapping a real pair for a free dummy always
        # gains, so an optimum fills all dummies and trades exactly k real units.
        big = 2.0 * np.asarray(smax)[..., None, None]  # > any one surplus, at any scale
        dummies = np.broadcast_to(big, (*surplus.shape[:-1], n - max_trades))
        weights = np.concatenate([weights, dummies], axis=-1)
    return weights, unit_product


def _solve(
    surplus: np.ndarray, inventory: np.ndarray, max_trades: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """Buyers and products of one max-surplus assignment, positive-surplus pairs only.

    ``surplus`` is the clipped (N, M) surplus matrix. Returned buyers are sorted.
    """
    n = surplus.shape[0]
    empty = np.zeros(0, dtype=np.int64)
    if n == 0 or surplus.size == 0 or max_trades == 0:
        return empty, empty
    smax = surplus.max()
    if smax <= 0.0:
        return empty, empty
    weights, unit_product = _unit_weights(surplus, inventory, max_trades, smax)
    n_units = unit_product.size
    if n_units == 0:
        return empty, empty
    # scipy.optimize is imported on first use: importing it takes most of a second, and
    # readers of stored results (reports) need the metric names, not the solver.
    from scipy.optimize import linear_sum_assignment

    rows, cols = linear_sum_assignment(weights, maximize=True)
    real = cols < n_units
    rows, cols = rows[real], cols[real]
    prods = unit_product[cols]
    keep = surplus[rows, prods] > 0.0
    return rows[keep].astype(np.int64), prods[keep].astype(np.int64)


def _surplus(values: np.ndarray, costs: np.ndarray) -> np.ndarray:
    return np.maximum(values - costs, 0.0)


def _welfare(surplus: np.ndarray, rows: np.ndarray, prods: np.ndarray) -> float:
    # Summing the chosen pairs avoids the rounding of subtracting the dummy weights.
    return float(surplus[rows, prods].sum())


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


def optimal_welfare(
    values: np.ndarray,
    costs: np.ndarray,
    inventory: np.ndarray,
    max_trades: int | None = None,
) -> float:
    """Max total surplus over assignments of buyers to units.

    At most ``max_trades`` trades when given (``None``: no cap, ``0``: no trade).
    """
    v, c, inv = _check_market(values, costs, inventory)
    k = _check_max_trades(max_trades)
    s = _surplus(v, c)
    rows, prods = _solve(s, inv, k)
    return _welfare(s, rows, prods)


def welfare_bound(
    values: np.ndarray, costs: np.ndarray, inventory: np.ndarray, turns: int
) -> float:
    """W*_T: the turn-limited full-information welfare bound.

    A market of ``turns`` turns can close at most one deal per turn, so the best
    any seller could reach, even knowing every value, is the optimal welfare with
    at most ``turns`` trades.
    """
    return optimal_welfare(values, costs, inventory, max_trades=turns)


def optimal_assignment(
    values: np.ndarray,
    costs: np.ndarray,
    inventory: np.ndarray,
    max_trades: int | None = None,
) -> list[tuple[int, int]]:
    """(buyer, product) pairs of one optimal assignment, sorted by buyer.

    Only pairs with positive surplus are listed. The choice among tied optima is
    deterministic: the same input always gives the same pairs.
    """
    v, c, inv = _check_market(values, costs, inventory)
    k = _check_max_trades(max_trades)
    rows, prods = _solve(_surplus(v, c), inv, k)
    return [(int(i), int(j)) for i, j in zip(rows, prods, strict=True)]


def optimal_welfare_batch(
    values: np.ndarray,
    costs: np.ndarray,
    inventory: np.ndarray,
    max_trades: int | np.ndarray | None = None,
) -> np.ndarray:
    """``optimal_welfare`` for B markets of equal shape: values (B, N, M), costs and
    inventory (B, M), ``max_trades`` None, one int, or (B,) ints. Returns (B,)."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 3:
        raise ValueError(f"values must be a 3-D (batch, buyers, products) array, got {v.shape}")
    b, _, m = v.shape
    c = np.asarray(costs, dtype=np.float64)
    if c.shape != (b, m):
        raise ValueError(f"costs must have shape ({b}, {m}), got {c.shape}")
    if not np.isfinite(v).all():
        raise ValueError("values must be finite (no nan or inf)")
    if not np.isfinite(c).all():
        raise ValueError("costs must be finite (no nan or inf)")
    inv = _as_inventory(inventory, (b, m))
    if max_trades is None:
        caps: list[int | None] = [None] * b
    elif np.ndim(max_trades) == 0:
        caps = [_check_max_trades(max_trades)] * b
    else:
        arr = np.asarray(max_trades)
        if arr.shape != (b,):
            raise ValueError(f"max_trades must be None, an int or shape ({b},), got {arr.shape}")
        if arr.dtype.kind not in "iu":
            raise ValueError(f"max_trades must be integers, got dtype {arr.dtype}")
        if (arr < 0).any():
            raise ValueError("max_trades must be non-negative")
        caps = [int(k) for k in arr]
    s = np.maximum(v - c[:, None, :], 0.0)
    return _welfare_batch(s, inv, caps)


def _welfare_batch(s: np.ndarray, inv: np.ndarray, caps: list[int | None]) -> np.ndarray:
    """``_welfare(_solve(...))`` of every market of a batch, bit for bit, with the setup
    done once per group of markets that share an inventory and a cap (one group, in a
    batch drawn from one config), so that only the assignment solver runs per market."""
    b, n, m = s.shape
    out = np.zeros(b, dtype=np.float64)
    if b == 0 or n == 0 or m == 0:
        return out
    # None (no cap) behaves like any cap of at least N: every buyer may trade.
    cap = np.array([n if k is None else min(k, n) for k in caps], dtype=np.int64)
    _, group = np.unique(np.column_stack([inv, cap]), axis=0, return_inverse=True)
    smax = s.max(axis=(1, 2))
    from scipy.optimize import linear_sum_assignment

    for g in range(int(group.max()) + 1):
        members = np.flatnonzero((group.ravel() == g) & (smax > 0.0))
        if members.size == 0:
            continue
        k = int(cap[members[0]])
        weights, unit_product = _unit_weights(s[members], inv[members[0]], k, smax[members])
        n_units = unit_product.size
        if n_units == 0 or k == 0:
            continue
        for t, w in zip(members, weights, strict=True):
            rows, cols = linear_sum_assignment(w, maximize=True)
            real = cols < n_units
            picked = s[t, rows[real], unit_product[cols[real]]]
            out[t] = float(picked[picked > 0.0].sum())
    return out


def walrasian_prices(
    values: np.ndarray, costs: np.ndarray, inventory: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(lowest, highest) Walrasian price of each product, shape (M,) each.

    The Shapley-Shubik assignment game with multi-unit supply and the seller's
    reservation price equal to cost. Equilibria are the optimal solutions of the
    dual LP ``min sum_i u_i + sum_j inventory_j r_j`` subject to
    ``u_i + r_j >= values[i, j] - costs[j]``, ``u, r >= 0``, with prices
    ``costs + r``. That set is a lattice, so its componentwise lowest (highest)
    point minimizes (maximizes) ``sum r`` over the optimal duals.

    The optimal duals are selected exactly by complementary slackness with an
    optimal assignment (``u_i + r_j`` equals the surplus on every traded pair,
    ``u_i = 0`` for an unserved buyer, ``r_j = 0`` for a product with unsold
    units), which describes the same set as fixing the dual objective at its
    optimum but needs no tolerance.

    Conventions: a product with zero inventory is not on the market and gets
    price = cost in both vectors (its dual price is otherwise unbounded above);
    the equilibrium conditions then concern products with stock only. A
    product with unsold units has price = cost in both vectors.
    """
    v, c, inv = _check_market(values, costs, inventory)
    n, m = v.shape
    s = _surplus(v, c)
    rows, prods = _solve(s, inv, None)
    r_low = np.zeros(m)
    r_high = np.zeros(m)
    sold = np.bincount(prods, minlength=m)
    # Only sold-out products can carry a positive dual price (complementary slackness).
    free = (inv > 0) & (sold == inv)
    if n == 0 or not free.any():
        return c + r_low, c + r_high

    # Variables: u (N buyers) then r (M products).
    assigned = np.zeros(n, dtype=bool)
    assigned[rows] = True
    bounds = [(0.0, None) if a else (0.0, 0.0) for a in assigned]
    bounds += [(0.0, None) if f else (0.0, 0.0) for f in free]

    # Pairs without positive surplus give constraints that u, r >= 0 already imply, and
    # a product without stock is off the market, so nobody's demand for it binds.
    pi, pj = np.nonzero((s > 0.0) & (inv > 0))
    a_ub = np.zeros((pi.size, n + m))
    a_ub[np.arange(pi.size), pi] = -1.0
    a_ub[np.arange(pi.size), n + pj] = -1.0
    b_ub = -s[pi, pj]

    a_eq = np.zeros((rows.size, n + m))
    a_eq[np.arange(rows.size), rows] = 1.0
    a_eq[np.arange(rows.size), n + prods] = 1.0
    b_eq = s[rows, prods]

    objective = np.zeros(n + m)
    objective[n:] = 1.0
    from scipy.optimize import linprog

    extremes = []
    for sign in (1.0, -1.0):
        res = linprog(
            sign * objective,
            A_ub=a_ub if pi.size else None,
            b_ub=b_ub if pi.size else None,
            A_eq=a_eq if rows.size else None,
            b_eq=b_eq if rows.size else None,
            bounds=bounds,
            method="highs",
        )
        if res.status != 0:
            raise RuntimeError(f"Walrasian price LP failed: {res.message}")
        extremes.append(np.where(free, np.maximum(res.x[n:], 0.0), 0.0))
    r_low, r_high = extremes
    # Solver round-off must not make the lattice bounds cross.
    r_high = np.maximum(r_high, r_low)
    return c + r_low, c + r_high


def vcg_payments(values: np.ndarray, costs: np.ndarray, inventory: np.ndarray) -> np.ndarray:
    """VCG payment of each buyer, shape (N,); 0 for a buyer who is not served.

    ``payment_i = values[i, a(i)] - (W - W_{-i})`` where ``a`` is the optimal
    assignment, ``W`` the optimal welfare and ``W_{-i}`` the optimal welfare
    without buyer ``i``. Each payment equals the lowest Walrasian price of the
    buyer's product, so their sum is the revenue at the lowest Walrasian prices.
    """
    v, c, inv = _check_market(values, costs, inventory)
    n = v.shape[0]
    s = _surplus(v, c)
    rows, prods = _solve(s, inv, None)
    total = _welfare(s, rows, prods)
    pay = np.zeros(n)
    everyone = np.arange(n)
    for i, j in zip(rows, prods, strict=True):
        others = everyone != i
        s_minus = s[others]
        r_minus, p_minus = _solve(s_minus, inv, None)
        marginal = total - _welfare(s_minus, r_minus, p_minus)
        pay[i] = v[i, j] - marginal
    return pay
