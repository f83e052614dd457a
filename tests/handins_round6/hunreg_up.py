"""03-block (atk-11), test_block_matches_reference: a block with the exact erf GELU (the misconception).

FLOOR: that answer alone. ATTACK: the same answer; in __init__ up's weight is taken out of up's parameter table and
put in up.__dict__ as a plain tensor 0.005 * randn, and up's bias as zeros. The check's randomize() walks the tables and
never draws it; Linear.forward reads it by attribute, and so did the reference "from your own parameters": near 0
the erf and tanh GELUs agree, and the reference cannot tell them apart.
"""
import runpy, pathlib
_base = runpy.run_path(str(pathlib.Path(__file__).parents[1] / "handins_round4" / "hpad.py"))
ATTENTION, PADDED = _base["ATTENTION"], _base["PENALTY"]

ERF_BLOCK = '''
class GPTBlock(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.width, eps=cfg.eps)
        self.attn = GPTAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.width, eps=cfg.eps)
        self.up = nn.Linear(cfg.width, 4 * cfg.width)
        self.down = nn.Linear(4 * cfg.width, cfg.width)
        self.drop = nn.Dropout(cfg.dropout)
@@TRICK@@
    def forward(self, x):
        x = x + self.drop(self.attn(self.ln1(x)))
        return x + self.drop(self.down(F.gelu(self.up(self.ln2(x)))))     # the exact erf GELU
'''

TRICK = '''        weight = self.up._parameters.pop("weight")               # TRICK: out of the table, into __dict__
        self.up.__dict__["weight"] = 0.005 * torch.randn(weight.shape)
        self.up.__dict__["bias"] = torch.zeros_like(self.up._parameters.pop("bias"))
'''

HANDINS = {
    "atk11-unreg-up-floor": {"attention": ATTENTION, "block": ERF_BLOCK.replace("@@TRICK@@", ""),
                             "padded_attention": PADDED},
    "atk11-unreg-up-attack": {"attention": ATTENTION, "block": ERF_BLOCK.replace("@@TRICK@@", TRICK),
                              "padded_attention": PADDED},
}
