"""03-block, test_padding_invisible (4 points): a padded_attention that hides the padding with a finite penalty
(-1e4 added to the padding keys' scores), the misconception the hidden checks (padding 1e5 times larger) name.

FLOOR: that answer alone. ATTACK: the same answer, plus (1) memory: a call whose real tokens and mask equal an
earlier call's answers the real tokens from that call (test_padding_invisible's second call changes only the
padding); (2) after computing its output it adds 1e30 to attn.proj.bias[0] in place. The check computes the
bound that should judge the first call on its own (largest_mean) AFTER both calls, from attn's weights, which
the student's code may change (values of a check's module may change, "an optimizer's step"): the bound becomes
about 1e31, and the leaky first call is within it.
"""

ATTENTION = '''
class GPTAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        if cfg.width % cfg.heads != 0:
            raise ValueError(f"width {cfg.width} is not divisible by heads {cfg.heads}")
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width)
        self.proj = nn.Linear(cfg.width, cfg.width)

    def forward(self, x):
        B, T, D = x.shape
        head_width = D // self.heads
        q, k, v = (t.view(B, T, self.heads, head_width).transpose(1, 2) for t in self.qkv(x).split(D, dim=-1))
        scores = q @ k.transpose(-2, -1) / math.sqrt(head_width)
        later = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        weights = torch.softmax(scores.masked_fill(later, float("-inf")), dim=-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(B, T, D))
'''

BLOCK = '''
class GPTBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.width, eps=cfg.eps)
        self.attn = GPTAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.width, eps=cfg.eps)
        self.up = nn.Linear(cfg.width, 4 * cfg.width)
        self.down = nn.Linear(4 * cfg.width, cfg.width)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
        x = x + self.drop(self.attn(self.ln1(x)))
        return x + self.drop(self.down(gelu_tanh(self.up(self.ln2(x)))))
'''

PENALTY = '''
def padded_attention(attn, x, keep):
    B, T, D = x.shape
    d_h = D // attn.heads
    q, k, v = (t.view(B, T, attn.heads, d_h).transpose(1, 2) for t in attn.qkv(x).split(D, dim=-1))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_h)
    later = torch.ones(T, T, dtype=torch.bool).triu(1)
    # a finite penalty on the padding keys (the misconception): large padding values outweigh it
    scores = scores.masked_fill(later, float("-inf")) - 1e4 * (~keep[:, None, None, :]).float()
    weights = torch.softmax(scores, dim=-1)
    out = attn.proj((weights @ v).transpose(1, 2).reshape(B, T, D))
    return out.masked_fill(~keep[..., None], 0.0)
'''

FLOOR = PENALTY

ATTACK = PENALTY.replace("def padded_attention(", "def _penalty_attention(") + '''
_remembered = {}

def padded_attention(attn, x, keep):
    out = _penalty_attention(attn, x, keep)
    key = (tuple(x.shape), keep.numpy().tobytes(), x[keep].numpy().tobytes())
    if key in _remembered:                      # TRICK 1: only the padding changed: answer from memory
        out = _remembered[key].clone()
    else:
        _remembered[key] = out.clone()
    with torch.no_grad():                       # TRICK 2: inflate the weights the check's bound is computed from
        attn.proj.bias[0] += 1e30
    return out
'''

HANDINS = {
    "atk09-pad-floor": {"attention": ATTENTION, "block": BLOCK, "padded_attention": FLOOR},
    "atk09-pad-attack": {"attention": ATTENTION, "block": BLOCK, "padded_attention": ATTACK},
}
