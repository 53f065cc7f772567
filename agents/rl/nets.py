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

from dataclasses import asdict, dataclass

import torch
from torch import nn


def _masked_mean(h: torch.Tensor, mask: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    w = mask.unsqueeze(-1).to(h.dtype)
    return (h * w).sum(dims) / w.sum(dims).clamp_min(1.0)


def _add(a: torch.Tensor, b: torch.Tensor, grad: bool) -> torch.Tensor:
    """``a + b``, into ``a`` when no gradient is recorded (``a`` a fresh temporary)."""
    return a + b if grad else a.add_(b)


def _relu_masked(h: torch.Tensor, keep: torch.Tensor | None, grad: bool) -> torch.Tensor:
    """``relu(h) * keep`` (``relu(h)`` for keep None), in place when no gradient is recorded."""
    if grad:
        h = torch.relu(h)
        return h if keep is None else h * keep
    h = h.relu_()
    return h if keep is None else h.mul_(keep)


@dataclass(frozen=True)
class SellerNetConfig:
    features: tuple[int, int, int, int]
    """Feature counts per pair, buyer, product and market (``SELLER_FEATURES``)."""
    levels: int
    """Price levels of the price head (the offsets of the policy plus the bid level)."""
    hidden: int = 48
    """Width of every layer (at 48 the shipped seller plays 26-30k seller-turns/s greedily
    at B = 4,096 on 2 cores: ``benchmarks/training.py``)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "features", tuple(int(f) for f in self.features))

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

        Without gradients (``torch.no_grad``, ``inference_mode``) the full-size steps run
        in place, on the same operands in the same order, so the numbers are the same to
        the bit and play allocates half as much (``benchmarks/training.py``)."""
        b, n, m, _ = pair.shape
        grad = torch.is_grad_enabled()
        keep = open_[..., None].to(pair.dtype)
        count = keep.sum((1, 2)).clamp_min(1.0)  # (B, 1)
        # Small terms are added first, so that only two sums run at full (B, N, M, H) size.
        side = self.embed_buyer(buyer) + self.embed_market(market)[:, None]  # (B, N, H)
        rest = side[:, :, None] + self.embed_product(product)[:, None]
        h1 = _relu_masked(_add(self.embed_pair(pair), rest, grad), keep, grad)
        # Closed pairs are out of every mean (and out of every max below: h >= 0).
        by_buyer = h1.sum(2) / keep.sum(2).clamp_min(1.0)  # (B, N, H)
        by_product = h1.sum(1) / keep.sum(1).clamp_min(1.0)  # (B, M, H)
        whole = h1.sum((1, 2)) / count  # (B, H)
        side = self.mix_buyer(by_buyer) + self.mix_market(whole)[:, None]
        rest = side[:, :, None] + self.mix_product(by_product)[:, None]
        h2 = _add(self.mix_pair(h1), rest, grad)
        del rest, h1
        # Greedy play reads h2 at open pairs only, where the mask is 1: it skips the mask.
        h2 = _relu_masked(h2, keep if value else None, grad)
        logits = self.pair_head(h2).reshape(b, n * m)
        logits = logits.masked_fill(~open_.reshape(b, n * m), float("-inf"))
        if not value:
            return logits, h2.reshape(b, n * m, -1), None
        pooled = torch.cat([h2.sum((1, 2)) / count, h2.amax(dim=(1, 2))], dim=-1)
        return logits, h2.reshape(b, n * m, -1), self.value_head(pooled)[:, 0]

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
