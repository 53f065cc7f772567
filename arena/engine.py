"""The batched engine: the rules of ``arena.market`` on arrays with a leading batch axis.

``arena.market.Market`` is the spec; this module must agree with it exactly,
trade by trade and metric by metric (``tests/test_engine_equivalence.py``).

Actions are arrays, one entry per market:

* seller: ``to`` (buyer index), ``product`` (-1: a talk turn with no offer),
  ``price``, and optionally ``malformed`` (the message did not parse);
* buyer: ``decision`` (0 reject, 1 accept, 2 counter; anything else is
  malformed), ``product`` and ``price`` of a counter, optionally ``malformed``.

Entries for markets that have ended (or, for ``answer``, that wait for no
answer) are ignored. Invalid entries are counted in ``seller_violations`` /
``buyer_violations`` with the same ``Violation`` codes as the reference; an
entry no four-part message could state (a buyer index that is not a whole
number in [0, 10**6), a product below -1, a price that is negative, not finite
or not below 10**12, a value that is not a number) is MALFORMED, as the same
action is for the reference market. Arrays of the wrong length raise
ValueError before anything changes: that is a bug in the caller, not agent
output.

Implementation note: state lives in (B, N) and (B, M) arrays; each turn touches
one buyer per market, so updates gather and scatter through flat indices
``b * N + i`` instead of looping or building (B, N) masks.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from arena.dialogue import Dialogue
from arena.generator import MarketBatch
from arena.observation import (
    ACCEPT,
    COUNTER,
    REJECT,
    BuyerObs,
    LastDecision,
    SellerObs,
    read_only,
)
from arena.protocol import MAX_INDEX, PRICE_LIMIT
from arena.rules import NUM_VIOLATIONS, Violation, disclosed_flags

_INVALID = int(LastDecision.INVALID)

# Per-buyer state, (B, N) each: name -> (value at the start of a market, dtype).
_BUYER_STATE: dict[str, tuple[object, type]] = {
    "active": (True, bool),
    "bought": (-1, np.int64),
    "paid": (np.nan, np.float64),
    "left": (False, bool),
    "n_messages": (0, np.int64),
    "first_price": (np.nan, np.float64),
    "last_product": (-1, np.int64),
    "last_price": (np.nan, np.float64),
    "last_decision": (int(LastDecision.NONE), np.int64),
    "counter_product": (-1, np.int64),
    "counter_price": (np.nan, np.float64),
}


class BatchedMarket:
    """B markets of one config, stepped together."""

    def __init__(
        self,
        batch: MarketBatch,
        disclose: np.ndarray | None = None,
        *,
        dialogue: bool | np.ndarray = False,
        prompts: bool = False,
    ) -> None:
        """``dialogue``: keep every message as text (``arena.dialogue``), shown in the
        observations; a (B,) bool mask keeps it for those rows only. ``prompts`` (implies
        ``dialogue``): keep, on every record, the text each side was shown before it wrote."""
        cfg = batch.config
        self.batch = batch
        self.config = cfg
        b, n, m = batch.values.shape
        self.shape = (b, n, m)
        self.lo, self.hi = cfg.price_range
        self.turns = cfg.turns
        self.patience = cfg.patience
        self._ar = np.arange(b)
        self._row_n = self._ar * n
        self._row_m = self._ar * m

        self._bind(batch, disclose)
        self.turn = np.zeros(b, np.int64)
        self.done = np.zeros(b, bool)
        self.stock = batch.inventory.astype(np.int64, copy=True)
        self.total_stock = self.stock.sum(axis=1)
        self.n_active = np.full(b, n, np.int64)
        for name, (fill, dtype) in _BUYER_STATE.items():
            setattr(self, name, np.full((b, n), fill, dtype))
        self.profit = np.zeros(b)
        self.seller_violations = np.zeros((b, NUM_VIOLATIONS), np.int64)
        self.buyer_violations = np.zeros((b, NUM_VIOLATIONS), np.int64)

        # The turn in flight: which markets wait for an answer, from whom, to what.
        self.pending = np.zeros(b, bool)
        self._pend_flat = np.zeros(b, np.int64)
        self._pend_product = np.full(b, -1, np.int64)
        self._pend_price = np.full(b, np.nan)

        only = None
        if isinstance(dialogue, np.ndarray):
            only = _flags(dialogue, b)
            dialogue = bool(only.any())
        self.dialogue = Dialogue(b, prompts, only) if dialogue or prompts else None

        # Flat views share memory with the (B, N) / (B, M) arrays above.
        self._f = {name: getattr(self, name).reshape(-1) for name in _BUYER_STATE}
        self._stock_flat = self.stock.reshape(-1)

    def _bind(self, batch: MarketBatch, disclose: np.ndarray | None) -> None:
        """Take the instances (and the disclosure flags they imply) from ``batch``."""
        b, n, m = self.shape
        self.batch = batch
        self.values = batch.values
        self.costs = batch.costs
        self._values_rows = batch.values.reshape(b * n, m)
        self._costs_flat = batch.costs.reshape(b * m)
        self.is_agent = batch.is_agent
        self.disclosed = disclosed_flags(self.config.disclosure, batch.is_agent, disclose)

    def restart(
        self, rows: np.ndarray, batch: MarketBatch, disclose: np.ndarray | None = None
    ) -> None:
        """Start fresh markets in ``rows`` (a (B,) bool mask), between turns.

        ``batch`` holds the instances to play from now on: the new markets in ``rows`` and,
        elsewhere, the very markets being played (their state carries on). ``disclose`` is
        the buyers' wish under the voluntary rule, for the whole new batch. A restarted row
        plays exactly as a fresh engine on its new market would (tested)."""
        rows = _flags(rows, self.shape[0])
        if self.pending.any():
            raise RuntimeError("answers are pending; restart between turns")
        if batch.values.shape != self.shape or batch.config != self.config:
            raise ValueError("restart needs a batch of the same config and shape")
        self._bind(batch, disclose)
        n = self.shape[1]
        self.turn[rows] = 0
        self.done[rows] = False
        self.stock[rows] = batch.inventory[rows]
        self.total_stock[rows] = self.stock[rows].sum(axis=1)
        self.n_active[rows] = n
        for name, (fill, _) in _BUYER_STATE.items():
            getattr(self, name)[rows] = fill
        self.profit[rows] = 0.0
        self.seller_violations[rows] = 0
        self.buyer_violations[rows] = 0
        if self.dialogue is not None:
            self.dialogue.restart(rows)

    # ------------------------------------------------------------------ views
    @property
    def all_done(self) -> bool:
        return bool(self.done.all())

    def seller_observation(self) -> SellerObs:
        """The seller's view of every market. Its arrays are read-only views of the
        market's own state: a policy that wrote into them would change the market."""
        return read_only(
            SellerObs(
                turns=self.turns,
                price_range=(self.lo, self.hi),
                patience=self.patience,
                turn=self.turn,
                done=self.done,
                costs=self.costs,
                inventory=self.batch.inventory,
                stock=self.stock,
                signals=self.batch.signals,
                active=self.active,
                bought=self.bought,
                left=self.left,
                n_messages=self.n_messages,
                last_product=self.last_product,
                last_price=self.last_price,
                last_decision=self.last_decision,
                counter_product=self.counter_product,
                counter_price=self.counter_price,
                disclosed=self.disclosed,
                key=self.batch.keys,
                dialogue=self.dialogue,
            )
        )

    def buyer_observation(self) -> BuyerObs:
        """The view of the buyers the markets ask now (``needs_answer``: those waiting);
        read-only, as the seller's."""
        f = self._pend_flat
        flat = self._f
        return read_only(
            BuyerObs(
                turns=self.turns,
                price_range=(self.lo, self.hi),
                patience=self.patience,
                needs_answer=self.pending.copy(),
                buyer=f - self._row_n,
                values=self._values_rows[f],
                costs=self.costs,
                stock=self.stock,
                offer_product=self._pend_product.copy(),
                offer_price=self._pend_price.copy(),
                n_messages=flat["n_messages"][f],
                first_price=flat["first_price"][f],
                counter_product=flat["counter_product"][f],
                counter_price=flat["counter_price"][f],
                is_agent=self.is_agent.reshape(-1)[f],
                disclosed=self.disclosed.reshape(-1)[f],
                turn=self.turn.copy(),
                key=self.batch.keys,
                num_buyers=self.shape[1],
                dialogue=self.dialogue,
            )
        )

    # ------------------------------------------------------------------ seller
    def offer(
        self,
        to: np.ndarray,
        product: np.ndarray,
        price: np.ndarray,
        malformed: np.ndarray | None = None,
        texts: Sequence[str] | None = None,
    ) -> BuyerObs | None:
        """Apply one seller message per live market. Returns the answering buyers' view,
        or None when no market waits for an answer. ``texts``: the messages as written,
        for the dialogue (the arrays decide; ``agents.text`` derives them from the texts)."""
        if self.pending.any():
            raise RuntimeError("answers are pending; call answer() first")
        b, n, m = self.shape
        given = (to, product, price, malformed)  # as the agent wrote them, for the dialogue
        prompts = self._prompts("seller", ~self.done) if self.dialogue is not None else None
        to, bad_to = _indices(to, b, "to")
        product, bad_product = _indices(product, b, "product")
        price, bad_price = _prices(price, b)
        has_offer = product != -1
        # What no four-part message can say is malformed, as it is for the reference market.
        unwritable = (
            _outside(to, 0, MAX_INDEX) | _outside(product, -1, MAX_INDEX) | (has_offer & bad_price)
        )
        for bad in (bad_to, bad_product):
            if bad is not None:
                unwritable |= bad
        malformed = unwritable if malformed is None else unwritable | _flags(malformed, b)
        live = ~self.done
        self.turn += live

        to_bad = _outside(to, 0, n)
        fi = self._row_n + np.where(to_bad, 0, to)
        prod_bad = _outside(product, 0, m)
        fp = self._row_m + np.where(prod_bad, 0, product)
        with np.errstate(invalid="ignore"):
            price_ok = (price >= self.lo) & (price <= self.hi)
        conditions = [
            to_bad,
            ~self._f["active"][fi],
            has_offer & prod_bad,
            has_offer & (self._stock_flat[fp] <= 0),
            has_offer & ~price_ok,
        ]
        codes = [
            Violation.UNKNOWN_BUYER,
            Violation.INACTIVE_BUYER,
            Violation.UNKNOWN_PRODUCT,
            Violation.OUT_OF_STOCK,
            Violation.PRICE_OUT_OF_RANGE,
        ]
        code = np.select([malformed, *conditions], [Violation.MALFORMED, *codes], 0)
        bad = live & (code != 0)
        self.seller_violations[self._ar, code] += bad
        valid = live & (code == 0)

        flat = self._f
        flat["n_messages"][fi] += valid
        offer_price = np.where(has_offer, price, np.nan)
        offer_product = np.where(has_offer, product, -1)
        _put(flat["last_product"], fi, valid, offer_product)
        _put(flat["last_price"], fi, valid, offer_price)
        first = flat["first_price"][fi]
        _put(flat["first_price"], fi, valid & has_offer & np.isnan(first), price)

        # A standing bid on this product at or above the offer trades at once.
        with np.errstate(invalid="ignore"):
            instant = (
                valid
                & has_offer
                & (flat["counter_product"][fi] == product)
                & (price <= flat["counter_price"][fi])
            )
        if instant.any():
            self._trade(instant, fi, fp, price)

        self.pending = valid & ~instant
        self._pend_flat = fi
        # Rows that wait for no answer get no offer (-1, nan), so an accept there is nothing.
        self._pend_product = np.where(valid, offer_product, -1)
        self._pend_price = np.where(valid, offer_price, np.nan)
        self._update_done(~self.pending)
        if self.dialogue is not None:
            self.dialogue.seller_turn(
                live, self.turn, *given, code, self.pending, instant, _check_texts(texts, b),
                prompts,
            )  # fmt: skip
        return self.buyer_observation() if self.pending.any() else None

    # ------------------------------------------------------------------ buyer
    def answer(
        self,
        decision: np.ndarray,
        product: np.ndarray,
        price: np.ndarray,
        malformed: np.ndarray | None = None,
        texts: Sequence[str] | None = None,
    ) -> None:
        """Apply the answers of the buyers ``offer`` asked; other rows are ignored.
        ``texts``: the answers as written, for the dialogue."""
        b, _, m = self.shape
        given = (decision, product, price, malformed)  # as the agent wrote them, for the dialogue
        prompts = self._prompts("buyer", self.pending) if self.dialogue is not None else None
        decision, bad_decision = _indices(decision, b, "decision")
        product, bad_product = _indices(product, b, "product")
        price, bad_price = _prices(price, b)
        is_counter = decision == COUNTER
        # A bid no message can state is malformed; the other decisions carry no bid.
        bid_bad = _outside(product, 0, MAX_INDEX) | bad_price
        if bad_product is not None:
            bid_bad |= bad_product
        unwritable = is_counter & bid_bad
        if bad_decision is not None:
            unwritable |= bad_decision
        malformed = unwritable if malformed is None else unwritable | _flags(malformed, b)
        ask = self.pending
        fi = self._pend_flat
        prod_bad = _outside(product, 0, m)
        fp = self._row_m + np.where(prod_bad, 0, product)
        with np.errstate(invalid="ignore"):
            price_ok = (price >= self.lo) & (price <= self.hi)
        conditions = [
            (decision < REJECT) | (decision > COUNTER),
            (decision == ACCEPT) & (self._pend_product < 0),
            is_counter & prod_bad,
            is_counter & (self._stock_flat[fp] <= 0),
            is_counter & ~price_ok,
        ]
        codes = [
            Violation.MALFORMED,
            Violation.ACCEPT_WITHOUT_OFFER,
            Violation.UNKNOWN_PRODUCT,
            Violation.OUT_OF_STOCK,
            Violation.PRICE_OUT_OF_RANGE,
        ]
        code = np.select([malformed, *conditions], [Violation.MALFORMED, *codes], 0)
        bad = ask & (code != 0)
        self.buyer_violations[self._ar, code] += bad
        ok = ask & (code == 0)

        flat = self._f
        _put(flat["last_decision"], fi, ask, np.where(bad, _INVALID, decision))
        accept = ok & (decision == ACCEPT)
        if accept.any():
            pp = self._pend_product
            fpp = self._row_m + np.where(pp >= 0, pp, 0)
            self._trade(accept, fi, fpp, self._pend_price)
        counter = ok & is_counter
        _put(flat["counter_product"], fi, counter, product)
        _put(flat["counter_price"], fi, counter, price)
        leave = None
        if self.patience > 0:
            leave = ask & ~accept & (flat["n_messages"][fi] >= self.patience)
            flat["left"][fi] |= leave
            flat["active"][fi] &= ~leave
            self.n_active -= leave
        self.pending = np.zeros_like(ask)
        self._update_done(ask)
        if self.dialogue is not None:
            self.dialogue.buyer_turn(
                ask, *given, code, accept,
                (self._pend_product, self._pend_price), leave, _check_texts(texts, b), prompts,
            )  # fmt: skip

    # ------------------------------------------------------------------ internals
    def _prompts(self, side: str, rows: np.ndarray) -> list[str] | None:
        """What each side is shown now, in ``rows`` (for dialogues that keep prompts)."""
        if not self.dialogue.prompts:
            return None
        if self.dialogue.only is not None:
            rows = rows & self.dialogue.only
        from arena.text import buyer_view, seller_view  # text rendering only when asked

        if side == "seller":
            obs, view = self.seller_observation(), seller_view
        else:
            obs, view = self.buyer_observation(), buyer_view
        return [view(obs, b) if rows[b] else "" for b in range(self.shape[0])]

    def _trade(self, mask: np.ndarray, fi: np.ndarray, fp: np.ndarray, price: np.ndarray) -> None:
        flat = self._f
        self._stock_flat[fp] -= mask
        self.total_stock -= mask
        _put(flat["bought"], fi, mask, fp - self._row_m)
        _put(flat["paid"], fi, mask, price)
        _put(flat["counter_product"], fi, mask, -1)
        _put(flat["counter_price"], fi, mask, np.nan)
        flat["active"][fi] &= ~mask
        self.n_active -= mask
        self.profit += np.where(mask, price - self._costs_flat[fp], 0.0)

    def _update_done(self, rows: np.ndarray) -> None:
        ended = (self.turn >= self.turns) | (self.n_active == 0) | (self.total_stock == 0)
        self.done |= rows & ended

    def buyer_surplus(self) -> np.ndarray:
        """(B, N): value - price for buyers that bought, 0 otherwise."""
        got = self.bought >= 0
        j = np.where(got, self.bought, 0)
        v = np.take_along_axis(self.values, j[..., None], axis=2)[..., 0]
        return np.where(got, v - np.where(got, self.paid, 0.0), 0.0)


_NOWHERE = -(2**40)  # an index no market has, for entries that are not integers at all


def _indices(x, b: int, name: str) -> tuple[np.ndarray, np.ndarray | None]:
    """(int64 indices, entries that are not an integer, or None when all are). A wrong
    length is the caller's bug and raises before anything changes; a bad entry only marks
    its own row."""
    a = np.asarray(x)
    if a.shape != (b,):
        raise ValueError(f"{name}: expected one entry per market, shape ({b},), got {a.shape}")
    if a.dtype == np.int64:  # the usual case, checked by range alone below
        return a, None
    if a.dtype.kind in "iu":
        ok = np.abs(a.astype(np.float64)) < 2.0**62
    else:
        a = _floats(a)
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(a) & (a == np.floor(a)) & (np.abs(a) < 2.0**62)
    return np.where(ok, a, _NOWHERE).astype(np.int64), ~ok


def _prices(x, b: int) -> tuple[np.ndarray, np.ndarray]:
    """(float64 prices, entries no message can state: not a number, negative, not finite,
    or too large for the protocol)."""
    a = np.asarray(x)
    if a.shape != (b,):
        raise ValueError(f"price: expected one entry per market, shape ({b},), got {a.shape}")
    p = _floats(a)
    with np.errstate(invalid="ignore"):
        ok = (p >= 0) & (p < PRICE_LIMIT)  # False for nan and for either infinity
    return p, ~ok


def _floats(a: np.ndarray) -> np.ndarray:
    """float64 entries of an action's array; for one that is not all real numbers (objects,
    strings, complex), each entry on its own as the reference market reads a row
    (``float(entry)``), NaN where that fails, so a bad entry marks its own row alone."""
    if a.dtype.kind in "iufb":
        return a.astype(np.float64, copy=False)
    return np.array([_float_or_nan(v) for v in a.tolist()], np.float64)


def _float_or_nan(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return float("nan")


def _outside(x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """x < lo or x >= hi in one comparison: shifted below zero wraps around as unsigned."""
    return (x - lo).view(np.uint64) >= np.uint64(hi - lo)


def _check_texts(texts: Sequence[str] | None, b: int) -> Sequence[str] | None:
    if texts is not None and len(texts) != b:
        raise ValueError(f"texts: expected one per market ({b}), got {len(texts)}")
    return texts


def _flags(x, b: int) -> np.ndarray:
    a = np.asarray(x)
    if a.shape != (b,):
        raise ValueError(f"malformed: expected shape ({b},), got {a.shape}")
    return a.astype(bool)


def _put(flat: np.ndarray, idx: np.ndarray, mask: np.ndarray, new) -> None:
    """flat[idx] = new where mask, unchanged elsewhere (idx holds one entry per market,
    so there are no duplicate writes)."""
    flat[idx] = np.where(mask, new, flat[idx])
