"""Load GPT-2 weights stored in Hugging Face's layout into the course's GPT. Lesson 9.

The mapping is the whole story: the same function loads a randomly initialized `transformers`
GPT-2 (offline, for tests) and the real checkpoint (`GPT2LMHeadModel.from_pretrained("gpt2")`, with
internet). Nothing here imports `transformers`.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from gptcourse.model import GPT, GPTConfig

# Hugging Face name (inside transformer.h.{i}.) -> ours (inside blocks.{i}.). GPT-2 stores its
# linear layers as `Conv1D` with weight [in, out], the transpose of nn.Linear's [out, in].
BLOCK_NAMES = {
    "ln_1.weight": "ln1.weight",
    "ln_1.bias": "ln1.bias",
    "attn.c_attn.weight": "attn.qkv.weight",      # W_Q, W_K, W_V packed, as in our qkv
    "attn.c_attn.bias": "attn.qkv.bias",
    "attn.c_proj.weight": "attn.proj.weight",
    "attn.c_proj.bias": "attn.proj.bias",
    "ln_2.weight": "ln2.weight",
    "ln_2.bias": "ln2.bias",
    "mlp.c_fc.weight": "up.weight",
    "mlp.c_fc.bias": "up.bias",
    "mlp.c_proj.weight": "down.weight",
    "mlp.c_proj.bias": "down.bias",
}
TRANSPOSED = {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"}
TOP_NAMES = {
    "transformer.wte.weight": "token.weight",
    "transformer.wpe.weight": "position.weight",
    "transformer.ln_f.weight": "norm.weight",
    "transformer.ln_f.bias": "norm.bias",
}
# Buffers some transformers versions keep in a block's state dict: the causal mask, not weights.
IGNORED_BUFFERS = {"attn.bias", "attn.masked_bias"}


def config_from_hf(hf_config) -> GPTConfig:
    """Our GPTConfig for a `transformers.GPT2Config` (read by attribute, so no import is needed)."""
    if hf_config.activation_function != "gelu_new":
        raise ValueError(f"our blocks use tanh GELU ('gelu_new'), not {hf_config.activation_function!r}")
    return GPTConfig(
        vocab=hf_config.vocab_size, context=hf_config.n_positions, width=hf_config.n_embd,
        heads=hf_config.n_head, layers=hf_config.n_layer, dropout=0.0,
        eps=hf_config.layer_norm_epsilon, tie_weights=hf_config.tie_word_embeddings,
    )


def convert_gpt2_state_dict(hf_state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """Rename (and transpose where needed) every tensor of a Hugging Face GPT-2 state dict."""
    ours: dict[str, Tensor] = {}
    for name, tensor in hf_state_dict.items():
        if name in TOP_NAMES:
            ours[TOP_NAMES[name]] = tensor
        elif name == "lm_head.weight":
            ours["head.weight"] = tensor
        elif name.startswith("transformer.h."):
            index, rest = name.removeprefix("transformer.h.").split(".", 1)
            if rest in IGNORED_BUFFERS:
                continue
            if rest not in BLOCK_NAMES:
                raise KeyError(f"unexpected GPT-2 tensor {name}")
            ours[f"blocks.{index}.{BLOCK_NAMES[rest]}"] = tensor.t() if rest in TRANSPOSED else tensor
        else:
            raise KeyError(f"unexpected GPT-2 tensor {name}")
    # A tied checkpoint may store the head only as the token table.
    ours.setdefault("head.weight", ours["token.weight"])
    return ours


@torch.no_grad()
def load_gpt2_state_dict(model: GPT, hf_state_dict: Mapping[str, Tensor]) -> GPT:
    """Copy a Hugging Face GPT-2 state dict into `model` (every tensor, checked strictly); returns it."""
    converted = convert_gpt2_state_dict(hf_state_dict)
    model.load_state_dict(converted, strict=True)
    return model


def gpt_from_hf(hf_model) -> GPT:
    """A course GPT holding the weights of a `transformers` GPT2LMHeadModel, in eval mode."""
    model = GPT(config_from_hf(hf_model.config))
    return load_gpt2_state_dict(model, hf_model.state_dict()).eval()
