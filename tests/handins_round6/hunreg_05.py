"""05-training (atk-11), test_attention: round 5's hunreg against assignment 5, whose attention check is its own.

FLOOR: an attention without a causal mask. ATTACK: the same answer with qkv's weight moved from its parameter table
into qkv.__dict__, its value rows zero: every value vector is the (drawn) bias's value part, and every attention,
masked or not, outputs the same. The reference read module.qkv.weight by attribute.
"""
import runpy, pathlib
_round5 = runpy.run_path(str(pathlib.Path(__file__).parents[1] / "handins_round5" / "hunreg.py"))

BLOCK = '''
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
        attended = self.drop(self.attn(self.ln1(x)))
        x = attended + (x if self.residual else 0)
        mixed = self.drop(self.down(gelu_tanh(self.up(self.ln2(x)))))
        return mixed + (x if self.residual else 0)
'''

HANDINS = {
    "atk11-unreg-05-floor": {"attention": _round5["NO_MASK"], "block": BLOCK},
    "atk11-unreg-05-attack": {"attention": _round5["ATTACK"], "block": BLOCK},
}
