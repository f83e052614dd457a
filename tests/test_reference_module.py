"""The reference module that later lessons import."""

import torch
import torch.nn.functional as F

from gptcourse import layernorm


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
