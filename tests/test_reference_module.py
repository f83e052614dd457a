"""The reference module that lessons 3 onward import: behaviour, not spelling."""

import random

import pytest
import torch
import torch.nn.functional as F

from gptcourse import (
    GPT, MLP, GPTAttention, GPTBlock, GPTConfig, build_on_meta, count_parameters, gelu_tanh,
    generate_greedy, gpt_parameter_formula, layernorm,
)

pytestmark = pytest.mark.quick

TINY = GPTConfig(vocab=50, context=12, width=32, heads=4, layers=2)
GPT2_SMALL = GPTConfig()


def tiny_model(**changes):
    torch.manual_seed(0)
    return GPT(GPTConfig(**{**TINY.__dict__, **changes})).eval()


def test_layernorm_matches_pytorch_on_any_leading_shape():
    torch.manual_seed(0)
    for shape in [(7,), (3, 5), (2, 3, 16)]:
        x = torch.randn(shape) * 3 + 1
        gamma, beta = torch.randn(shape[-1]), torch.randn(shape[-1])
        expected = F.layer_norm(x, shape[-1:], gamma, beta, eps=1e-5)
        torch.testing.assert_close(layernorm(x, gamma, beta), expected, atol=1e-5, rtol=1e-5)


def test_layernorm_of_a_constant_vector_is_beta_not_nan():
    beta = torch.arange(4.0)
    assert torch.equal(layernorm(torch.full((4,), 3.0), torch.ones(4), beta), beta)


def test_gelu_tanh_is_pytorchs_tanh_approximation_not_the_exact_gelu():
    x = torch.linspace(-6, 6, 1001, dtype=torch.float64)
    torch.testing.assert_close(gelu_tanh(x), F.gelu(x, approximate="tanh"), atol=1e-12, rtol=0)
    assert (gelu_tanh(x) - F.gelu(x)).abs().max() > 1e-4


def test_mlp_has_8d2_plus_5d_parameters_and_never_mixes_positions():
    torch.manual_seed(0)
    mlp = MLP(16)
    assert count_parameters(mlp) == 8 * 16**2 + 5 * 16
    x = torch.randn(2, 5, 16)
    changed = x.clone()
    changed[:, 3] += 1.0
    assert torch.equal(mlp(x)[:, :3], mlp(changed)[:, :3]) and torch.equal(mlp(x)[:, 4:], mlp(changed)[:, 4:])


def test_attention_rejects_width_not_divisible_by_heads():
    with pytest.raises(ValueError):
        GPTAttention(GPTConfig(width=30, heads=4))


def test_attention_matches_pytorchs_scaled_dot_product_attention():
    torch.manual_seed(0)
    attn = GPTAttention(TINY).eval()
    x = torch.randn(2, 7, TINY.width)
    q, k, v = (t.view(2, 7, TINY.heads, -1).transpose(1, 2) for t in attn.qkv(x).chunk(3, dim=-1))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(2, 7, TINY.width)
    torch.testing.assert_close(attn(x), attn.proj(y), atol=1e-5, rtol=1e-5)


def test_block_with_zeroed_branches_is_the_identity():
    torch.manual_seed(0)
    block = GPTBlock(TINY).eval()
    with torch.no_grad():
        for layer in (block.attn.proj, block.down):
            layer.weight.zero_()
            layer.bias.zero_()
    x = torch.randn(2, 6, TINY.width)
    assert torch.equal(block(x), x)


def test_logits_have_shape_batch_positions_vocabulary():
    model = tiny_model()
    assert model(torch.randint(0, TINY.vocab, (3, 9))).shape == (3, 9, TINY.vocab)


def test_no_leakage_from_later_tokens():
    model = tiny_model()
    ids = torch.randint(0, TINY.vocab, (2, 10))
    changed = ids.clone()
    changed[:, -1] = (changed[:, -1] + 1) % TINY.vocab
    assert torch.equal(model(ids)[:, :-1], model(changed)[:, :-1])
    first = ids.clone()
    first[:, 0] = (first[:, 0] + 1) % TINY.vocab
    assert not torch.allclose(model(ids)[:, 1:], model(first)[:, 1:])


def test_tied_head_is_the_token_table_and_is_counted_once():
    tied, untied = tiny_model(), tiny_model(tie_weights=False)
    assert tied.head.weight is tied.token.weight
    assert count_parameters(untied) == count_parameters(tied) + TINY.vocab * TINY.width


def test_blocks_are_distinct():
    model = tiny_model()
    first, second = model.blocks
    assert first is not second and first.up.weight.data_ptr() != second.up.weight.data_ptr()


def test_context_limit_raises():
    with pytest.raises(ValueError, match="context"):
        tiny_model()(torch.zeros(1, TINY.context + 1, dtype=torch.long))


def test_initialization_is_gpt2s():
    model = GPT(GPTConfig(vocab=500, context=64, width=64, heads=4, layers=2))
    assert abs(model.blocks[0].up.weight.std().item() - 0.02) < 0.002
    assert torch.count_nonzero(model.blocks[0].up.bias) == 0
    assert torch.equal(model.norm.weight, torch.ones(64))


@pytest.mark.parametrize("seed", range(5))
def test_formula_equals_the_built_models_count(seed):
    rng = random.Random(seed)
    heads = rng.choice([1, 2, 4])
    cfg = GPTConfig(vocab=rng.randint(10, 300), context=rng.randint(4, 64), width=heads * rng.randint(2, 12),
                    heads=heads, layers=rng.randint(1, 4))
    assert count_parameters(build_on_meta(cfg)) == gpt_parameter_formula(cfg.vocab, cfg.context, cfg.width, cfg.layers)


def test_gpt2_small_has_124_439_808_parameters_counted_on_meta():
    model = build_on_meta(GPT2_SMALL)
    assert next(model.parameters()).is_meta
    assert count_parameters(model) == gpt_parameter_formula(50257, 1024, 768, 12) == 124_439_808


def test_seed_figures_appear_as_computed_values():
    medium = GPTConfig(width=1024, heads=16, layers=24)
    assert count_parameters(build_on_meta(medium)) == 354_823_168
    no_qkv_bias = GPTBlock(GPTConfig(qkv_bias=False)).to("meta")
    assert count_parameters(no_qkv_bias) == 7_085_568
    compact = GPTConfig(vocab=100, context=16, width=32, heads=4, layers=2, tie_weights=False, qkv_bias=False)
    assert count_parameters(GPT(compact)) == 32_192


def test_greedy_generation_appends_tokens_and_respects_the_context():
    model = tiny_model()
    out = generate_greedy(model, torch.zeros(1, 3, dtype=torch.long), new_tokens=15)
    assert out.shape == (1, 18)


def test_ablation_switches_remove_the_residual_and_the_norms():
    no_norm = GPTBlock(GPTConfig(width=16, heads=2, norm=False))
    assert isinstance(no_norm.ln1, torch.nn.Identity) and isinstance(no_norm.ln2, torch.nn.Identity)
    torch.manual_seed(0)
    block = GPTBlock(GPTConfig(width=16, heads=2, residual=False)).eval()
    with torch.no_grad():
        block.down.weight.zero_()
        block.down.bias.zero_()
    assert torch.count_nonzero(block(torch.randn(1, 4, 16))) == 0    # nothing carries x forward


def test_an_attention_only_block_adds_only_its_attention_to_the_stream():
    """Lesson 12's switch: no ln2, up or down, and the block is x + attn(ln1(x))."""
    torch.manual_seed(0)
    block = GPTBlock(GPTConfig(width=16, heads=2, mlp=False)).eval()
    assert not any(hasattr(block, name) for name in ("ln2", "up", "down"))
    assert count_parameters(block) == 4 * 16 * 16 + 4 * 16 + 2 * 16     # attention and ln1 only
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        assert torch.equal(block(x), x + block.attn(block.ln1(x)))
