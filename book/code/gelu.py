"""GPT-2's GELU (tanh approximation) of one token vector, in plain Python."""
import math

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu_tanh(x):
    """x: a list of floats -> 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return [0.5 * xi * (1.0 + math.tanh(SQRT_2_OVER_PI * (xi + 0.044715 * xi * xi * xi)))
            for xi in x]
