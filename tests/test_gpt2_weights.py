"""Our GPT, given a `transformers` GPT-2's weights, computes the same logits (offline, random weights)."""

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")       # no code path may touch the network
transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.quick

from gptcourse import count_parameters  # noqa: E402
from gptcourse.gpt2_weights import config_from_hf, convert_gpt2_state_dict, gpt_from_hf  # noqa: E402


def small_hf_gpt2(**changes):
    settings = dict(vocab_size=97, n_positions=32, n_embd=64, n_layer=3, n_head=4, bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(**{**settings, **changes})).eval()


def test_loaded_model_reproduces_hugging_face_logits():
    hf = small_hf_gpt2()
    ours = gpt_from_hf(hf)
    ids = torch.randint(0, 97, (3, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        difference = (hf(ids).logits - ours(ids)).abs().max().item()
    assert difference < 1e-5


def test_every_tensor_is_mapped_and_counts_agree():
    hf = small_hf_gpt2()
    ours = gpt_from_hf(hf)
    assert count_parameters(ours) == sum(p.numel() for p in hf.parameters())
    assert ours.head.weight is ours.token.weight


def test_conv1d_weights_are_transposed_into_linear_layout():
    hf = small_hf_gpt2()
    converted = convert_gpt2_state_dict(hf.state_dict())
    c_attn = hf.state_dict()["transformer.h.0.attn.c_attn.weight"]
    assert c_attn.shape == (64, 192) and converted["blocks.0.attn.qkv.weight"].shape == (192, 64)
    assert torch.equal(converted["blocks.0.attn.qkv.weight"], c_attn.t())


def test_untied_checkpoint_keeps_its_own_head():
    hf = small_hf_gpt2(tie_word_embeddings=False)
    ours = gpt_from_hf(hf)
    assert not config_from_hf(hf.config).tie_weights
    assert torch.equal(ours.head.weight, hf.lm_head.weight) and ours.head.weight is not ours.token.weight


def test_a_model_with_the_exact_gelu_is_refused():
    with pytest.raises(ValueError, match="gelu"):
        config_from_hf(transformers.GPT2Config(activation_function="gelu"))
