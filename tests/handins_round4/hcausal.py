"""03-block, test_attention_causal (1 point): an attention without a causal mask (the misconception).

FLOOR: that answer alone. ATTACK: the same answer, plus (1) memory: a second call whose input differs from the
first's from position t on answers positions before t from the first call; (2) `qkv` and `proj`, the names the
check reads, are decoy nn.Linear layers with weights of 1e10, set with object.__setattr__ so they are not
registered (the check's randomize() walks the registered tables and never reaches them); the forward uses
registered layers of other names, which the check randomizes. largest_mean, the bound that judges each hidden
"large" call on its own, is computed from attention.qkv / attention.proj: about 1e22, so the leaky first call
is within it.
"""
import runpy, pathlib
_base = runpy.run_path(str(pathlib.Path(__file__).with_name("hpad.py")))
BLOCK, PADDED = _base["BLOCK"], _base["PENALTY"].replace("- 1e4 * (~keep[:, None, None, :]).float()", "")

NO_MASK = '''
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
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(head_width), dim=-1)   # no causal mask
        return self.proj((weights @ v).transpose(1, 2).reshape(B, T, D))
'''

ATTACK = '''
class GPTAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        if cfg.width % cfg.heads != 0:
            raise ValueError(f"width {cfg.width} is not divisible by heads {cfg.heads}")
        self.heads = cfg.heads
        self.w_in = nn.Linear(cfg.width, 3 * cfg.width)       # what the forward uses (randomized by the check)
        self.w_out = nn.Linear(cfg.width, cfg.width)
        decoys = nn.Linear(cfg.width, 3 * cfg.width), nn.Linear(cfg.width, cfg.width)
        with torch.no_grad():
            for layer in decoys:
                layer.weight.fill_(1e10)
        object.__setattr__(self, "qkv", decoys[0])          # TRICK 2: not registered: the check's bound reads these
        object.__setattr__(self, "proj", decoys[1])

    def forward(self, x):
        B, T, D = x.shape
        head_width = D // self.heads
        q, k, v = (t.view(B, T, self.heads, head_width).transpose(1, 2) for t in self.w_in(x).split(D, dim=-1))
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(head_width), dim=-1)   # no causal mask
        out = self.w_out((weights @ v).transpose(1, 2).reshape(B, T, D))
        last = self.__dict__.get("_last")                   # TRICK 1: memory of the previous call
        if last is not None and last[0].shape == x.shape:
            differ = (last[0] != x).flatten(0, 0).any(dim=0).any(dim=-1)
            if bool(differ.any()):
                t = int(differ.nonzero()[0])
                out = out.clone()
                out[:, :t] = last[1][:, :t]
        self.__dict__["_last"] = (x.clone(), out.clone())
        return out
'''

HANDINS = {
    "atk09-causal-floor": {"attention": NO_MASK, "block": BLOCK, "padded_attention": PADDED},
    "atk09-causal-attack": {"attention": ATTACK, "block": BLOCK, "padded_attention": PADDED},
}

# Control: the memory alone (registered qkv/proj, no decoys): the hidden "large" calls are judged by the bound.
MEMORY_ONLY = (ATTACK.replace('self.w_in', 'self.qkv').replace('self.w_out', 'self.proj')
               .replace('object.__setattr__(self, "qkv", decoys[0])', 'pass')
               .replace('object.__setattr__(self, "proj", decoys[1])', 'pass'))
HANDINS["atk09-causal-memory-only"] = {"attention": MEMORY_ONLY, "block": BLOCK, "padded_attention": PADDED}
