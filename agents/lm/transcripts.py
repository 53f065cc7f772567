"""Prompt/completion records from transcripts kept during batched play, and JSONL files.

A transcript is the list of turn records a market's dialogue keeps (``arena.dialogue``;
``engine.dialogue.records(b)``, the same dicts a tournament stores). Played with prompts
kept (``play_batch(..., prompts=True)``), each turn holds what each side was shown
before it wrote, and ``prompt_completion`` turns it into training records::

    {"side": "seller", "market": 17, "turn": 3, "system": "...rules...",
     "prompt": "<the view>\\nYour message:\\n", "completion": "THINK: ...\\nTO: ...",
     "violation": "ok", "error": ""}

``prompt`` is what a local model of this project continues (``agents.lm.prompts``);
``system`` plus the view (``prompt`` without its cue line) is what a chat model is sent.
``to_jsonl`` writes records one JSON object a line (what ``arena export --transcripts``
writes); ``read_jsonl`` reads them back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from numbers import Integral
from pathlib import Path

from agents.base import BuyerPolicy, SellerPolicy
from agents.lm.prompts import CUE, SYSTEM
from agents.rollout import play_batch
from arena.config import MarketConfig
from arena.generator import generate_batch

SIDES = ("seller", "buyer")


def prompt_completion(
    turns: Sequence[dict], side: str = "seller", market: int | None = None
) -> list[dict]:
    """The records of one market's transcript (turn dicts with prompts) for ``side``.

    Turns without a kept prompt are skipped (a transcript played without prompts has
    none); for the buyer side, only turns where a buyer was asked. A turn that is no turn
    record is a ValueError naming it."""
    if side not in SIDES:
        raise ValueError(f"side must be seller or buyer, got {side!r}")
    out = []
    for k, t in enumerate(turns, 1):
        _check_turn(t, k, side)
        view = t.get(f"{side}_prompt", "")
        if not view or (side == "buyer" and t.get("buyer", -1) < 0):
            continue
        out.append(
            {
                "side": side,
                "market": market,
                "turn": t["turn"],
                "system": SYSTEM[side],
                "prompt": f"{view}\n{CUE[side]}\n",
                "completion": t[f"{side}_text"],
                "violation": t[f"{side}_violation"],
                "error": t[f"{side}_error"],
            }
        )
    return out


def _check_turn(t: object, k: int, side: str) -> None:
    """Refuse (ValueError) a turn ``prompt_completion`` cannot read: no dict, a buyer that
    is no number, or a kept prompt without the message, violation and error beside it."""
    if not isinstance(t, Mapping):
        raise ValueError(f"turn {k} of the transcript is {type(t).__name__}, not a turn record")
    buyer = t.get("buyer", -1)
    if not isinstance(buyer, Integral) or isinstance(buyer, bool):
        raise ValueError(f"turn {k} of the transcript has buyer {buyer!r}")
    if t.get(f"{side}_prompt", ""):
        for key in ("turn", f"{side}_text", f"{side}_violation", f"{side}_error"):
            if key not in t:
                raise ValueError(f"turn {k} of the transcript has no {key}")


def from_engine(engine, side: str = "seller") -> list[dict]:
    """Every record of a finished batched play that kept prompts, market by market."""
    if engine.dialogue is None or not engine.dialogue.prompts:
        raise ValueError("play with prompts=True to keep what each side was shown")
    out = []
    for b in range(len(engine.dialogue)):
        index = int(engine.batch.indices[b])
        out += prompt_completion(engine.dialogue.records(b), side, index)
    return out


def teacher_records(
    config: MarketConfig,
    seller: SellerPolicy,
    buyer: BuyerPolicy,
    markets: int,
    seed: int = 0,
    side: str = "seller",
) -> list[dict]:
    """Records of ``markets`` markets of ``config`` (indices 0..markets-1 under ``seed``)
    played by a teacher pairing."""
    engine = play_batch(generate_batch(config, seed, markets), seller, buyer, prompts=True)
    return from_engine(engine, side)


def to_jsonl(records: Iterable[dict], path: str | Path) -> Path:
    """Write records one JSON object a line (UTF-8); returns the path. Every text is
    written, and ``read_jsonl`` reads it back as it was: a lone surrogate (which a served
    reply can hold, and UTF-8 cannot) becomes its JSON escape (``\\ud800``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Characters stay readable; only what UTF-8 cannot encode, a lone surrogate, is escaped:
    # inside a JSON string Python's \uXXXX for it is the JSON escape of the same character.
    with open(path, "w", encoding="utf-8", errors="backslashreplace") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return path


def read_jsonl(path: str | Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
