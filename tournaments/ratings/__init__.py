"""Ratings from tournament records: Elo, Bradley-Terry, bootstrap intervals, paired leaderboards.

Data model
----------
Every rating function takes the same three columns, one entry per game::

    a[i], b[i]   player names (str); a[i] != b[i]
    scores[i]    the score of a[i] against b[i], a float in [0, 1]; b[i] scores 1 - scores[i]

Fractional scores are allowed and used as they are (0.7 means a took 70% of that game).
Sellers and buyers share one scale: pass seller entries as ``a``, buyer entries as ``b`` and
the seller's market score (``score``, defined in ``arena.rewards``) as ``scores``. Names
must be unique across the two sides, so prefix them when a name could be both
(``"seller:greedy"``, ``"buyer:greedy"``). Callers that already hold player codes pass a
``Games`` to the ``*_games`` variants and skip the encoding.

The batch methods (Bradley-Terry and its bootstrap, the paired leaderboard) do not depend on
the order of the records. Online Elo does; sort the records with :func:`canonical_order`
(by match id, then market index) first so that the result does not depend on the order in
which matches finished.

Rating scale
------------
One ``RatingScale(points=400, base=10, initial=1000)`` carries the scale every function
uses::

    P(a beats b) = E_ab = 1 / (1 + base ** ((R_b - R_a) / points))

so 400 points of difference are odds of 10:1. Internally Bradley-Terry is fitted in natural
log-odds units theta = R / scale.factor. A named ``reference`` is pinned at ``initial``
(or, without one, the mean rating is ``initial``); only differences are identified.

Modules: ``scale`` (the scale, leaderboard rows, the percentile interval), ``bradley_terry``
(games as arrays and the fit), ``elo``, ``bootstrap`` (intervals), ``paired`` (within-side
leaderboards).
"""

from __future__ import annotations

from arena.rewards import rating_score as score
from tournaments.ratings.bootstrap import bootstrap_bt, bootstrap_games
from tournaments.ratings.bradley_terry import DEFAULT_L2, Games, bradley_terry, fit_games
from tournaments.ratings.elo import (
    DEFAULT_K,
    canonical_order,
    elo,
    elo_shuffled,
    elo_shuffled_games,
)
from tournaments.ratings.paired import PairedComparison, PairedLeaderboard, paired_leaderboard
from tournaments.ratings.scale import (
    ELO_SCALE,
    RatedPlayer,
    RatingScale,
    expected_score,
    percentile_interval,
    ranks_from_intervals,
    to_table,
)

__all__ = [
    "DEFAULT_K",
    "DEFAULT_L2",
    "ELO_SCALE",
    "Games",
    "PairedComparison",
    "PairedLeaderboard",
    "RatedPlayer",
    "RatingScale",
    "bootstrap_bt",
    "bootstrap_games",
    "bradley_terry",
    "canonical_order",
    "elo",
    "elo_shuffled",
    "elo_shuffled_games",
    "expected_score",
    "fit_games",
    "paired_leaderboard",
    "percentile_interval",
    "ranks_from_intervals",
    "score",
    "to_table",
]
