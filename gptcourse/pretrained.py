"""The released GPT-2, when its weights are already on this machine: our GPT beside transformers'. Lesson 9.

Nothing here downloads. `load_pretrained` looks in the folder named by the environment variable
GPT2_WEIGHTS (what `save_pretrained` writes for a model and its tokenizer), otherwise in Hugging Face's
local cache, and returns None when neither holds GPT-2. `transformers` is imported only when called.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from gptcourse.gpt2_weights import gpt_from_hf
from gptcourse.model import generate_greedy

ENV_VAR = "GPT2_WEIGHTS"
HUB_NAME = "gpt2"          # the released GPT-2 small, as Hugging Face's cache names it


def load_pretrained(source: str | os.PathLike | None = None):
    """(transformers model in eval mode, its tokenizer) from `source`, the GPT2_WEIGHTS folder or
    the local Hugging Face cache, in that order; None when no source was named and the cache has no
    GPT-2. A folder that was named but cannot be loaded raises: a typo should not pass silently."""
    from transformers import AutoTokenizer, GPT2LMHeadModel

    named = source or os.environ.get(ENV_VAR)
    try:
        model = GPT2LMHeadModel.from_pretrained(str(named or HUB_NAME), local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(str(named or HUB_NAME), local_files_only=True)
    except OSError:
        if named:
            raise
        return None
    return model.eval(), tokenizer


@dataclass
class NextTokens:
    """What two models predict after one prompt."""

    prompt: str
    continuation: str                       # our GPT's greedy continuation
    ours: list[tuple[str, float]]           # our top tokens and their probabilities
    theirs: list[tuple[str, float]]         # transformers' top tokens and their probabilities
    max_logit_difference: float             # over the whole vocabulary, at every prompt position


@torch.no_grad()
def compare_next_tokens(hf_model, tokenizer, prompt: str, new_tokens: int = 20, k: int = 5) -> NextTokens:
    """Load `hf_model`'s weights into our GPT, continue `prompt` greedily with it, and list the top-k
    next tokens of both models after the prompt."""
    ours = gpt_from_hf(hf_model)
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    our_logits, their_logits = ours(ids), hf_model(ids).logits

    def top(logits):
        probabilities = logits[0, -1].softmax(dim=-1)
        values, indices = probabilities.topk(k)
        return [(tokenizer.decode([i]), p) for i, p in zip(indices.tolist(), values.tolist())]

    continued = generate_greedy(ours, ids, new_tokens)
    return NextTokens(
        prompt=prompt,
        continuation=tokenizer.decode(continued[0, ids.shape[1]:].tolist()),
        ours=top(our_logits),
        theirs=top(their_logits),
        max_logit_difference=(our_logits - their_logits).abs().max().item(),
    )
