"""The tiny default language model, its project-trained tokenizer, and loading any local LM.

``build_tiny(out_dir)`` makes the default model offline, in seconds, on a CPU:

1. a corpus of protocol text: scripted sellers and buyers play a few market configs with
   the dialogue on, and every view each side was shown and every message it wrote is
   kept (``arena.text`` renders them, so the tokenizer sees exactly what models read),
   with the seller prompts that carry the analyst's short list (``agents.lm.analyst``);
2. a byte-level BPE tokenizer trained on it (``tokenizers``), digits always split one
   by one so that prices are spelled digit by digit, with ``<pad>`` and ``<eos>``;
3. a small Llama (``TinyModelConfig``: 2 layers, 96 wide by default) initialised from a
   seed, saved with ``save_pretrained`` as safetensors + JSON beside ``tokenizer.json``.

``load(path)`` opens that or any local causal-LM directory with ``from_pretrained``:
safetensors only, no remote code.

    python -m agents.lm.model --out DIR     # build the tiny default model in DIR
"""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
from safetensors import SafetensorError
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
)
from transformers.utils import logging as hf_logging

from agents.command import nonneg_int, one_line, run_guarded
from agents.lm.prompts import CUE
from agents.rollout import play_batch
from agents.torch_device import torch_device
from arena.config import MarketConfig
from arena.generator import generate_batch

PAD, EOS = "<pad>", "<eos>"

# Loading and saving a model of a few hundred kilobytes needs no progress bar per call.
hf_logging.disable_progress_bar()


@dataclass(frozen=True)
class TinyModelConfig:
    """The default model: a small Llama and the tokenizer it is built with."""

    vocab_size: int = 512
    """Tokenizer vocabulary, special tokens included (digits are always single tokens)."""
    hidden_size: int = 96
    """Width of the residual stream."""
    intermediate_size: int = 256
    """Width of each MLP."""
    layers: int = 2
    """Transformer blocks."""
    heads: int = 4
    """Attention heads (hidden_size must divide by it)."""
    max_positions: int = 4096
    """Longest prompt + completion the model is built for."""
    seed: int = 0
    """Seed of the weight initialisation and of the corpus markets."""
    corpus_markets: int = 24
    """Markets per (config, pairing) played to make the tokenizer's corpus."""

    def __post_init__(self) -> None:
        # Whole numbers in range first: heads = 0 would divide by zero below.
        for f in fields(self):
            value, low = getattr(self, f.name), 0 if f.name in ("seed", "corpus_markets") else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{f.name}: expected an integer >= {low}, got {value!r}")
        if self.hidden_size % self.heads:
            raise ValueError(f"hidden_size {self.hidden_size} must divide by heads {self.heads}")


CORPUS_CONFIGS = (
    MarketConfig(),
    MarketConfig(agent_share=0.5, disclosure="mandatory", patience=3),
    MarketConfig(
        buyers=12, products=6, inventory=1, turns=10, price_range=(100.0, 1100.0), patience=2
    ),
    MarketConfig(buyers=3, products=2, inventory=1, turns=6),
)


def corpus(markets: int = 24, seed: int = 0) -> list[str]:
    """Protocol text: every view and every message of scripted play on a few configs."""
    from agents.lm.analyst import NarratedTeacher
    from agents.scripted.buyers import Haggler, NoisyHuman, Truthful
    from agents.scripted.sellers import DescendingOffers, GreedyMatcher, PricingBandit

    texts = list(CUE.values())
    pairings = [(GreedyMatcher, Haggler), (DescendingOffers, Truthful), (PricingBandit, NoisyHuman)]
    for c, cfg in enumerate(CORPUS_CONFIGS):
        for seller, buyer in pairings:
            engine = play_batch(
                generate_batch(cfg, seed + c, markets), seller(), buyer(), prompts=True
            )
            for b in range(markets):
                for rec in engine.dialogue[b]:
                    texts += [rec.seller_prompt, rec.seller_text]
                    if rec.buyer_prompt:
                        texts += [rec.buyer_prompt, rec.buyer_text]
        narrated = NarratedTeacher(GreedyMatcher())
        play_batch(generate_batch(cfg, seed + c, markets), narrated, Truthful())
        texts += [t for r in narrated.records for t in (r["prompt"], r["completion"])]
    return texts


def train_tokenizer(texts: list[str], vocab_size: int = 512) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer with single-digit tokens, trained on ``texts``."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[PAD, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=PAD, eos_token=EOS, padding_side="left"
    )


def build_tiny(out_dir: str | Path, config: TinyModelConfig | None = None) -> Path:
    """Build the tiny default model (tokenizer trained here, weights from the seed) in
    ``out_dir``; returns the directory. Same config, same files."""
    config = config or TinyModelConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(corpus(config.corpus_markets, config.seed), config.vocab_size)
    llama = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.layers,
        num_attention_heads=config.heads,
        num_key_value_heads=config.heads,
        max_position_embeddings=config.max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    # Weight initialisation draws from torch's global generator: seed it inside a fork so
    # that the caller's random state is left as it was.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = LlamaForCausalLM(llama)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = None
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    (out / "tiny_model.json").write_text(json.dumps(asdict(config), indent=2) + "\n")
    return out


class _NoLoadReport(logging.Filter):
    """Drops transformers' LOAD REPORT (weights missing, unexpected or of another shape):
    ``load`` turns what it lists into one error line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "LOAD REPORT" not in record.getMessage()


def _load_weights(p: Path) -> torch.nn.Module:
    """The model of ``p``'s config.json with every weight from its safetensors: a file that
    lacks one (transformers would fill it at random), holds one the model has no place for,
    or one of another shape is a ``ValueError`` naming it, as is a damaged file."""
    weights = p / "model.safetensors" if (p / "model.safetensors").is_file() else p
    report = logging.getLogger("transformers.modeling_utils")
    quiet = _NoLoadReport()
    report.addFilter(quiet)
    try:
        model, info = AutoModelForCausalLM.from_pretrained(
            p,
            use_safetensors=True,
            trust_remote_code=False,
            output_loading_info=True,
            ignore_mismatched_sizes=True,  # reported in ``info``, refused below
        )
    except SafetensorError as err:  # a damaged file; neither a ValueError nor an OSError
        raise ValueError(f"{p}: cannot read the weights ({err})") from None
    finally:
        report.removeFilter(quiet)
    problems = {
        "missing": _untied(model, set(info["missing_keys"])),
        "unexpected": set(info["unexpected_keys"]),
        "of another shape": {k[0] if isinstance(k, tuple) else k for k in info["mismatched_keys"]},
    }
    said = [f"{what}: {_names(keys)}" for what, keys in problems.items() if keys]
    if said:
        raise ValueError(f"{weights}: the weights do not fit config.json ({'; '.join(said)})")
    return model


def _untied(model: torch.nn.Module, missing: set[str]) -> set[str]:
    """The missing weights that no loaded one stands for: a tied weight (the output layer
    of a model that ties it to the input embeddings) is the tensor of one that was loaded."""
    names: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), []).append(name)
    shared = {n: others for others in names.values() for n in others}
    return {k for k in missing if all(o in missing for o in shared.get(k, [k]))}


def _names(keys: set[str], shown: int = 3) -> str:
    listed = sorted(keys)
    more = f" and {len(listed) - shown} more" if len(listed) > shown else ""
    return ", ".join(listed[:shown]) + more


def load(path: str | Path, device: str = "cpu") -> tuple[torch.nn.Module, PreTrainedTokenizerFast]:
    """(model in eval mode, tokenizer with left padding) from a local directory:
    safetensors weights only, no remote code. A clear ``ValueError`` naming the file for a
    directory that is not a model, weights that are damaged or do not fit its config
    (``_load_weights``) and a tokenizer that cannot be read."""
    p = Path(path)
    if not (p / "config.json").is_file():
        raise ValueError(f"{p}: not a model directory (no config.json)")
    if not any(p.glob("*.safetensors")):
        raise ValueError(f"{p}: no safetensors weights (pickled weights are not loaded)")
    where = torch_device(device)
    model = _load_weights(p)
    model = model.to(where)
    model.eval()
    try:
        tokenizer = AutoTokenizer.from_pretrained(p, trust_remote_code=False)
    except Exception as err:  # noqa: BLE001 - tokenizers' parse errors are plain Exceptions
        missing = isinstance(err, KeyError) and err.args
        reason = f"no {err.args[0]!r} entry" if missing else one_line(err)
        raise ValueError(f"{p}: cannot read the tokenizer ({reason})") from None
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the tiny default language model.")
    parser.add_argument("--out", required=True, help="directory to write the model into")
    parser.add_argument("--seed", type=nonneg_int, default=0, help="seed of the weights")
    args = parser.parse_args(argv)
    path = build_tiny(args.out, TinyModelConfig(seed=args.seed))
    print(f"built {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_guarded("agents.lm.model", main))
