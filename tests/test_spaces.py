"""The fixed-size encodings of ``agents.spaces``: the seller's action to message mapping on a
hand-made market, every price level against prices written out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from agents.spaces import SellerSpace
from arena.observation import LastDecision, SellerObs

# Range [100, 600] (width 500); costs 200 and 350. Buyer 0 holds a standing bid on product 1
# at 412.349; buyer 1 holds none.
COSTS = [200.0, 350.0]
SIGNALS = [[400.127, 380.0], [240.5, 580.0]]


def _market(rows: int) -> SellerObs:
    """``rows`` copies of the market above, at its start but for buyer 0's bid."""

    def rep(x, dtype=None):
        return np.repeat(np.asarray(x, dtype)[None], rows, axis=0)

    return SellerObs(
        turns=8,
        price_range=(100.0, 600.0),
        patience=0,
        turn=np.full(rows, 1),
        done=np.zeros(rows, bool),
        costs=rep(COSTS, float),
        inventory=rep([1, 1], np.int64),
        stock=rep([1, 1], np.int64),
        signals=rep(SIGNALS, float),
        active=rep([True, True]),
        bought=rep([-1, -1], np.int64),
        left=rep([False, False]),
        n_messages=rep([1, 0], np.int64),
        last_product=rep([1, -1], np.int64),
        last_price=rep([420.0, np.nan], float),
        last_decision=rep([int(LastDecision.COUNTER), int(LastDecision.NONE)], np.int64),
        counter_product=rep([1, -1], np.int64),
        counter_price=rep([412.349, np.nan], float),
        disclosed=rep([False, False]),
        key=np.arange(rows, dtype=np.uint64),
    )


# Level k < 8: max(signal + offsets[k] * 500, cost) to the nearest cent, at most 600; the
# offsets (-0.25, -0.15, -0.1, -0.06, -0.03, 0, 0.03, 0.07) move the signal by -125, -75,
# -50, -30, -15, 0, +15, +35. Level 8: the standing bid on the pair rounded down to the
# cent, or without one the level of offset 0.
EXPECTED = {
    (0, 0): [275.13, 325.13, 350.13, 370.13, 385.13, 400.13, 415.13, 435.13, 400.13],
    (0, 1): [350.00, 350.00, 350.00, 350.00, 365.00, 380.00, 395.00, 415.00, 412.34],
    (1, 0): [200.00, 200.00, 200.00, 210.50, 225.50, 240.50, 255.50, 275.50, 240.50],
    (1, 1): [455.00, 505.00, 530.00, 550.00, 565.00, 580.00, 595.00, 600.00, 580.00],
}


def test_seller_actions_decode_to_the_documented_prices():
    space = SellerSpace(buyers=2, products=2)
    k = space.levels
    assert k == 9
    pairs = [(i, j, level) for (i, j) in EXPECTED for level in range(k)]
    action = np.array([(i * 2 + j) * k + level for i, j, level in pairs])
    out = space.decode(_market(len(action)), action)
    np.testing.assert_array_equal(out.to, [i for i, _, _ in pairs])
    np.testing.assert_array_equal(out.product, [j for _, j, _ in pairs])
    want = [p for prices in EXPECTED.values() for p in prices]
    np.testing.assert_allclose(out.price, want, rtol=0, atol=1e-9)


def test_the_bid_level_without_a_bid_plays_the_offset_nearest_zero():
    space = SellerSpace(buyers=2, products=2, offsets=(-0.1, 0.02))
    k = space.levels
    # (1, 1) has no bid: 580 + 0.02 * 500; (0, 1) has one: 412.349 down to the cent;
    # (0, 0) at level 0: 400.127 - 0.1 * 500.
    action = np.array([(1 * 2 + 1) * k + 2, (0 * 2 + 1) * k + 2, 0])
    out = space.decode(_market(3), action)
    np.testing.assert_allclose(out.price, [590.00, 412.34, 350.13], rtol=0, atol=1e-9)


@pytest.mark.parametrize("action", [-1, 2 * 2 * 9])
def test_an_action_outside_the_space_is_refused(action):
    with pytest.raises(ValueError, match=r"actions must lie in \[0, 36\)"):
        SellerSpace(buyers=2, products=2).decode(_market(1), np.array([action]))
