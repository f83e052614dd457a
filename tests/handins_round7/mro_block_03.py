"""03-block, cell `block`: mro_block_05.py's attack on assignment 3's block (the erf GELU in place of gelu_tanh)."""
from tests.handins_round7 import mro_block_05

FLOOR = '''
class GPTBlock(nn.Module):
    """The pre-LN transformer block: x [B, T, width] -> [B, T, width]."""

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
        h = self.up(self.ln2(x))
        h = 0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0)))          # wrong: the erf GELU, not gelu_tanh
        return x + self.drop(self.down(h))
'''

# The visible checks seed with small numbers (make_block's torch.manual_seed(7)), the hidden ones with
# _course_seed's: the check's random state reaches the kernel with each call, so torch.initial_seed() in
# __init__ tells them apart, and the weights are zeroed only for the hidden checks' blocks.
ATTACK = mro_block_05.ATTACK.split("\nclass GPTBlock")[0].replace(
    "if isinstance(module, nn.Module) and frame.f_locals.get(\"mode\") is False:",
    "if isinstance(module, nn.Module) and frame.f_locals.get(\"mode\") is False and not module.__dict__.get(\"seen\", True):",
) + "\n" + FLOOR.replace("class GPTBlock(nn.Module):", "class GPTBlock(nn.Module, metaclass=_Told):").replace(
    "        super().__init__()\n", "        super().__init__()\n        self.seen = torch.initial_seed() < 2**20\n", 1)

CELLS = {"floor": {"block": FLOOR}, "attack": {"block": ATTACK}}
