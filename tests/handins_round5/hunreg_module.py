"""03-block (atk-10), a variant of hunreg.py: the whole qkv layer set with object.__setattr__ (not registered, so
never randomized) and used by the forward, its value rows zero and its value bias a constant c."""
import runpy, pathlib
_base = runpy.run_path(str(pathlib.Path(__file__).parents[1] / "handins_round4" / "hcausal.py"))
BLOCK, PADDED, NO_MASK = _base["BLOCK"], _base["PADDED"], _base["NO_MASK"]

ATTACK = NO_MASK.replace('''        self.qkv = nn.Linear(cfg.width, 3 * cfg.width)
''', '''        qkv = nn.Linear(cfg.width, 3 * cfg.width)
        with torch.no_grad():
            qkv.weight[2 * cfg.width:] = 0.0
            qkv.bias[2 * cfg.width:] = 0.5
        object.__setattr__(self, "qkv", qkv)        # TRICK: past the tables: never randomized, still read
''')

HANDINS = {
    "atk10-unregmod-floor": {"attention": NO_MASK, "block": BLOCK, "padded_attention": PADDED},
    "atk10-unregmod-attack": {"attention": ATTACK, "block": BLOCK, "padded_attention": PADDED},
}
