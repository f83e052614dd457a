"""The GPT-2 transformer, read top to bottom: the smallest part first, then the parts built from it.

Shapes use B (batch), T (positions), D (width) and V (vocabulary).
"""

import torch
from torch import Tensor


def layernorm(x: Tensor, gamma: Tensor, beta: Tensor, eps: float = 1e-5) -> Tensor:
    """Normalize each vector over its last dimension, then scale and shift: x [..., D] -> [..., D]."""
    mean = x.mean(dim=-1, keepdim=True)
    # Population variance (divide by D): the statistic LayerNorm and every GPT-2 checkpoint use.
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    # eps sits inside the square root, so a constant vector gives 0 rather than 0/0.
    return gamma * (x - mean) / torch.sqrt(var + eps) + beta
