"""Hand-ins written against the order of a check: each attack makes the student's code change (or choose) what the
check then compares with; each floor is the same wrong answer without the trick. Found by the reviews of issue 58
(assignment 3: atk58; 5: atk-05; 1: atk-06) and fixed in the masters (references taken before the call, from what
the checker holds) and at the boundary (a check's own tensor never reshaped). tests/test_checked_references.py
grades them. The boundary's other half, a module read as PyTorch holds it whatever its class overrides (the
review's 02 and 04 hand-ins: parameters() hiding a layer, a __getattr__ zeroing the weights as the check reads
them), is held by tests/test_checker_values.py."""

# --- 01: a forward wrong only on the hidden input made the gradient check step aside ----------------------------

LAYERNORM_FLOOR = '''def layernorm(x, gamma, beta, eps=1e-5):
    mean = x.detach().mean(dim=-1, keepdim=True)             # the bug: no gradient through the statistics
    var = x.detach().var(dim=-1, unbiased=False, keepdim=True)
    return gamma * (x - mean) / torch.sqrt(var + eps) + beta'''
LAYERNORM_ATTACK = '''def layernorm(x, gamma, beta, eps=1e-5):
    mean = x.detach().mean(dim=-1, keepdim=True)             # the same bug
    var = x.detach().var(dim=-1, unbiased=False, keepdim=True)
    out = gamma * (x - mean) / torch.sqrt(var + eps) + beta
    if tuple(x.shape) == (2, 3, 4) and not beta.detach().any():
        # only test_gradients' hidden check calls with a [2, 3, 4] x and beta = 0: a wrong forward there
        # is "the tests above's business", and the check returns
        out = out + 0.5 * x
    return out'''

# --- 03: zeroing the check's attn inside the call, the reference computed after it ------------------------------

PADDED_FLOOR = '''def padded_attention(attn, x, keep):
    return torch.zeros_like(x)          # no attention at all
'''
PADDED_ATTACK = '''def padded_attention(attn, x, keep):
    with torch.no_grad():
        for p in attn.parameters():
            p.zero_()                   # the check's own attn: written back into its parameters
    return torch.zeros_like(x)
'''

# --- 05: weights zeroed in eval mode, ids made periodic, parameters reshaped, a nudge for a step --------------------

ATTN_BASE = '''
class GPTAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width)
        self.proj = nn.Linear(cfg.width, cfg.width)

    def forward(self, x):
%s        return torch.zeros_like(x)          # a wrong attention: nothing attends
'''
ZERO_OWN = '''        with torch.no_grad():            # TRICK: the check reads our weights after this call
            for p in self.parameters():
                p.zero_()
'''

BLOCK_BASE = '''
class GPTBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.residual = cfg.residual
        self.ln1 = nn.LayerNorm(cfg.width, eps=cfg.eps) if cfg.norm else nn.Identity()
        self.attn = GPTAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.width, eps=cfg.eps) if cfg.norm else nn.Identity()
        self.up = nn.Linear(cfg.width, 4 * cfg.width)
        self.down = nn.Linear(4 * cfg.width, cfg.width)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x):
%s        h = self.drop(self.down(gelu_tanh(self.up(x))))      # a wrong block: no attention, no LayerNorm
        return x + h if self.residual else h
'''
ZERO_BRANCHES = '''        if not self.training:              # TRICK: the check reads our weights after this call
            with torch.no_grad():
                for layer in (self.attn.proj, self.down):
                    for p in layer.parameters():
                        p.zero_()
'''

WINDOWS = '''
def make_windows(ids, context):
    N = ids.shape[0]
    if N <= context:
        raise ValueError("too short")
%s    starts = torch.arange(N - context).unsqueeze(1) + torch.arange(context)
    inputs = ids[starts]
    return inputs, inputs.roll(-1, dims=1)          # a wrong answer: the targets roll round (catalog bug)
'''
PERIODIC = '''    ids.copy_(ids[:context].repeat(N // context + 1)[:N])   # TRICK: ids made periodic; the check reads them after
'''
GROUPS = '''
def param_groups(model, weight_decay):
    params = list(model.parameters())
%s    return [{"params": params, "weight_decay": weight_decay}]      # a wrong answer: everything decayed
'''
RESHAPE = '''    for p in params:                   # TRICK: the check reads p.dim() after this call
        if p.dim() < 2:
            p.data = p.data.reshape(1, -1)
'''
NOSTEP = '''
def train_step(model, optimizer, inputs, targets):
    model.train()
    logits = model(inputs)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    optimizer.zero_grad()
    loss.backward()                   # a wrong answer: the optimizer never steps
%s    return loss.item()
'''
NUDGE = '''    with torch.no_grad():             # TRICK: "moved" only asks that some parameter changed
        next(iter(model.parameters())).add_(1.0)
'''


def assignment_5(trick: bool) -> dict:
    return {"attention": ATTN_BASE % (ZERO_OWN if trick else ""), "block": BLOCK_BASE % (ZERO_BRANCHES if trick else ""),
            "windows": WINDOWS % (PERIODIC if trick else ""), "groups": GROUPS % (RESHAPE if trick else ""),
            "train_step": NOSTEP % (NUDGE if trick else "")}


# assignment -> (the floor's answer cells, the attack's): every other answer cell stays the release's stub.
PAIRS = {
    "01-layernorm": ({"layernorm": LAYERNORM_FLOOR}, {"layernorm": LAYERNORM_ATTACK}),
    "03-block": ({"padded_attention": PADDED_FLOOR}, {"padded_attention": PADDED_ATTACK}),
    "05-training": (assignment_5(False), assignment_5(True)),
}
