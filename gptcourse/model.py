"""The GPT-2 transformer, read top to bottom: configuration, the smallest parts, the block, the model,
then helpers for counting and generating.

Every piece here is built in the open in a lesson first (the lesson named in its docstring); tests
check that the lesson's version and this one agree. Shapes use B (batch), T (positions), D (width),
H (heads) and V (vocabulary).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass
class GPTConfig:
    """The hyperparameters of a GPT. The defaults are GPT-2 small."""

    vocab: int = 50257
    context: int = 1024
    width: int = 768
    heads: int = 12
    layers: int = 12
    dropout: float = 0.0
    eps: float = 1e-5
    tie_weights: bool = True
    # Variants the lessons compare against GPT-2. The defaults give GPT-2 itself.
    qkv_bias: bool = True      # lesson 6: the 12D^2 + 10D block has no Q/K/V bias
    residual: bool = True      # lesson 8: take the residual additions away
    norm: bool = True          # lesson 8: take the LayerNorms away
    mlp: bool = True           # lesson 12: an attention-only model, whose circuits are easiest to read


# --- the smallest parts -----------------------------------------------------------------------------

def layernorm(x: Tensor, gamma: Tensor, beta: Tensor, eps: float = 1e-5) -> Tensor:
    """Normalize each vector over its last dimension, then scale and shift: x [..., D] -> [..., D].

    Lesson 1.
    """
    mean = x.mean(dim=-1, keepdim=True)
    # Population variance (divide by D): the statistic LayerNorm and every GPT-2 checkpoint use.
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    # eps sits inside the square root, so a constant vector gives 0 rather than 0/0.
    return gamma * (x - mean) / torch.sqrt(var + eps) + beta


def gelu_tanh(x: Tensor) -> Tensor:
    """GELU with GPT-2's tanh approximation, elementwise. Lesson 2.

    GPT-2 was trained with this form, so its weights expect it; the exact erf GELU differs by up to
    about 5e-4, enough to move a checkpoint's logits.
    """
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


class MLP(nn.Module):
    """The position-wise network D -> 4D -> D: x [..., D] -> [..., D]. Lesson 2.

    Applied to every position on its own, with the same weights: it never mixes positions.
    """

    def __init__(self, width: int):
        super().__init__()
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x: Tensor) -> Tensor:
        return self.down(gelu_tanh(self.up(x)))


# --- attention --------------------------------------------------------------------------------------

def split_heads(x: Tensor, heads: int) -> Tensor:
    """[B, T, D] -> [B, H, T, D/H]: each head gets its own slice of every position's vector."""
    B, T, D = x.shape
    # view to [B, T, H, D/H] first, then swap: a bare view to [B, H, T, D/H] would mix positions.
    return x.view(B, T, heads, D // heads).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """[B, H, T, D/H] -> [B, T, D]: the heads' outputs side by side again."""
    B, H, T, Dh = x.shape
    return x.transpose(1, 2).reshape(B, T, H * Dh)


def causal_attention_weights(q: Tensor, k: Tensor) -> Tensor:
    """Softmax attention weights [B, H, T, T]; row t puts weight only on positions <= t. Lesson 3."""
    T, head_width = q.shape[-2], q.shape[-1]
    # Scale by sqrt of the head's width (not the model's): keeps the scores' variance near 1.
    scores = q @ k.transpose(-2, -1) / math.sqrt(head_width)
    future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)   # strictly above the diagonal
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)


class GPTAttention(nn.Module):
    """Causal multi-head self-attention with one packed Q/K/V projection: x [B, T, D] -> [B, T, D].

    Lesson 3. `qkv` holds W_Q, W_K and W_V side by side (GPT-2's checkpoint stores them that way too);
    `proj` is the output projection W_O.
    """

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        if cfg.width % cfg.heads:
            raise ValueError(f"width {cfg.width} must be divisible by heads {cfg.heads}")
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width, bias=cfg.qkv_bias)
        self.proj = nn.Linear(cfg.width, cfg.width)
        self.attn_drop = nn.Dropout(cfg.dropout)

    def weights(self, x: Tensor) -> Tensor:
        """The attention weights [B, H, T, T] this layer would use on x (for looking, not training)."""
        q, k, _ = self.qkv(x).chunk(3, dim=-1)
        return causal_attention_weights(split_heads(q, self.heads), split_heads(k, self.heads))

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = (split_heads(t, self.heads) for t in self.qkv(x).chunk(3, dim=-1))
        weights = self.attn_drop(causal_attention_weights(q, k))
        return self.proj(merge_heads(weights @ v))


# --- the block --------------------------------------------------------------------------------------

class GPTBlock(nn.Module):
    """The pre-LN transformer block: x [B, T, D] -> [B, T, D]. Lesson 4.

        a = x + drop(attn(ln1(x)))
        y = a + drop(down(gelu(up(ln2(a)))))

    With `cfg.residual` or `cfg.norm` off it becomes the ablated block of lesson 8; with `cfg.mlp` off,
    the attention-only block of lesson 12 (no ln2, up or down: only the first line).
    """

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.residual = cfg.residual
        self.ln1 = nn.LayerNorm(cfg.width, eps=cfg.eps) if cfg.norm else nn.Identity()
        self.attn = GPTAttention(cfg)
        self.has_mlp = cfg.mlp
        if cfg.mlp:
            self.ln2 = nn.LayerNorm(cfg.width, eps=cfg.eps) if cfg.norm else nn.Identity()
            self.up = nn.Linear(cfg.width, 4 * cfg.width)
            self.down = nn.Linear(4 * cfg.width, cfg.width)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor) -> Tensor:
        update = self.drop(self.attn(self.ln1(x)))
        x = x + update if self.residual else update
        if not self.has_mlp:
            return x
        update = self.drop(self.down(gelu_tanh(self.up(self.ln2(x)))))
        return x + update if self.residual else update


# --- the model --------------------------------------------------------------------------------------

class GPT(nn.Module):
    """Token + position embeddings, a stack of blocks, a final LayerNorm and a head. Lesson 5.

    ids [B, T] -> logits [B, T, V]; the logits at position t score the token at t + 1.
    """

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.token = nn.Embedding(cfg.vocab, cfg.width)
        self.position = nn.Embedding(cfg.context, cfg.width)
        self.drop = nn.Dropout(cfg.dropout)
        # A comprehension builds `layers` distinct blocks; [GPTBlock(cfg)] * layers would share one.
        self.blocks = nn.ModuleList(GPTBlock(cfg) for _ in range(cfg.layers))
        self.norm = nn.LayerNorm(cfg.width, eps=cfg.eps) if cfg.norm else nn.Identity()
        self.head = nn.Linear(cfg.width, cfg.vocab, bias=False)
        if cfg.tie_weights:
            # One tensor read both ways: saves V * D parameters, as GPT-2 does.
            self.head.weight = self.token.weight
        self.apply(self._initialize)

    @staticmethod
    def _initialize(module: nn.Module) -> None:
        """Weights from N(0, 0.02^2), biases zero (LayerNorm keeps 1 and 0): GPT-2's initialization
        without its 1/sqrt(N) scaling of the residual layers (lessons 4 and 5)."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, ids: Tensor, return_hidden: bool = False):
        """ids [B, T] -> logits [B, T, V]; with return_hidden, also the stream after each stage."""
        T = ids.shape[1]
        if T > self.cfg.context:
            raise ValueError(f"sequence of {T} tokens exceeds the model's context of {self.cfg.context}")
        positions = torch.arange(T, device=ids.device)
        x = self.drop(self.token(ids) + self.position(positions))   # [B, T, D] + [T, D] broadcasts
        hidden = [x]
        for block in self.blocks:
            x = block(x)
            hidden.append(x)
        logits = self.head(self.norm(x))
        return (logits, hidden) if return_hidden else logits


# --- helpers ----------------------------------------------------------------------------------------

def count_parameters(model: nn.Module) -> int:
    """Trainable numbers in a model, each tensor once (a tied head is not counted twice). Lesson 6."""
    return sum(p.numel() for p in model.parameters())   # parameters() already skips repeats


def gpt_parameter_formula(vocab: int, context: int, width: int, layers: int) -> int:
    """N = VD + CD + L(12D^2 + 13D) + 2D for a tied GPT-2-style model. Lesson 6.

    Per block: attention 4D^2 + 4D, MLP 8D^2 + 5D, two LayerNorms 4D; final LayerNorm 2D.
    """
    return vocab * width + context * width + layers * (12 * width**2 + 13 * width) + 2 * width


def build_on_meta(cfg: GPTConfig) -> GPT:
    """A GPT whose parameters have shapes but no storage: count a 124M model without allocating it."""
    with torch.device("meta"):
        return GPT(cfg)


@torch.no_grad()
def generate_greedy(model: GPT, ids: Tensor, new_tokens: int) -> Tensor:
    """Append `new_tokens` tokens to ids [B, T], each time the highest-scoring one. Lesson 5."""
    for _ in range(new_tokens):
        window = ids[:, -model.cfg.context:]          # never feed more than the context
        next_id = model(window)[:, -1].argmax(dim=-1, keepdim=True)
        ids = torch.cat([ids, next_id], dim=1)
    return ids
