"""LayerNorm and RMSNorm of one token vector, in plain Python (standard library only)."""
import math


def layer_norm(x, gamma, beta, eps=1e-5):
    """x, gamma, beta: lists of width floats -> the LayerNorm of x, a new list."""
    width = len(x)
    mean = math.fsum(x) / width
    var = math.fsum((xi - mean) ** 2 for xi in x) / width   # divide by D, not D - 1
    inv_std = 1.0 / math.sqrt(var + eps)                    # eps inside the square root
    return [g * (xi - mean) * inv_std + b
            for xi, g, b in zip(x, gamma, beta, strict=True)]


def rms_norm(x, gamma, eps=1e-5):
    """x, gamma: lists of width floats -> the RMSNorm of x (no mean, no beta)."""
    width = len(x)
    mean_square = math.fsum(xi * xi for xi in x) / width
    inv_rms = 1.0 / math.sqrt(mean_square + eps)            # eps inside the square root
    return [g * xi * inv_rms for xi, g in zip(x, gamma, strict=True)]
