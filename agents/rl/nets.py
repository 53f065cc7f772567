"""The torch networks of the RL seller and buyer: small, with weights shared across
(buyer, product) pairs and across products, so that one network runs on markets of
any size.

Seller (``SellerNet``): every pair's features go through one embedding; each pair then
mixes in the mean embedding of its buyer's pairs, of its product's pairs and of the
market's open pairs (a DeepSets layer, permutation-equivariant in buyers and in
products); a head scores each pair, another gives the chosen pair's price-level logits
(the price is factorised from the pair: scoring every (pair, price) option as its own
pair would multiply the cost), and a value head reads the pooled market.

Buyer (``BuyerNet``): the same pattern over the products of the buyer being asked:
decision logits (reject, accept, counter), a score per product for the counter bid, and
the chosen product's bid-level logits.
"""

from __future__ import annotations

import math
import numbers
import threading
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

PLAY_ROWS = 16384
"""Most pairs per chunk of the network's play (``SellerNet._play``): a chunk's temporaries,
two (PLAY_ROWS, H) float32 buffers, fit in the cache."""


def _chunk_markets(b: int, pairs: int) -> int:
    """Markets per chunk of ``SellerNet._play``: near-equal chunks of at most about
    ``PLAY_ROWS`` pairs, each starting on a multiple of 64 pairs. A matrix product
    rounds a row by where it falls in the kernel's blocks of rows (the last few rows of
    a product are done apart: the pair head's, seen at 7 x 5 pairs a market), so the
    chunks keep every row where one product over the whole batch puts it."""
    quantum = 64 // math.gcd(pairs, 64)  # markets in 64 pairs' worth of whole markets
    chunks = -(-b * pairs // PLAY_ROWS)  # ceiling divisions
    even = -(-b // chunks)
    return -(-even // quantum) * quantum


def _check_size(name: str, value: object, low: int) -> None:
    """A size of a network (a count of features, levels, units): a whole number >= ``low``,
    checked here so that a bad one is a clear error rather than torch's."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name} must be a whole number >= {low}, got {value!r}")


def _masked_mean(h: torch.Tensor, mask: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    w = mask.unsqueeze(-1).to(h.dtype)
    return (h * w).sum(dims) / w.sum(dims).clamp_min(1.0)


@dataclass(frozen=True)
class SellerNetConfig:
    features: tuple[int, int, int, int]
    """Feature counts per pair, buyer, product and market (``SELLER_FEATURES``)."""
    levels: int
    """Price levels of the price head (``RLSeller.levels``: the anchor offsets, the
    standing bid, the expert's price and the offsets around it, the markups)."""
    hidden: int = 48
    """Width of every layer (the cost of play grows with it: ``benchmarks/training.py``)."""
    film: bool = False
    """Scale the second layer's units per market by ``1 + tanh(W whole)``, ``whole`` the
    mean first-layer embedding of the market's open pairs (a FiLM-style gate: what the
    market is like can switch pair features on and off, not only shift them)."""

    def __post_init__(self) -> None:
        features = self.features
        if not isinstance(features, list | tuple) or len(features) != 4:
            raise ValueError(
                f"features must be 4 counts (pair, buyer, product, market), got {features!r}"
            )
        for f in features:
            _check_size("features", f, 1)
        object.__setattr__(self, "features", tuple(int(f) for f in self.features))
        _check_size("levels", self.levels, 1)
        _check_size("hidden", self.hidden, 1)
        if not isinstance(self.film, bool | np.bool_):
            raise ValueError(f"film must be true or false, got {self.film!r}")

    def to_dict(self) -> dict:
        return asdict(self)


class SellerNet(nn.Module):
    def __init__(self, cfg: SellerNetConfig) -> None:
        super().__init__()
        h = cfg.hidden
        f_pair, f_buyer, f_product, f_market = cfg.features
        self.cfg = cfg
        # One embedding of a pair's features, split by where they live (a linear map of
        # the concatenation is the sum of maps of the parts, without copying them N x M).
        self.embed_pair = nn.Linear(f_pair, h)
        self.embed_buyer = nn.Linear(f_buyer, h, bias=False)
        self.embed_product = nn.Linear(f_product, h, bias=False)
        self.embed_market = nn.Linear(f_market, h, bias=False)
        self.mix_pair = nn.Linear(h, h)
        self.mix_buyer = nn.Linear(h, h, bias=False)
        self.mix_product = nn.Linear(h, h, bias=False)
        self.mix_market = nn.Linear(h, h, bias=False)
        self.pair_head = nn.Linear(h, 1)
        self.price_head = nn.Linear(h, cfg.levels)
        self.value_head = nn.Sequential(nn.Linear(2 * h, h), nn.ReLU(), nn.Linear(h, 1))
        for head in (self.pair_head, self.price_head):
            nn.init.zeros_(head.weight)
            nn.init.zeros_(head.bias)
        if cfg.film:  # created last, and zero: the other layers start as without it
            self.film = nn.Linear(h, h)
            nn.init.zeros_(self.film.weight)
            nn.init.zeros_(self.film.bias)
        self._workspace: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def forward(
        self,
        pair: torch.Tensor,
        buyer: torch.Tensor,
        product: torch.Tensor,
        market: torch.Tensor,
        open_: torch.Tensor,
        value: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Features (B, N, M, .), (B, N, .), (B, M, .), (B, .) and open_ (B, N, M) bool ->
        pair logits (B, N*M) (-inf where not open), pair embeddings (B, N*M, H) for the
        price head, values (B,) (None when ``value`` is False: greedy play needs none).

        Without gradients (``torch.no_grad``, ``inference_mode``) this is ``_play``: the
        same numbers, to the bit, computed in place."""
        if not torch.is_grad_enabled():
            return self._play(pair, buyer, product, market, open_, value)
        b, n, m, _ = pair.shape
        keep = open_[..., None].to(pair.dtype)
        count = keep.sum((1, 2)).clamp_min(1.0)  # (B, 1)
        # Small terms are added first, so that only two sums run at full (B, N, M, H) size.
        side = self.embed_buyer(buyer) + self.embed_market(market)[:, None]  # (B, N, H)
        h1 = torch.relu(
            self.embed_pair(pair) + (side[:, :, None] + self.embed_product(product)[:, None])
        )
        h1 = h1 * keep  # closed pairs out of every mean (and every max below: h >= 0)
        by_buyer = h1.sum(2) / keep.sum(2).clamp_min(1.0)  # (B, N, H)
        by_product = h1.sum(1) / keep.sum(1).clamp_min(1.0)  # (B, M, H)
        whole = h1.sum((1, 2)) / count  # (B, H)
        side = self.mix_buyer(by_buyer) + self.mix_market(whole)[:, None]
        h2 = torch.relu(
            self.mix_pair(h1) + (side[:, :, None] + self.mix_product(by_product)[:, None])
        )
        if self.cfg.film:
            h2 = h2 * self._gate(whole)
        h2 = h2 * keep
        logits = self.pair_head(h2).reshape(b, n * m)
        logits = logits.masked_fill(~open_.reshape(b, n * m), float("-inf"))
        pooled = torch.cat([h2.sum((1, 2)) / count, h2.amax(dim=(1, 2))], dim=-1)
        return logits, h2.reshape(b, n * m, -1), self.value_head(pooled)[:, 0]

    def _play(self, pair, buyer, product, market, open_, value: bool):
        """``forward`` without gradients: the same operations on the same operands in the
        same order, so the same numbers to the bit (``tests/test_rl.py`` checks it on
        random nets), run over a few hundred markets at a time (``PLAY_ROWS`` pairs, cut
        by ``_chunk_markets``), so that a chunk's (pairs, H) temporaries stay in the cache
        between the dozen passes over them (at B = 4096 on the retail config a turn of the
        network takes 22.5 ms here, against 34.4 ms in one pass: README, Performance).
        The temporaries are buffers reused from call to call (fresh ones cost a page
        fault per 4 KB). ``F.linear`` of a (B, N, M, F) input is ``addmm`` on its
        (B*N*M, F) view, written here with ``out=``.

        The embeddings returned live in a buffer: read them before the next call."""
        b, n, m, _ = pair.shape
        step = _chunk_markets(b, n * m)
        x, r, out = self._scratch(min(b, step) * n * m, b * n * m, pair)
        logits, pooled = [], []
        for s in range(0, b, step):
            e = min(b, s + step)
            rows = slice(s * n * m, e * n * m)
            lg, pool = self._play_chunk(
                pair[s:e], buyer[s:e], product[s:e], market[s:e], open_[s:e], value,
                x[: rows.stop - rows.start], r[: rows.stop - rows.start], out[rows],
            )  # fmt: skip
            logits.append(lg)
            pooled.append(pool)
        logits = logits[0] if len(logits) == 1 else torch.cat(logits)
        if not value:
            return logits, out.view(b, n * m, -1), None
        # The value head on every market at once (on a few rows, a product may round
        # differently).
        pooled = pooled[0] if len(pooled) == 1 else torch.cat(pooled)
        return logits, out.view(b, n * m, -1), self.value_head(pooled)[:, 0]

    def _play_chunk(self, pair, buyer, product, market, open_, value: bool, x, y, out):
        """One chunk of ``_play``: h1 in ``x``, its side terms in ``y``, h2 in ``out``;
        returns the pair logits and (when ``value``) the pooled market embeddings."""
        b, n, m, f = pair.shape
        full = (b, n, m, self.cfg.hidden)
        keep = open_[..., None].to(pair.dtype)
        count = keep.sum((1, 2)).clamp_min(1.0)
        side = self.embed_buyer(buyer) + self.embed_market(market)[:, None]
        e = self.embed_pair
        h1 = torch.addmm(e.bias, pair.reshape(-1, f), e.weight.t(), out=x).view(full)
        rest = torch.add(side[:, :, None], self.embed_product(product)[:, None], out=y.view(full))
        h1.add_(rest).relu_().mul_(keep)
        by_buyer = h1.sum(2) / keep.sum(2).clamp_min(1.0)
        by_product = h1.sum(1) / keep.sum(1).clamp_min(1.0)
        whole = h1.sum((1, 2)) / count
        side = self.mix_buyer(by_buyer) + self.mix_market(whole)[:, None]
        e = self.mix_pair
        h2 = torch.addmm(e.bias, x, e.weight.t(), out=out).view(full)
        rest = torch.add(side[:, :, None], self.mix_product(by_product)[:, None], out=x.view(full))
        h2.add_(rest).relu_()
        if self.cfg.film:
            h2.mul_(self._gate(whole))
        if value:  # greedy play reads h2 at open pairs only, where the mask is 1
            h2.mul_(keep)
        logits = self.pair_head(h2).reshape(b, n * m)
        logits = logits.masked_fill(~open_.reshape(b, n * m), float("-inf"))
        if not value:
            return logits, None
        return logits, torch.cat([h2.sum((1, 2)) / count, h2.amax(dim=(1, 2))], dim=-1)

    def _gate(self, whole: torch.Tensor) -> torch.Tensor:
        """(B, H) market summary -> (B, 1, 1, H) per-unit scales in (0, 2)."""
        return (1.0 + torch.tanh(self.film(whole)))[:, None, None, :]

    def _scratch(
        self, rows: int, total: int, like: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """This thread's buffers, kept while the sizes stay the same: two (rows, H) for a
        chunk's temporaries and one (total, H) for the embeddings of every pair."""
        key = threading.get_ident()
        held = self._workspace.get(key)
        if (
            held is None
            or (held[0].shape[0], held[2].shape[0]) != (rows, total)
            or (held[0].dtype, held[0].device) != (like.dtype, like.device)
        ):
            h = self.cfg.hidden
            held = tuple(
                torch.empty((k, h), dtype=like.dtype, device=like.device)
                for k in (rows, rows, total)
            )
            self._workspace[key] = held
        return held

    def __getstate__(self) -> dict:
        # Copies and pickles (Ray, deepcopy) leave the buffers behind: they are scratch.
        state = dict(super().__getstate__())
        state["_workspace"] = {}
        return state

    def price_logits(self, h_pair: torch.Tensor, level_ok: torch.Tensor) -> torch.Tensor:
        """(B, H) embeddings of the chosen pairs, (B, K) allowed levels -> (B, K) logits."""
        return self.price_head(h_pair).masked_fill(~level_ok, float("-inf"))


@dataclass(frozen=True)
class BuyerNetConfig:
    features: int
    """Features per product (``agents.rl.features.BUYER_FEATURES``)."""
    levels: int
    """Bid levels of the counter-price head."""
    hidden: int = 48
    """Width of every layer."""
    disclosure: int = 0
    """Features of the disclosure head (0: no head; the buyer never chooses to disclose)."""

    def __post_init__(self) -> None:
        for name, low in (("features", 1), ("levels", 1), ("hidden", 1), ("disclosure", 0)):
            _check_size(name, getattr(self, name), low)

    def to_dict(self) -> dict:
        return asdict(self)


class BuyerNet(nn.Module):
    def __init__(self, cfg: BuyerNetConfig) -> None:
        super().__init__()
        h = cfg.hidden
        self.cfg = cfg
        self.embed = nn.Sequential(nn.Linear(cfg.features, h), nn.ReLU(), nn.Linear(h, h))
        self.mix_product = nn.Linear(h, h)
        self.mix_market = nn.Linear(h, h, bias=False)
        self.decision_head = nn.Sequential(nn.Linear(2 * h, h), nn.ReLU(), nn.Linear(h, 3))
        self.product_head = nn.Linear(h, 1)
        self.price_head = nn.Linear(h, cfg.levels)
        self.value_head = nn.Sequential(nn.Linear(2 * h, h), nn.ReLU(), nn.Linear(h, 1))
        if cfg.disclosure:
            # Per buyer, before the market: (logit of disclosing, value of the market to it).
            self.disclosure_head = nn.Sequential(
                nn.Linear(cfg.disclosure, h), nn.ReLU(), nn.Linear(h, 2)
            )

    def disclosure(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (..., disclosure features) -> (logit of disclosing, value), each (...)."""
        out = self.disclosure_head(x)
        return out[..., 0], out[..., 1]

    def forward(
        self, x: torch.Tensor, offered: torch.Tensor, in_stock: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """x (B, M, F); offered (B, M) one-hot of the offered product (all False without an
        offer); in_stock (B, M) -> decision logits (B, 3), product logits (B, M) (-inf out
        of stock), product embeddings (B, M, H), values (B,)."""
        h1 = torch.relu(self.embed(x))
        market = _masked_mean(h1, in_stock, (1,))
        h2 = torch.relu(self.mix_product(h1) + self.mix_market(market)[:, None])
        off = (h2 * offered[..., None].to(h2.dtype)).sum(1)
        pooled = torch.cat([_masked_mean(h2, in_stock, (1,)), off], dim=-1)
        decision = self.decision_head(pooled)
        product = self.product_head(h2)[..., 0].masked_fill(~in_stock, float("-inf"))
        return decision, product, h2, self.value_head(pooled)[:, 0]

    def price_logits(self, h_product: torch.Tensor) -> torch.Tensor:
        return self.price_head(h_product)
