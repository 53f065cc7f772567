"""Language-model agents: local causal LMs (transformers) and served chat endpoints.

``model``: the tiny default model and its project-trained tokenizer, loading any local
causal-LM directory; ``prompts``: what a model is shown; ``generate``: batched, keyed
sampling; ``policy``: ``LMSeller`` / ``LMBuyer``; ``served``: ``ServedSeller`` /
``ServedBuyer`` over an OpenAI-compatible endpoint, with record and replay;
``transcripts``: prompt/completion records; ``train``: supervised warm start and GRPO.
"""
