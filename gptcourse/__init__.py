"""Reference code for the course: what each lesson builds in the open, in one importable place.

Lessons build every piece step by step; later lessons import it from here, and the tests prove that
the lesson's version and this module's agree.
"""

from gptcourse.model import (
    GPT,
    MLP,
    GPTAttention,
    GPTBlock,
    GPTConfig,
    build_on_meta,
    causal_attention_weights,
    count_parameters,
    gelu_tanh,
    generate_greedy,
    gpt_parameter_formula,
    layernorm,
    merge_heads,
    split_heads,
)

__all__ = [
    "GPT", "MLP", "GPTAttention", "GPTBlock", "GPTConfig", "build_on_meta", "causal_attention_weights",
    "count_parameters", "gelu_tanh", "generate_greedy", "gpt_parameter_formula", "layernorm",
    "merge_heads", "split_heads",
]
